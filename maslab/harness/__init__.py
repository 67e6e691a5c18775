"""Running: the runner of one run (resumable, async), one sample's solve-and-score, sweeps of
many runs, shards and merges, the Ray backend and the progress display."""
