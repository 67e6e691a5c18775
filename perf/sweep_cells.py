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
import tempfile
from pathlib import Path

from benchkit import (
    ServerProcess,
    above_zero,
    arguments,
    maslab_command,
    print_machine,
    print_table,
    run_measured,
    write_json,
)

# label -> (the sweep file's method entry, dependent rounds of model calls per sample)
METHODS = {
    "vanilla": ("vanilla", 1),
    "self_consistency": ("{name: self_consistency, label: self_consistency}", 1),
    "debate-3x2": ("{name: llm_debate, config: {agents: 3, rounds: 2}, label: debate-3x2}", 2),
    "debate-2x3": ("{name: llm_debate, config: {agents: 2, rounds: 3}, label: debate-2x3}", 3),
}
BENCHMARKS = ("arith", "collab_maze")


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
    from maslab.store.run_store import RunStore

    calls: dict[str, int] = {}
    for results in sorted(runs.rglob("results.jsonl")):
        label = results.parent.parent.name
        records = RunStore(results.parent).results()
        total = sum(r.usage.get("calls", 0) + r.scoring_usage.get("calls", 0) for r in records)
        calls[f"{results.parent.parent.parent.name}/{label}"] = int(total)
    return calls


def measure(max_cells: int, args: argparse.Namespace) -> dict[str, float | int]:
    """One sweep with ``--max-cells max_cells`` against a fresh server."""
    with ServerProcess(args.latency) as server, tempfile.TemporaryDirectory() as tmp:
        sweep = sweep_file(Path(tmp), server.url, args.limit)
        command = [*maslab_command(), "sweep", str(sweep), "--quiet",
                   "--max-cells", str(max_cells), "--concurrency", str(args.cap)]  # fmt: skip
        wall = run_measured(command, Path(tmp) / "sweep.log").check(ok=(0,)).wall
        calls = cell_calls(Path(tmp) / "runs")
        stats = server.stats()
    window = stats["last_answer"] - stats["first_arrival"]  # first arrival to last answer

    rounds = {f"{b}/{label}": r for b in BENCHMARKS for label, (_, r) in METHODS.items()}
    latency, cap = args.latency, args.cap
    cell_bounds = [max(n * latency / cap, rounds[cell] * latency) for cell, n in calls.items()]
    one_bound = max(sum(calls.values()) * latency / cap, max(rounds.values()) * latency)
    return {
        "max_cells": max_cells,
        "cells": len(calls),
        "calls": sum(calls.values()),
        "served": stats["served"],
        "peak_in_flight": stats["peak_in_flight"],
        "wall_s": round(wall, 3),
        "model_window_s": round(window, 3),
        "sum_of_cell_bounds_s": round(sum(cell_bounds), 3),
        "one_bound_s": round(one_bound, 3),
        "window_over_sum": round(window / sum(cell_bounds), 2),
        "window_over_one": round(window / one_bound, 2),
    }


COLUMNS = [
    ("max_cells", "max-cells"), ("calls", "calls"), ("peak_in_flight", "peak"),
    ("wall_s", "wall s", "{:.3f}"), ("model_window_s", "window s", "{:.3f}"),
    ("sum_of_cell_bounds_s", "sum bounds s", "{:.3f}"), ("one_bound_s", "one bound s", "{:.3f}"),
    ("window_over_sum", "window/sum", "{:.2f}"), ("window_over_one", "window/one", "{:.2f}"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--latency", type=above_zero, default=0.2)
    parser.add_argument("--cap", type=int, default=64)
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--max-cells", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    info = print_machine()
    print(f"{len(METHODS)} methods x {len(BENCHMARKS)} benchmarks, --limit {args.limit}, "
          f"cap {args.cap}, latency {args.latency * 1000:.0f} ms")  # fmt: skip
    rows = [measure(k, args) for k in args.max_cells]
    print_table(rows, COLUMNS)
    settings = {"latency_s": args.latency, "cap": args.cap, "limit": args.limit}
    write_json(args.json, {"machine": info, "settings": settings, "runs": rows})


if __name__ == "__main__":
    main()
