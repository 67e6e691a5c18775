"""What scoring code costs: the ``code`` evaluator (answer and tests in two linked sandboxes)
against one sandbox running answer and tests together, as the evaluator did before.

Both score the same HumanEval reference solutions, ``--concurrency`` at a time; the single
sandbox runs prompt, solution, test and ``check(entry_point)`` as one program, the cost floor
of any sandboxed scoring. Figures: wall per task and tasks per second for each, their ratio,
and that every solution passed both ways.

    python perf/code_scoring.py [--tasks 164] [--concurrency 4] [--json PATH]
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from benchkit import arguments, print_machine, print_table, write_json

from maslab.bench.benchmark import get_benchmark
from maslab.core.task import Task
from maslab.evaluators.code import CodeExecution
from maslab.sandbox import arun_python


async def examined(task: Task) -> bool:
    score = await CodeExecution().score(task, f"```python\n{task.gold}\n```")
    return bool(score.correct)


async def one_sandbox(task: Task) -> bool:
    program = f"{task.gold}\n\n{task.tests[0]}\n\ncheck({task.metadata['entry_point']})\n"
    return (await arun_python(program)).passed


async def measure(
    name: str, score: Callable[[Task], Awaitable[bool]], tasks: list[Task], concurrency: int
) -> dict:
    slots = asyncio.Semaphore(concurrency)

    async def limited(task: Task) -> bool:
        async with slots:
            return await score(task)

    start = time.perf_counter()
    passed = await asyncio.gather(*(limited(task) for task in tasks))
    seconds = time.perf_counter() - start
    return {
        "scoring": name,
        "tasks": len(tasks),
        "passed": sum(passed),
        "seconds": seconds,
        "ms_per_task": seconds / len(tasks) * 1000,
        "tasks_per_s": len(tasks) / seconds,
    }


COLUMNS = [
    ("scoring", "scoring"), ("tasks", "tasks"), ("passed", "passed"),
    ("seconds", "seconds", "{:.2f}"), ("ms_per_task", "ms/task", "{:.0f}"),
    ("tasks_per_s", "tasks/s", "{:.1f}"), ("ratio", "wall ratio", "{:.2f}x"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--tasks", type=int, default=164)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    info = print_machine()
    tasks = get_benchmark("humaneval")().load(split="test")[: args.tasks]
    print(f"{len(tasks)} HumanEval reference solutions, {args.concurrency} at a time")
    rows = [
        asyncio.run(measure(name, score, tasks, args.concurrency))
        for name, score in (("one sandbox", one_sandbox), ("examined", examined))
    ]
    for row in rows:
        row["ratio"] = row["seconds"] / rows[0]["seconds"]
    print_table(rows, COLUMNS)
    write_json(args.json, {"machine": info, "concurrency": args.concurrency, "scorings": rows})


if __name__ == "__main__":
    main()
