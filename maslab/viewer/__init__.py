"""``maslab view``: a local web viewer over run directories (leaderboard, filtered and searched
sample lists, transcripts), served on 127.0.0.1 by aiohttp.

Each run's records are read once when the viewer starts (and again when its results grow);
a trace is read only when its transcript is shown, through the run's trace index, and a
search streams ``traces.jsonl`` one line at a time.
"""
