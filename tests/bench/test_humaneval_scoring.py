"""All 164 HumanEval tasks: the reference solutions pass, the same solutions made wrong fail.

The wrong ones keep the reference code and shift what the entry point returns (a number by one,
a bool negated, a string or sequence lengthened, None to 0): code that runs, defines the right
name and returns values of the right kinds, so only the tests' comparisons can fail it.
"""

from __future__ import annotations

import asyncio

import pytest

from maslab.bench.benchmark import get_benchmark
from maslab.core.task import Task
from maslab.evaluators.code import CodeExecution

pytestmark = pytest.mark.system

SHIFTED = """

_right = {entry}


def _shifted(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, (list, tuple)):
        return value + type(value)([None])
    return 0 if value is None else None


def {entry}(*args, **kwargs):
    return _shifted(_right(*args, **kwargs))
"""


async def scores(tasks: list[Task], code_of: dict[str, str]) -> dict[str, tuple[bool, str]]:
    evaluator = CodeExecution()
    slots = asyncio.Semaphore(4)

    async def score(task: Task) -> tuple[bool, str]:
        async with slots:
            result = await evaluator.score(task, f"```python\n{code_of[task.id]}\n```")
        return bool(result.correct), result.explanation or ""

    results = await asyncio.gather(*(score(task) for task in tasks))
    return dict(zip(code_of, results, strict=True))


async def test_reference_solutions_pass_and_shifted_ones_fail():
    tasks = get_benchmark("humaneval")().load(split="test")
    assert len(tasks) == 164
    right = await scores(tasks, {task.id: str(task.gold) for task in tasks})
    assert {i: why for i, (ok, why) in right.items() if not ok} == {}
    wrong = {t.id: str(t.gold) + SHIFTED.format(entry=t.metadata["entry_point"]) for t in tasks}
    shifted = await scores(tasks, wrong)
    assert [i for i, (ok, _) in shifted.items() if ok] == []
