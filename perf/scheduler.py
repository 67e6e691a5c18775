"""The call scheduler where the cap binds: first-come-first-served against progress.

A FakeOpenAIServer in a separate process answers every call after LATENCY seconds. maslab runs
two methods on TASKS generated `arith` tasks with CAP model calls in flight: `llm_debate` 3x2
(three calls at once per sample, two dependent rounds) and `self_refine` (a chain of nine
dependent calls: the fake critic never says stop). Each method runs under each scheduler
(`--scheduler fcfs|progress`) and with each admission: the run's own (as many samples open as
calls in flight, ``1``), a multiple of the cap (``4``: four samples per call slot) or every
sample at once (``all``). Each cell runs in a fresh process, so its peak RSS is its own.

Per cell: wall time and wall / bound (bound = max(calls x latency / cap, dependent calls x
latency)), per-sample latency (ResultRecord.elapsed_s, from admission to the sample's end:
mean, median, p95), the time to the first finished sample, peak RSS and its growth over the
run, and the most samples open at once. A table, then the figures as JSON (``--json PATH``
writes them to a file instead).

    python perf/scheduler.py [--tasks 256] [--cap 16] [--latency 0.15] [--admit 1 4 all]
                             [--methods llm_debate self_refine] [--json PATH]
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from benchkit import (
    ServerProcess,
    above_zero,
    arguments,
    print_machine,
    print_table,
    rss_mb,
    write_json,
)

# method -> (config, calls per sample, dependent calls per sample)
METHODS: dict[str, tuple[dict[str, Any], int, int]] = {
    "llm_debate": ({"agents": 3, "rounds": 2}, 6, 2),
    "self_refine": ({"max_iterations": 4}, 9, 9),
}
POLICIES = ("fcfs", "progress")


def measure(cell: dict[str, Any], base_url: str, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Run one cell in this (fresh) process and put its figures on ``out``."""
    from maslab.core.scheduling import CallGate
    from maslab.core.task import Task
    from maslab.harness.runner import RunConfig, Runner
    from maslab.harness.samples import Finished
    from maslab.store.run_store import ResultRecord

    class Measured(Runner):
        """A runner that admits ``admit`` samples at once and notes when samples open and end."""

        def __init__(self, config: RunConfig, admit: int) -> None:
            super().__init__(config, listener=self.finished)
            self.admitted = admit
            self.open_now = self.peak_open = 0
            self.first_done: float | None = None
            solve = self.solver.solve

            async def counted(task: Task, repeat: int, calls: CallGate) -> Finished:
                self.open_now += 1
                self.peak_open = max(self.peak_open, self.open_now)
                try:
                    return await solve(task, repeat, calls)
                finally:
                    self.open_now -= 1

            self.solver.solve = counted  # type: ignore[method-assign]

        def finished(self, record: ResultRecord) -> None:
            self.first_done = self.first_done or time.perf_counter()

    config_, _, _ = METHODS[cell["method"]]
    with tempfile.TemporaryDirectory() as tmp:
        config = RunConfig(
            method=cell["method"],
            method_config=config_,
            benchmark="arith",
            benchmark_options={"size": cell["tasks"]},
            model=f"openai:fake@{base_url}",
            concurrency=cell["cap"],
            scheduler=cell["policy"],
            out=str(Path(tmp) / "run"),
        )
        admit = cell["tasks"] if cell["admit"] == "all" else int(cell["admit"]) * cell["cap"]
        runner = Measured(config, admit)
        runner.open()
        rss_before = (rss_mb(os.getpid()) or (0.0, 0.0))[0]
        started = time.perf_counter()
        records = asyncio.run(runner.run())
        wall = time.perf_counter() - started
    latencies = sorted(r.elapsed_s or 0.0 for r in records)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put(
        {
            **cell,
            "ok": sum(r.status == "ok" for r in records),
            "wall_s": wall,
            "latency_mean_s": statistics.fmean(latencies),
            "latency_median_s": statistics.median(latencies),
            "latency_p95_s": statistics.quantiles(latencies, n=20)[18],
            "first_result_s": (runner.first_done or started) - started,
            "peak_rss_mb": peak_rss,
            "rss_growth_mb": peak_rss - rss_before,
            "peak_open_samples": runner.peak_open,
        }
    )


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """One cell: a fresh server process and a fresh harness process."""
    spawn = mp.get_context("spawn")
    with ServerProcess(cell["latency"]) as server:
        out: mp.Queue = spawn.Queue()  # type: ignore[type-arg]
        harness = spawn.Process(target=measure, args=(cell, server.url, out))
        harness.start()
        figures = out.get()
        harness.join()
        stats = server.stats()
    figures["served"], figures["peak_in_flight"] = stats["served"], stats["peak_in_flight"]
    _, calls, chain = METHODS[cell["method"]]
    bound = max(cell["tasks"] * calls * cell["latency"] / cell["cap"], chain * cell["latency"])
    return {**figures, "bound_s": bound, "ratio": figures["wall_s"] / bound}


COLUMNS = [
    ("method", "method"), ("admit", "admit"), ("policy", "policy"),
    ("wall_s", "wall s", "{:.2f}"), ("ratio", "/bound", "{:.2f}"),
    ("latency_mean_s", "mean", "{:.2f}"), ("latency_median_s", "median", "{:.2f}"),
    ("latency_p95_s", "p95", "{:.2f}"), ("first_result_s", "first", "{:.2f}"),
    ("peak_rss_mb", "RSS MB", "{:.0f}"), ("rss_growth_mb", "+RSS", "{:.1f}"),
    ("peak_open_samples", "open"), ("peak_in_flight", "calls"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__, json_help="write the figures here, not to stdout")
    parser.add_argument("--tasks", type=int, default=256)
    parser.add_argument("--cap", type=int, default=16)
    parser.add_argument("--latency", type=above_zero, default=0.15)
    parser.add_argument(
        "--admit",
        nargs="+",
        default=["1", "4", "all"],
        help="samples open at once: a multiple of the cap, or all",
    )
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    args = parser.parse_args()
    info = print_machine()
    print(f"arith x {args.tasks} tasks, cap {args.cap}, latency {args.latency * 1000:.0f} ms; "
          "per-sample latency (mean, median, p95) and first sample done in s; open = most "
          "samples open at once; calls = peak calls in flight at the server")  # fmt: skip
    cells = [
        {"method": method, "admit": admit, "policy": policy, "tasks": args.tasks,
         "cap": args.cap, "latency": args.latency}
        for method in args.methods for admit in args.admit for policy in POLICIES
    ]  # fmt: skip
    rows = []
    for n, cell in enumerate(cells, 1):
        rows.append(run_cell(cell))
        print(f"  cell {n}/{len(cells)}: {cell['method']}, admit {cell['admit']}, "
              f"{cell['policy']}: {rows[-1]['wall_s']:.2f} s", flush=True)  # fmt: skip
    print_table(rows, COLUMNS)
    settings = {"tasks": args.tasks, "cap": args.cap, "latency_s": args.latency}
    result = {"machine": info, "settings": settings, "cells": rows}
    if args.json:
        write_json(args.json, result)
    else:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
