"""A 5,000-task run through `maslab run` at 512 calls in flight, then show, report and resume.

A FakeOpenAIServer in a process of its own answers every call after LATENCY seconds. `maslab
run` runs llm_debate (3 agents x 2 rounds) on TASKS generated `arith` tasks with
`--concurrency CAP` (its own run directory and response cache). The script prints wall time
against the bound max(calls x latency / cap, 2 rounds x latency), end to end and for the engine
(first request to last result line), CPU per call, and the maslab process's resident memory
(VmRSS, and its peak VmHWM) when results.jsonl reaches a fifth, half and all of the tasks (flat
is the goal), and the errored samples. Then `maslab show RUN`, `maslab report RUN`, `maslab
compare RUN RUN` and a resume (the same `maslab run`: nothing left to do, no request made) each
run as a fresh process with its wall time and peak RSS.

    python perf/scale.py [--tasks 5000] [--concurrency 512] [--latency 0.5] [--json PATH]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
from benchkit import (
    ServerProcess,
    above_zero,
    arguments,
    maslab_command,
    print_machine,
    print_table,
    rss_mb,
    run_measured,
    write_json,
)

AGENTS, ROUNDS = 3, 2
MARKS = (0.2, 0.5, 1.0)  # of the tasks: 1,000 / 2,500 / 5,000 by default


class MemoryAtMarks:
    """Samples a process's memory as its results.jsonl passes each mark (a line count)."""

    def __init__(self, results: Path, marks: list[int]) -> None:
        self.results = results
        self.marks = marks
        self.lines = self._offset = 0
        self.samples: dict[int, dict[str, float]] = {}

    def __call__(self, pid: int) -> None:
        if len(self.samples) == len(self.marks):
            return
        try:
            with self.results.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        self.lines += chunk.count(b"\n")
        memory = rss_mb(pid)
        for mark in self.marks:
            if self.lines >= mark and mark not in self.samples and memory is not None:
                self.samples[mark] = {"lines": self.lines, "rss_mb": memory[0], "hwm_mb": memory[1]}


COLUMNS = [("what", ""), ("value", "value")]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--latency", type=above_zero, default=0.5, help="seconds per call")
    args = parser.parse_args()

    calls = args.tasks * AGENTS * ROUNDS
    bound = max(calls * args.latency / args.concurrency, ROUNDS * args.latency)
    info = print_machine()
    print(
        f"llm_debate {AGENTS}x{ROUNDS} on {args.tasks:,} arith tasks ({calls:,} calls), "
        f"--concurrency {args.concurrency}, {args.latency * 1000:.0f} ms per call; "
        f"bound {bound:.1f} s"
    )
    maslab = maslab_command()
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(args.latency) as server:
        out, cache = Path(tmp) / "run", Path(tmp) / "cache.sqlite"
        run_argv = [
            *maslab, "run", "--method", "llm_debate", "--benchmark", "arith",
            "--bench-option", f"size={args.tasks}", "--model", f"openai:fake@{server.url}",
            "--concurrency", str(args.concurrency), "--config", f"agents={AGENTS}",
            "--config", f"rounds={ROUNDS}", "--out", str(out), "--cache", str(cache),
        ]  # fmt: skip
        memory = MemoryAtMarks(out / "results.jsonl", [round(args.tasks * m) for m in MARKS])
        server.reset()
        run = run_measured(run_argv, Path(tmp) / "run.log", watch=memory).check()
        stats = server.stats()
        last_result = (out / "results.jsonl").stat().st_mtime
        records = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
        engine = last_result - stats["first_arrival"]
        figures: dict[str, Any] = {
            "calls": calls,
            "bound_s": bound,
            "end_to_end_s": run.wall,
            "end_to_end_ratio": run.wall / bound,
            "engine_s": engine,
            "engine_ratio": engine / bound,
            "start_up_s": stats["first_arrival"] - run.started,
            "wind_down_s": run.ended - last_result,
            **run.costs(calls),
            "memory_at": {str(mark): sample for mark, sample in memory.samples.items()},
            "samples": len(records),
            "errors": sum(r["status"] == "error" for r in records),
            "served": stats["served"],
            "peak_in_flight": stats["peak_in_flight"],
            "server_cpu_ms_per_call": stats["cpu_ms_per_call"],
        }
        after: dict[str, dict[str, Any]] = {}
        for name, argv in (
            ("show", [*maslab, "show", str(out)]),
            ("report", [*maslab, "report", str(out), "-o", str(Path(tmp) / "report.html")]),
            ("compare", [*maslab, "compare", str(out), str(out)]),
            ("resume", run_argv),
        ):
            server.reset()
            done = run_measured(argv, Path(tmp) / f"{name}.log").check()
            after[name] = {
                "wall_s": done.wall,
                "peak_rss_mb": done.peak_rss_mb,
                "cpu_s": done.cpu_s,
                "requests": server.stats()["requests"],
                "exit": done.returncode,
            }
        figures["after"] = after

    rows = [
        ["end to end / bound", f"{run.wall:.1f} s / {bound:.1f} s = {run.wall / bound:.3f}"],
        ["engine / bound", f"{engine:.1f} s / {bound:.1f} s = {engine / bound:.3f}"],
        ["start-up, wind-down", f"{figures['start_up_s']:.2f} s, {figures['wind_down_s']:.2f} s"],
        ["CPU per call (maslab run)", f"{figures['cpu_ms_per_call']:.2f} ms"],
        ["CPU per call (fake server)", f"{figures['server_cpu_ms_per_call']:.2f} ms"],
        ["served, peak in flight", f"{stats['served']:,}, {stats['peak_in_flight']}"],
        ["samples, errors", f"{len(records):,}, {figures['errors']}"],
        *(
            [f"memory at {mark:,} results", f"RSS {s['rss_mb']:.0f} MB, peak {s['hwm_mb']:.0f} MB"]
            for mark, s in memory.samples.items()
        ),
        ["peak RSS (maslab run)", f"{run.peak_rss_mb:.0f} MB"],
        *(
            [
                f"maslab {name}",
                f"{a['wall_s']:.2f} s, peak RSS {a['peak_rss_mb']:.0f} MB, "
                f"{a['requests']} requests, exit {a['exit']}",
            ]
            for name, a in after.items()
        ),
    ]
    print_table([{"what": what, "value": value} for what, value in rows], COLUMNS)
    settings = {"tasks": args.tasks, "concurrency": args.concurrency, "latency_s": args.latency}
    write_json(args.json, {"machine": info, "settings": settings, "run": figures})


if __name__ == "__main__":
    main()
