"""Calls per second of one maslab process over HTTP, response cache off and on.

A FakeOpenAIServer in its own process answers every call at once with a fixed short reply.
maslab runs `vanilla` on CALLS generated `arith` tasks through the real openai provider
(`openai:fake@<url>`, `--concurrency CAP`), writing its run directory as any run does:

* cache off: every call goes to the server;
* cache fill: the response cache on and empty: every call goes to the server and is stored;
* cache replay: the same run again (a new run directory, the same cache): every call is replayed.

`provider` rows time the bare model stack a run uses (`load_model`, the same spec and cap)
on the same prompts, without the Runner: the difference is what the Runner costs per call.
CPU is this process's own (the server's is shown apart).

    python perf/throughput.py [--calls 5000] [--cap 64] [--profile] [--json PATH]
"""

from __future__ import annotations

import asyncio
import cProfile
import tempfile
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from benchkit import (
    ServerProcess,
    arguments,
    print_machine,
    print_table,
    top_functions,
    write_json,
)

from maslab.harness.runner import RunConfig, Runner
from maslab.llm import load_model

Profiler = cProfile.Profile | None
REPLY = (
    "Start from the first count and apply each change in order, checking every step. "
    "The answer is 42."
)


def _runner(base_url: str, calls: int, cap: int, out: Path, cache: Path | None) -> Runner:
    config = RunConfig(
        method="vanilla",
        benchmark="arith",
        benchmark_options={"size": calls},
        model=f"openai:fake@{base_url}",
        concurrency=cap,
        cache=str(cache) if cache else None,
        out=str(out),
    )
    runner = Runner(config)
    runner.open()
    return runner


def _timed(
    label: str, cache: str, calls: int, work: Coroutine[Any, Any, int], profiler: Profiler
) -> dict[str, Any]:
    """Run ``work`` (it returns the calls it made) on a fresh event loop; its row."""
    cpu, wall = time.process_time(), time.perf_counter()
    if profiler is not None:
        profiler.enable()
    done = asyncio.run(work)
    if profiler is not None:
        profiler.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert done == calls, f"{label}: {done} of {calls} calls made"
    return {
        "path": label,
        "cache": cache,
        "calls": calls,
        "wall_s": wall,
        "calls_per_s": calls / wall,
        "cpu_us": cpu / calls * 1e6,
    }


async def _run(runner: Runner) -> int:
    records = await runner.run()
    return sum(r.status == "ok" and int(r.usage["calls"]) for r in records)


async def _provider(base_url: str, prompts: list[str], cap: int, cache: Path | None) -> int:
    model = load_model(f"openai:fake@{base_url}", concurrency=cap, cache=cache)
    try:
        done = await asyncio.gather(*(model.chat(p, max_tokens=512) for p in prompts))
    finally:
        await model.aclose()
    return len(done)


def measure(
    base_url: str, calls: int, cap: int, tmp: Path, profiler: Profiler
) -> list[dict[str, Any]]:
    rows = []
    off = _runner(base_url, calls, cap, tmp / "off", None)
    prompts = [task.prompt() for task in off.tasks]
    rows.append(_timed("runner", "off", calls, _run(off), profiler))
    cache = tmp / "cache.sqlite"
    fill = _runner(base_url, calls, cap, tmp / "fill", cache)
    rows.append(_timed("runner", "fill", calls, _run(fill), profiler))
    replay = _runner(base_url, calls, cap, tmp / "replay", cache)
    rows.append(_timed("runner", "replay", calls, _run(replay), profiler))
    cache = tmp / "provider.sqlite"
    for label, path in (("off", None), ("fill", cache), ("replay", cache)):
        work = _provider(base_url, prompts, cap, path)
        rows.append(_timed("provider", label, calls, work, profiler))
    return rows


COLUMNS = [
    ("path", "path"), ("cache", "cache"), ("calls", "calls"), ("wall_s", "wall s"),
    ("calls_per_s", "calls/s"), ("cpu_us", "CPU µs/call"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--calls", type=int, default=5000, help="vanilla samples (1 call each)")
    parser.add_argument("--cap", type=int, default=64, help="--concurrency of the run")
    parser.add_argument("--profile", action="store_true", help="cProfile top 15 over all passes")
    args = parser.parse_args()
    info = print_machine()
    print(f"{args.calls} calls per pass, {args.cap} in flight, FakeOpenAIServer (own process)")

    profiler = cProfile.Profile(time.process_time) if args.profile else None
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(answer=REPLY) as server:
        rows = measure(server.url, args.calls, args.cap, Path(tmp), profiler)
        stats = server.stats()
    served, server_cpu = stats["served"], stats["cpu_s"]
    print_table(rows, COLUMNS)
    print(f"server: {served} requests served, {server_cpu:.1f} s CPU in its own process")
    result: dict[str, Any] = {
        "machine": info,
        "calls": args.calls,
        "cap": args.cap,
        "rows": rows,
        "server": {"served": served, "cpu_s": server_cpu},
    }
    if profiler is not None:
        result["profile"] = top_functions(profiler, 15)
        print("\ncProfile (CPU time) over every pass (the figures above are slowed by it):")
        print(result["profile"])
    write_json(args.json, result)


if __name__ == "__main__":
    main()
