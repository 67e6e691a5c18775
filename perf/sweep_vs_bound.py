"""Sweeps through `maslab run` against their critical-path bound, the same workload driven
MASLab's way, and a cache replay.

A FakeOpenAIServer in a process of its own answers every call after LATENCY seconds. For
llm_debate (3 agents x 2 rounds) and self_consistency (k = 5) on TASKS generated `arith` tasks,
`maslab run` runs as a user runs it (`--model openai:fake@URL --concurrency CAP`, a fresh run
directory and response cache each), and the script measures:

- engine: the server's first request arrival to the last result line written (results.jsonl's
  modification time), against the bound max(calls x latency / cap, dependent rounds x latency);
- end to end: the command's start to its exit; the difference is the fixed costs, split into
  start-up (to the first request) and wind-down (last result to exit: summary and report);
- requests served, peak in flight, CPU and peak RSS of the maslab process;
- MASLab's way (perf/maslab_style.py in its own process): CAP threads, one per sample, each
  sample's calls in sequence through a new openai.OpenAI client per call;
- cache replay: the same command into a new run directory with the same response cache must
  make no request; its end-to-end time against the first run's.

    python perf/sweep_vs_bound.py [--tasks 256] [--cap 64] [--latency 0.2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

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

# method -> (its --config options, calls per task, dependent rounds)
METHODS: dict[str, tuple[list[str], int, int]] = {
    "llm_debate": (["agents=3", "rounds=2"], 6, 2),
    "self_consistency": (["k=5"], 5, 1),
}
MASLAB_STYLE = Path(__file__).with_name("maslab_style.py")


def maslab_run(method: str, url: str, tasks: int, cap: int, out: Path, cache: Path) -> list[str]:
    """The `maslab run` command line of one sweep, as docs/guide/run.md writes it."""
    options, _, _ = METHODS[method]
    configs = [arg for option in options for arg in ("--config", option)]
    return [
        *maslab_command(), "run", "--method", method, "--benchmark", "arith",
        "--bench-option", f"size={tasks}", "--model", f"openai:fake@{url}",
        "--concurrency", str(cap), *configs, "--out", str(out), "--cache", str(cache),
    ]  # fmt: skip


def sweep(
    method: str, server: ServerProcess, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    """One method through `maslab run`, MASLab's way, and replayed from the cache."""
    _, per_task, rounds = METHODS[method]
    calls = args.tasks * per_task
    bound = max(calls * args.latency / args.cap, rounds * args.latency)
    cache = tmp / f"{method}-cache.sqlite"
    argv = maslab_run(method, server.url, args.tasks, args.cap, tmp / f"{method}-run", cache)
    server.reset()
    run = run_measured(argv, tmp / f"{method}-run.log").check()
    stats = server.stats()
    last_result = (tmp / f"{method}-run" / "results.jsonl").stat().st_mtime
    engine = last_result - stats["first_arrival"]
    row: dict[str, Any] = {
        "calls": calls,
        "bound_s": bound,
        "engine_s": engine,
        "engine_ratio": engine / bound,
        "end_to_end_s": run.wall,
        "end_to_end_ratio": run.wall / bound,
        "fixed_s": run.wall - engine,
        "start_up_s": stats["first_arrival"] - run.started,
        "wind_down_s": run.ended - last_result,
        "served": stats["served"],
        "peak_in_flight": stats["peak_in_flight"],
        "server_cpu_ms_per_call": stats["cpu_ms_per_call"],
        **run.costs(calls),
    }

    server.reset()
    style = run_measured(
        [sys.executable, str(MASLAB_STYLE), server.url, str(tmp / "questions.json"), method,
         "--threads", str(args.cap)],
        tmp / f"{method}-maslab-style.log",
    ).check()  # fmt: skip
    driven = json.loads(style.output.strip().splitlines()[-1])
    row["maslab_style"] = {
        "wall_s": driven["wall_s"],
        "end_to_end_s": style.wall,
        "ratio_to_engine": driven["wall_s"] / engine,
        "served": server.stats()["served"],
        **style.costs(calls),
    }

    server.reset()
    argv = maslab_run(method, server.url, args.tasks, args.cap, tmp / f"{method}-replay", cache)
    replay = run_measured(argv, tmp / f"{method}-replay.log").check()
    row["replay"] = {
        "end_to_end_s": replay.wall,
        "requests": server.stats()["requests"],
        "speed_up": run.wall / replay.wall,
        **replay.costs(calls),
    }
    return row


def _questions(tasks: int, path: Path) -> None:
    from maslab.benchmarks.arith import Arith

    path.write_text(json.dumps([t.question for t in Arith(size=tasks).load("test")]))


ROWS: list[tuple[str, Any]] = [
    ("model calls", lambda r: f"{r['calls']:,}"),
    ("bound", lambda r: f"{r['bound_s']:.2f} s"),
    ("engine (first call to last result)", lambda r: f"{r['engine_s']:.2f} s"),
    ("  engine / bound", lambda r: f"{r['engine_ratio']:.3f}"),
    ("end to end (start to exit)", lambda r: f"{r['end_to_end_s']:.2f} s"),
    ("  end to end / bound", lambda r: f"{r['end_to_end_ratio']:.3f}"),
    ("  fixed costs (end to end - engine)", lambda r: f"{r['fixed_s']:.2f} s"),
    ("    start-up (start to first call)", lambda r: f"{r['start_up_s']:.2f} s"),
    ("    wind-down (last result to exit)", lambda r: f"{r['wind_down_s']:.2f} s"),
    ("requests served", lambda r: f"{r['served']:,}"),
    ("peak in flight", lambda r: f"{r['peak_in_flight']}"),
    ("CPU per call (fake server)", lambda r: f"{r['server_cpu_ms_per_call']:.2f} ms"),
    ("CPU (maslab run)", lambda r: f"{r['cpu_s']:.2f} s"),
    ("  per call", lambda r: f"{r['cpu_ms_per_call']:.2f} ms"),
    ("peak RSS (maslab run)", lambda r: f"{r['peak_rss_mb']:.0f} MB"),
    ("MASLab's way: wall (first to last sample)", lambda r: f"{r['maslab_style']['wall_s']:.2f} s"),
    ("  / maslab engine", lambda r: f"{r['maslab_style']['ratio_to_engine']:.2f}"),
    ("  end to end", lambda r: f"{r['maslab_style']['end_to_end_s']:.2f} s"),
    ("  CPU per call", lambda r: f"{r['maslab_style']['cpu_ms_per_call']:.2f} ms"),
    ("  peak RSS", lambda r: f"{r['maslab_style']['peak_rss_mb']:.0f} MB"),
    ("cache replay: end to end", lambda r: f"{r['replay']['end_to_end_s']:.2f} s"),
    ("  requests made", lambda r: f"{r['replay']['requests']}"),
    ("  speed-up (first run / replay)", lambda r: f"{r['replay']['speed_up']:.1f}x"),
    ("  peak RSS", lambda r: f"{r['replay']['peak_rss_mb']:.0f} MB"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--tasks", type=int, default=256)
    parser.add_argument("--cap", type=int, default=64, help="--concurrency, and MASLab's threads")
    parser.add_argument("--latency", type=above_zero, default=0.2, help="seconds per call")
    parser.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=list(METHODS))
    args = parser.parse_args()

    info = print_machine()
    print(
        f"{args.tasks} arith tasks, {args.latency * 1000:.0f} ms per call, {args.cap} in flight; "
        f"bound = max(calls x latency / cap, dependent rounds x latency)"
    )
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(args.latency) as server:
        _questions(args.tasks, Path(tmp) / "questions.json")
        for method in args.methods:
            results[method] = sweep(method, server, args, Path(tmp))
    columns = [("label", ""), *((m, f"{m} ({' '.join(METHODS[m][0])})") for m in results)]
    rows = [{"label": label, **{m: cell(r) for m, r in results.items()}} for label, cell in ROWS]
    print_table(rows, columns)
    for method, r in results.items():
        if r["replay"]["requests"]:
            print(f"warning: the {method} replay made {r['replay']['requests']} requests")
    settings = {"tasks": args.tasks, "cap": args.cap, "latency_s": args.latency}
    write_json(args.json, {"machine": info, "settings": settings, "methods": results})


if __name__ == "__main__":
    main()
