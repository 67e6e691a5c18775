"""Shared unit-test running for model-written code: public tests read from prompts, and a real
sandboxed run whose report the candidate cannot forge."""

from __future__ import annotations

from maslab.code_tests import public_tests, run_tests
from maslab.task import Task

HUMANEVAL_PROMPT = '''from typing import List


def add_all(xs: List[int], start: int = 0) -> int:
    """Add the numbers to start.
    >>> add_all([1, 2, 3])
    6
    >>> add_all([], start=4)
    4
    >>> add_all([1],
    ...         start=1)
    2
    """
'''


def humaneval_task() -> Task:
    return Task(
        id="h1",
        question=f"Complete this function:\n```python\n{HUMANEVAL_PROMPT}```",
        answer_type="code",
        metadata={"entry_point": "add_all", "prompt_prefix": HUMANEVAL_PROMPT},
    )


def test_public_tests_are_the_prompts_doctests_and_asserts():
    assert public_tests(humaneval_task()) == [
        "assert add_all([1, 2, 3]) == 6",
        "assert add_all([], start=4) == 4",
    ]  # a doctest continued with "..." is not one line: left out, not mangled
    mbpp = Task(
        id="m1",
        question="Write f.\n\nYour code should pass tests like this one:\n\n```python\n"
        "assert f(2) == 4\n```",
        answer_type="code",
    )
    assert public_tests(mbpp) == ["assert f(2) == 4"]
    assert public_tests(Task(id="q", question="What is 2 + 2?")) == []


def test_the_last_doctest_ends_at_the_closing_quotes_a_fence_or_a_blank_line():
    stub = 'def half(x):\n    """Half of x.\n    >>> half(3)\n    1.5\n    """\n'
    task = Task(
        id="h2",
        question=f"Complete this function:\n```python\n{stub}```\n\nAnswer in one code block.",
        answer_type="code",
    )
    assert public_tests(task) == ["assert half(3) == 1.5"]
    fenced = Task(id="h3", question="```python\n>>> half(4)\n2.0\n```\nMore text.")
    assert public_tests(fenced) == ["assert half(4) == 2.0"]
    prose = Task(id="h4", question=">>> half(1)\n0.5\n\nThen some prose follows.")
    assert public_tests(prose) == ["assert half(1) == 0.5"]


async def test_a_candidate_runs_against_tests_in_the_sandbox():
    task = humaneval_task()
    tests = public_tests(task)
    good = await run_tests(task, "```python\n    return sum(xs) + start\n```", tests)
    assert good.passed and good.counts == (2, 2)
    bad = await run_tests(task, "```python\n    return sum(xs)\n```", tests)
    assert not bad.passed and bad.counts == (1, 2)
    assert "assert add_all([], start=4) == 4  # returned 0" in bad.feedback
    forged = (  # prints a report of its own, then leaves before the tests run
        "```python\n    return 0\n\nimport os\n"
        'print(\'0\' * 32 + \'{"error": null, "results": [{"passed": true}] * 2}\')\n'
        "os._exit(0)\n```"
    )
    run = await run_tests(task, forged, tests)
    assert not run.passed and "ended before the tests finished" in run.feedback
