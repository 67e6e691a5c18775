"""Sweep cells at once against one after another: `maslab sweep --max-cells K`.

A FakeOpenAIServer in a separate process answers every call after LATENCY seconds. A sweep of 8
small cells (4 cheap methods x 2 generated benchmarks, `--limit 8`, no cache) runs through the
CLI as a user runs it (`maslab sweep FILE --max-cells K --concurrency CAP --quiet`), once per K.
Each cell alone is bound by max(its calls x latency / cap, its dependent rounds x latency); one
after another the sweep is bound by the sum of those, at once by one bound over all the calls:
max(total calls x latency / cap, the longest cell's rounds x latency). Beside the command's
wall time (imports, checking every cell and the closing report included) the server times the
model window, from the first request's arrival to the last answer: the ratios are the window
over each bound.

    python perf/sweep_cells.py [--latency 0.2] [--cap 64] [--limit 8] [--max-cells 1 8]
                               [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# label -> (the sweep file's method entry, dependent rounds of model calls per sample)
METHODS = {
    "vanilla": ("vanilla", 1),
    "self_consistency": ("{name: self_consistency, label: self_consistency}", 1),
    "debate-3x2": ("{name: llm_debate, config: {agents: 3, rounds: 2}, label: debate-3x2}", 2),
    "debate-2x3": ("{name: llm_debate, config: {agents: 2, rounds: 3}, label: debate-2x3}", 3),
}
BENCHMARKS = ("arith", "collab_maze")


def serve(latency: float, ready: mp.Queue, stop: mp.Event) -> None:  # type: ignore[type-arg]
    from maslab.testing import FakeOpenAIServer

    answered: list[float] = []  # when each answer left (the server answers after the latency)

    def answer(request: object) -> str:
        answered.append(time.monotonic())
        return "Adding step by step gives 42. The answer is 42."

    with FakeOpenAIServer(answer, latency=latency) as server:
        ready.put(server.base_url)
        stop.wait()
        window = max(answered) - min(answered) + latency
        ready.put((server.served, server.peak_in_flight, window))


def sweep_file(directory: Path, base_url: str, limit: int) -> Path:
    methods = "\n".join(f"  - {entry}" for entry, _ in METHODS.values())
    path = directory / "sweep.yaml"
    path.write_text(
        f"out: {directory / 'runs'}\nmodels: ['openai:fake@{base_url}']\nmethods:\n{methods}\n"
        f"benchmarks: [{', '.join(BENCHMARKS)}]\nlimit: {limit}\ncache: false\n"
    )
    return path


def cell_calls(runs: Path) -> dict[str, int]:
    """Model calls per cell (method and scoring), by method label, from the run directories."""
    from maslab.results import RunStore

    calls: dict[str, int] = {}
    for results in sorted(runs.rglob("results.jsonl")):
        label = results.parent.parent.name
        records = RunStore(results.parent).results()
        total = sum(r.usage.get("calls", 0) + r.scoring_usage.get("calls", 0) for r in records)
        calls[f"{results.parent.parent.parent.name}/{label}"] = int(total)
    return calls


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(max_cells: int, args: argparse.Namespace) -> dict[str, float | int]:
    ready: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    stop = mp.Event()
    server = mp.Process(target=serve, args=(args.latency, ready, stop), daemon=True)
    server.start()
    base_url = ready.get(timeout=30)
    with tempfile.TemporaryDirectory() as tmp:
        sweep = sweep_file(Path(tmp), base_url, args.limit)
        command = [sys.executable, "-m", "maslab.cli", "sweep", str(sweep), "--quiet",
                   "--max-cells", str(max_cells), "--concurrency", str(args.cap)]  # fmt: skip
        wall = timed(command)
        calls = cell_calls(Path(tmp) / "runs")
    stop.set()
    served, peak, window = ready.get(timeout=30)
    server.join(timeout=10)

    rounds = {f"{b}/{label}": r for b in BENCHMARKS for label, (_, r) in METHODS.items()}
    latency, cap = args.latency, args.cap
    cell_bounds = [max(n * latency / cap, rounds[cell] * latency) for cell, n in calls.items()]
    one_bound = max(sum(calls.values()) * latency / cap, max(rounds.values()) * latency)
    return {
        "max_cells": max_cells,
        "cells": len(calls),
        "calls": sum(calls.values()),
        "served": served,
        "peak_in_flight": peak,
        "wall_s": round(wall, 3),
        "model_window_s": round(window, 3),
        "sum_of_cell_bounds_s": round(sum(cell_bounds), 3),
        "one_bound_s": round(one_bound, 3),
        "window_over_sum": round(window / sum(cell_bounds), 2),
        "window_over_one": round(window / one_bound, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--cap", type=int, default=64)
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--max-cells", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()

    rows = [measure(k, args) for k in args.max_cells]
    print(f"{len(METHODS)} methods x {len(BENCHMARKS)} benchmarks, --limit {args.limit}, "
          f"cap {args.cap}, latency {args.latency * 1000:.0f} ms")  # fmt: skip
    columns = {"max-cells": "max_cells", "calls": "calls", "peak": "peak_in_flight",
               "wall s": "wall_s", "window s": "model_window_s",
               "sum bounds s": "sum_of_cell_bounds_s", "one bound s": "one_bound_s",
               "window/sum": "window_over_sum", "window/one": "window_over_one"}  # fmt: skip
    print("  " + "  ".join(f"{name:>12}" for name in columns))
    for row in rows:
        print("  " + "  ".join(f"{row[key]:>12}" for key in columns.values()))
    if args.json:
        settings = {"latency_s": args.latency, "cap": args.cap, "limit": args.limit}
        args.json.write_text(json.dumps({**settings, "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
