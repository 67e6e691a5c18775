"""Client CPU per call of the two openai transports, against FakeOpenAIServer.

The server runs in its own thread; the client's event loop runs in the main thread, so the main
thread's CPU time is the client's cost. Workload: CALLS chat completions with CAP in flight at
LATENCY seconds each; the critical-path bound is CALLS * LATENCY / CAP.

    python perf/client_overhead.py [--calls 768] [--cap 64] [--latency 0.2] [--json PATH]
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from benchkit import above_zero, arguments, print_machine, print_table, write_json

from maslab.llm import Endpoint, load_model
from maslab.testing import FakeOpenAIServer


async def run(
    transport: str, server: FakeOpenAIServer, calls: int, cap: int
) -> tuple[float, float]:
    table = {"fake": [Endpoint(base_url=server.base_url, transport=transport, max_concurrency=cap)]}
    model = load_model("openai:fake", endpoints=table)
    await model.chat("warm-up")  # connection set-up is not per-call cost
    cpu, wall = time.thread_time(), time.perf_counter()
    prompts = [f"Question {i}: what is {i} + {i}? Explain briefly." for i in range(calls)]
    await asyncio.gather(*(model.chat(p, max_tokens=64) for p in prompts))
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    await model.aclose()
    return wall, cpu


COLUMNS = [
    ("transport", "transport"), ("wall_s", "wall s", "{:.2f}"),
    ("bound_ratio", "/bound", "{:.2f}"), ("client_cpu_s", "client CPU s", "{:.2f}"),
    ("client_cpu_ms_per_call", "ms/call", "{:.2f}"), ("peak_in_flight", "peak in flight"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--calls", type=int, default=768)
    parser.add_argument("--cap", type=int, default=64)
    parser.add_argument("--latency", type=above_zero, default=0.2)
    args = parser.parse_args()
    bound = args.calls * args.latency / args.cap
    info = print_machine()
    print(
        f"{args.calls} calls, {args.cap} in flight, {args.latency * 1000:.0f} ms latency; "
        f"bound {bound:.2f} s"
    )
    rows: list[dict[str, Any]] = []
    for transport in ("http", "sdk"):
        with FakeOpenAIServer(latency=args.latency) as server:
            wall, cpu = asyncio.run(run(transport, server, args.calls, args.cap))
            rows.append(
                {
                    "transport": transport,
                    "wall_s": wall,
                    "bound_ratio": wall / bound,
                    "client_cpu_s": cpu,
                    "client_cpu_ms_per_call": cpu / args.calls * 1000,
                    "peak_in_flight": server.peak_in_flight,
                }
            )
    print_table(rows, COLUMNS)
    settings = {"calls": args.calls, "cap": args.cap, "latency_s": args.latency, "bound_s": bound}
    write_json(args.json, {"machine": info, "settings": settings, "transports": rows})


if __name__ == "__main__":
    main()
