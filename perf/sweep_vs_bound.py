"""The harness against its critical-path bound: LLM Debate over the real openai provider.

A FakeOpenAIServer in a separate process answers every call after LATENCY seconds. maslab runs
`llm_debate` (3 agents x 2 rounds, majority vote) on TASKS generated `arith` tasks with CAP model
calls in flight (`--concurrency CAP`). The bound is max(calls x latency / cap, dependent rounds
x latency); the ratio wall / bound shows what the harness itself costs. CPU seconds and peak RSS
are the harness process's own (the server's are not included).

    python perf/sweep_vs_bound.py [--tasks 128] [--cap 64] [--latency 0.2] [--endpoints-file]

By default the model is named the way the README runs a local server, `openai:fake@<url>` with
`--concurrency CAP`; `--endpoints-file` serves it from an endpoints file instead, its
`max_concurrency` set to CAP too.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import resource
import tempfile
import time
from pathlib import Path

AGENTS, ROUNDS = 3, 2


def serve(latency: float, ready: mp.Queue, stop: mp.Event) -> None:  # type: ignore[type-arg]
    from maslab.testing import FakeOpenAIServer

    answer = "Adding step by step gives 42. The answer is 42."
    with FakeOpenAIServer(lambda request: answer, latency=latency) as server:
        ready.put(server.base_url)
        stop.wait()
        ready.put((server.served, server.peak_in_flight))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=128)
    parser.add_argument("--cap", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument(
        "--endpoints-file",
        action="store_true",
        help="an endpoints file with max_concurrency CAP, not a model@url spec",
    )
    args = parser.parse_args()

    from maslab.runner import RunConfig, Runner

    ready: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    stop = mp.Event()
    server = mp.Process(target=serve, args=(args.latency, ready, stop), daemon=True)
    server.start()
    base_url = ready.get(timeout=30)
    with tempfile.TemporaryDirectory() as tmp:
        endpoints, model = None, f"openai:fake@{base_url}"
        if args.endpoints_file:
            endpoints, model = Path(tmp) / "endpoints.yaml", "openai:fake"
            endpoints.write_text(
                f"fake:\n  - base_url: {base_url}\n    max_concurrency: {args.cap}\n"
            )
        config = RunConfig(
            method="llm_debate",
            method_config={"agents": AGENTS, "rounds": ROUNDS},
            benchmark="arith",
            limit=args.tasks,
            model=model,
            endpoints=endpoints and str(endpoints),
            concurrency=args.cap,
            out=str(Path(tmp) / "run"),
        )
        runner = Runner(config)
        runner.open()
        cpu = time.process_time()
        wall = time.perf_counter()
        records = asyncio.run(runner.run())
        wall = time.perf_counter() - wall
        cpu = time.process_time() - cpu
    stop.set()
    served, peak = ready.get(timeout=30)
    server.join(timeout=10)

    tasks = len(runner.tasks)  # the benchmark may hold fewer than --tasks
    calls = tasks * AGENTS * ROUNDS
    bound = max(calls * args.latency / args.cap, ROUNDS * args.latency)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ok = sum(r.status == "ok" for r in records)
    print(f"llm_debate {AGENTS}x{ROUNDS} on {tasks} tasks, cap {args.cap}, "
          f"latency {args.latency * 1000:.0f} ms")  # fmt: skip
    print(f"  wall time        {wall:8.2f} s")
    print(f"  bound            {bound:8.2f} s   (max({calls} calls x latency / cap, "
          f"{ROUNDS} rounds x latency))")  # fmt: skip
    print(f"  ratio            {wall / bound:8.2f}")
    print(f"  requests served  {served:8d}   ({ok} samples ok)")
    print(f"  peak in flight   {peak:8d}")
    print(f"  CPU (harness)    {cpu:8.2f} s   ({cpu / calls * 1000:.2f} ms per call)")
    print(f"  peak RSS         {rss_mb:8.0f} MB")


if __name__ == "__main__":
    main()
