"""Shared unit-test running for model-written code: public tests read from prompts, and a real
sandboxed run whose report the candidate cannot forge."""

from __future__ import annotations

import pytest

from maslab.core.task import Task
from maslab.kit.code_tests import public_tests, run_tests

pytestmark = pytest.mark.system

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


def test_a_doctest_ends_at_a_blank_line_the_docstring_end_or_the_fence():
    prompt = (
        'def f(x):\n    """Twice x.\n    >>> f(1)\n    2\n\n    Also lists:\n'
        '    >>> f([1])\n    [1,\n     1]\n    >>> f(2)\n    4\n    """\n'
    )
    task = Task(id="d", question=f"Complete:\n```python\n{prompt}```", answer_type="code")
    assert public_tests(task) == [
        "assert f(1) == 2",
        "assert f([1]) == [1, 1]",
        "assert f(2) == 4",  # the last example, right before the closing quotes
    ]
    fenced = Task(id="e", question="```python\n>>> f(3)\n6\n```", answer_type="code")
    assert public_tests(fenced) == ["assert f(3) == 6"]


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
    assert not run.passed and run.counts == (0, 2)
    assert run.feedback == "The code failed to run: the program exited before the tests ran"
    leaves = "```python\n    import os\n    os._exit(0)\n```"  # leaves during the first test
    run = await run_tests(task, leaves, tests)
    assert not run.passed and run.counts == (0, 2)
    assert "exited before the tests finished" in run.feedback


async def test_a_stuck_test_fails_alone_and_the_others_still_run():
    task = Task(id="m", question="Write f(x).", answer_type="code", tests=())
    code = "```python\ndef f(x):\n    while x == 1:\n        pass\n    return x\n```"
    run = await run_tests(task, code, ["assert f(2) == 2", "assert f(1) == 1", "assert f(3) == 3"])
    assert not run.passed and run.counts == (2, 3)
    assert "assert f(1) == 1  # TimeoutError: took too long" in run.feedback


def test_an_example_ends_at_the_docstrings_end_or_a_blank_line():
    """HumanEval's last example is followed by the closing quotes, or by a blank line and
    prose: neither belongs to the expected value (nor drops the example)."""
    prompt = (
        "def f(s):\n    \"\"\"Split.\n    >>> f('a b')\n    ['a', 'b']\n    \"\"\"\n\n"
        "def g(n):\n    '''Double.\n    >>> g(2)\n    4\n\n    More words here.\n    '''\n"
    )
    task = Task(id="h2", question=f"Complete:\n```python\n{prompt}```", answer_type="code")
    assert public_tests(task) == ["assert f('a b') == ['a', 'b']", "assert g(2) == 4"]


def test_one_line_examples_of_a_defined_function_are_public_tests():
    prompt = '''def digit_sum(s: str) -> int:
    """Sum of the upper-case characters' codes.
    Examples:
        digit_sum("") => 0
        digit_sum("abAB") ==> 131
        digit_sum("A") -> 65
        is_happy(abc) => True
        digit_sum(x) => true
        other("a") == 1
    """
'''
    task = Task(id="h2", question=f"```python\n{prompt}```", answer_type="code")
    assert public_tests(task) == [
        'assert digit_sum("") == 0',
        'assert digit_sum("abAB") == 131',
        'assert digit_sum("A") == 65',
    ]  # a function the prompt does not define, or a value that is prose, is no test
