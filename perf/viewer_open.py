"""How fast `maslab view` opens a 5,000-task run: start-up, the first pages, a transcript, a search.

Writes (or, with --dir, reuses) the synthetic llm_debate run of `store_scale.py` (each trace 6
messages and 6 calls, every call carrying its prompt), starts `maslab view RUN --port 0
--no-browser` as a user would, and times over HTTP, wall clock: the process start to its
listening line, the first leaderboard page (and the whole "open": process start to that page
received), a filtered sample-list page, one transcript, a new search (a streaming scan of
traces.jsonl) and the next page of the same search (answered from memory). Then the viewer's
peak RSS (VmHWM). The target: the run opens in under two seconds.

    python perf/viewer_open.py [--samples 5000] [--dir DIR] [--json PATH]
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from benchkit import arguments, maslab_command, print_machine, print_table, rss_mb, write_json
from store_scale import write_run

from maslab.store.run_store import RunStore

TARGET_S = 2.0


def _ensure_run(directory: Path, samples: int) -> None:
    """The run in ``directory``, written unless it already holds ``samples`` tasks."""
    if (directory / "manifest.json").exists() and RunStore(directory).manifest().tasks == samples:
        return
    started = time.perf_counter()
    write_run(directory, samples)
    print(f"wrote a {samples:,}-task run in {time.perf_counter() - started:.1f} s")


def _get(url: str) -> tuple[float, str]:
    """(seconds, body) of one GET."""
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read().decode()
    return time.perf_counter() - started, body


COLUMNS = [("step", "step"), ("wall_ms", "wall ms", "{:,.0f}"), ("shows", "shows")]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--dir", type=Path, help="the run to write or reuse (default: a temp dir)")
    args = parser.parse_args()
    info = print_machine()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.dir or Path(tmp) / "run"
        _ensure_run(run, args.samples)
        size = (run / "traces.jsonl").stat().st_size
        print(f"{args.samples:,} samples, traces.jsonl {size / 2**20:.0f} MiB")
        command = [*maslab_command(), "view", str(run), "--port", "0", "--no-browser"]
        started = time.perf_counter()
        viewer = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            line = viewer.stdout.readline()
            listening = time.perf_counter() - started
            match = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if match is None:
                raise SystemExit(f"the viewer did not start: {line!r}")
            url = match[0]
            rows = [{"step": "start-up: process start to listening", "wall_ms": listening * 1000,
                     "shows": "records read, summary made"}]  # fmt: skip
            task = f"task-{args.samples // 2:05d}"
            steps = {
                "first page: leaderboard + 50 samples": "",
                "sample list: wrong ones, page 3": "?outcome=wrong&page=3",
                f"one transcript ({task})": f"sample?run=0&task={task}&repeat=0",
                "search, new query (scans the traces)": "?q=Question+12",
                "search, its page 2 (from memory)": "?q=Question+12&page=2",
            }
            for name, path in steps.items():
                seconds, body = _get(url + path)
                count = re.search(r'id="count">([^<]*)<', body)
                shows = count[1] if count else f"{len(body) / 1024:.0f} KiB page"
                rows.append({"step": name, "wall_ms": seconds * 1000, "shows": shows})
                if not path:
                    opened = time.perf_counter() - started
            memory = rss_mb(viewer.pid)
        finally:
            viewer.terminate()
            viewer.wait(timeout=30)
    rows.insert(2, {"step": "open: process start to first page", "wall_ms": opened * 1000,
                    "shows": f"target < {TARGET_S:.0f} s"})  # fmt: skip
    print_table(rows, COLUMNS)
    peak = memory[1] if memory else None
    print(f"viewer peak RSS {peak:.0f} MB" if peak else "viewer peak RSS: not measured")
    write_json(args.json, {
        "machine": info, "samples": args.samples, "traces_bytes": size,
        "open_s": round(opened, 3), "target_s": TARGET_S, "peak_rss_mb": peak,
        "steps": {row["step"]: round(row["wall_ms"], 1) for row in rows},
    })  # fmt: skip


if __name__ == "__main__":
    main()
