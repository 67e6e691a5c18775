"""The run format: a run directory's records, traces, manifest and learned state, written by
one process at a time and read by everything above."""
