"""Throughput of the math evaluator with 1 and N worker processes.

Each pool size scores the same CHECKS distinct answers (fractions, polynomials, roots, integers,
intervals; one in ten wrong), all submitted at once. The workers are started and warmed up
on other answers first, so the figure is checks per second, not process start-up.

    python perf/math_pool.py [--checks 200] [--workers 1 4] [--json PATH]
"""

from __future__ import annotations

import asyncio
import os
import time

from benchkit import arguments, print_machine, print_table, write_json

from maslab.core.task import Task
from maslab.evaluators.math import MathEvaluator


def typical_checks(count: int, first: int = 1) -> list[tuple[str, str]]:
    """``count`` distinct (gold, response) pairs of the kinds math benchmarks grade."""
    kinds = [
        lambda i: (
            rf"\frac{{{i}}}{{{i + 1}}}",
            rf"So $\boxed{{\frac{{{2 * i}}}{{{2 * i + 2}}}}}$.",
        ),
        lambda i: (f"x^2+{2 * i}x+{i * i}", rf"Expanding, we get \boxed{{(x+{i})^2}}."),
        lambda i: (rf"{i}\sqrt{{2}}", rf"The length is $\boxed{{\sqrt{{{2 * i * i}}}}}$."),
        lambda i: (str(i), f"The final answer is {i + i % 2}."),  # odd i: wrong
        lambda i: (f"[{i},{i + 1})", rf"The range is \boxed{{[{i},{i + 1})}}"),
    ]
    return [kinds[n % len(kinds)](first + n // len(kinds)) for n in range(count)]


async def score_all(evaluator: MathEvaluator, checks: list[tuple[str, str]]) -> int:
    scores = await asyncio.gather(
        *(
            evaluator.score(Task(id=str(n), question="?", gold=gold), response)
            for n, (gold, response) in enumerate(checks)
        )
    )
    return sum(score.correct for score in scores)


async def measure(workers: int, checks: list[tuple[str, str]]) -> dict:
    evaluator = MathEvaluator(workers=workers)
    try:
        start = time.perf_counter()
        await score_all(evaluator, typical_checks(workers, first=10_000))  # start every worker
        started = time.perf_counter() - start
        await score_all(evaluator, typical_checks(4 * workers, first=20_000))  # warm up
        start = time.perf_counter()
        correct = await score_all(evaluator, checks)
        seconds = time.perf_counter() - start
    finally:
        await evaluator.aclose()
    return {
        "workers": workers,
        "checks": len(checks),
        "correct": correct,
        "seconds": seconds,
        "checks_per_s": len(checks) / seconds,
        "start_s": started,
    }


COLUMNS = [
    ("workers", "workers"), ("seconds", "seconds", "{:.2f}"),
    ("checks_per_s", "checks/s", "{:.1f}"), ("speed_up", "speed-up", "{:.2f}x"),
    ("correct", "correct"), ("start_s", "start s", "{:.2f}"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--checks", type=int, default=200)
    default = min(4, os.cpu_count() or 1)
    parser.add_argument("--workers", type=int, nargs="+", default=sorted({1, default}))
    args = parser.parse_args()
    info = print_machine()
    print(f"{args.checks} checks at once")
    checks = typical_checks(args.checks)
    rows = [asyncio.run(measure(workers, checks)) for workers in args.workers]
    for row in rows:
        row["speed_up"] = row["checks_per_s"] / rows[0]["checks_per_s"]
    print_table(rows, COLUMNS)
    write_json(args.json, {"machine": info, "checks": args.checks, "pools": rows})


if __name__ == "__main__":
    main()
