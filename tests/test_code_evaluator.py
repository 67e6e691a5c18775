"""The ``code`` evaluator runs the answer's code against HumanEval- and MBPP-style tests."""

from __future__ import annotations

import pytest

from maslab.evaluation import get_evaluator
from maslab.evaluators.code import CodeExecution
from maslab.sandbox import Limits
from maslab.task import Task

PROMPT = '''from typing import List


def total(xs: List[int]) -> int:
    """Sum of ``xs``."""
'''
CHECK = """
METADATA = {}


def check(candidate):
    assert candidate([1, 2, 3]) == 6
    assert candidate([]) == 0
"""
HUMANEVAL = Task(
    id="HumanEval/x",
    question=PROMPT,
    tests=(CHECK,),
    answer_type="code",
    metadata={"entry_point": "total", "prompt_prefix": PROMPT},
)
MBPP = Task(
    id="mbpp/1",
    question="Write a function square(x).",
    tests=("assert square(3) == 9", "assert square(-2) == 4"),
    answer_type="code",
)


def fenced(code: str) -> str:
    return f"Here you go:\n\n```python\n{code}```\n"


async def test_registered_as_code():
    assert get_evaluator("code") is CodeExecution


async def test_humaneval_full_function_passes():
    # No import of List: the prompt prefix supplies it.
    answer = fenced("def total(xs: List[int]) -> int:\n    return sum(xs)\n")
    score = await CodeExecution().score(HUMANEVAL, answer)
    assert (score.value, score.correct) == (1.0, True)
    assert score.extracted == "def total(xs: List[int]) -> int:\n    return sum(xs)"
    assert score.explanation == "ok"


async def test_humaneval_body_only_completion_passes():
    score = await CodeExecution().score(HUMANEVAL, fenced("    return sum(xs)\n"))
    assert score.correct


async def test_humaneval_wrong_answer_fails_with_the_assertion():
    score = await CodeExecution().score(HUMANEVAL, fenced("def total(xs):\n    return len(xs)\n"))
    assert (score.value, score.correct, score.unparsed) == (0.0, False, False)
    assert score.explanation.startswith("error")
    assert "AssertionError" in score.explanation
    assert len(score.explanation) <= 200


async def test_answer_without_code_is_unparsed():
    score = await CodeExecution().score(HUMANEVAL, "I am not sure how to do this.")
    assert score.unparsed and not score.correct and score.value == 0.0


async def test_mbpp_assert_lines():
    evaluator = CodeExecution()
    right = await evaluator.score(MBPP, fenced("def square(x):\n    return x * x\n"))
    wrong = await evaluator.score(MBPP, fenced("def square(x):\n    return 2 * x\n"))
    assert right.correct and not wrong.correct
    assert "AssertionError" in wrong.explanation


async def test_runaway_code_times_out():
    evaluator = CodeExecution(limits=Limits(wall_seconds=1))
    score = await evaluator.score(MBPP, fenced("def square(x):\n    while True:\n        pass\n"))
    assert not score.correct
    assert score.explanation == "timeout"


EARLY_EXITS = {
    "sys_exit": "import sys\nsys.exit(0)\n",
    "os_exit": "import os\nos._exit(0)\n",
    "raise_system_exit": "raise SystemExit(0)\n",
    "exit_builtin": "exit()\n",
    "fake_success_line": "import sys\nprint('ok')\nprint('0' * 32)\nsys.exit(0)\n",
    # Looks for the token where it must not be: stdin, the files in the cwd, the globals.
    "token_hunt": (
        "import os, re, sys\n"
        "seen = sys.stdin.read() + repr(globals())\n"
        "seen += ''.join(open(f).read() for f in os.listdir('.') if os.path.isfile(f))\n"
        "print(*re.findall('[0-9a-f]{32}', seen)[-1:])\n"
        "sys.exit(0)\n"
    ),
}


@pytest.mark.parametrize("exit_code", EARLY_EXITS.values(), ids=EARLY_EXITS.keys())
async def test_answer_exiting_before_the_tests_fails(exit_code: str):
    # A wrong square, so only skipping the tests could make it pass.
    answer = fenced(f"def square(x):\n    return 0\n\n{exit_code}")
    score = await CodeExecution().score(MBPP, answer)
    assert (score.value, score.correct, score.unparsed) == (0.0, False, False)
    assert score.explanation == "error: exited before the tests finished"


async def test_answer_printing_output_still_passes():
    answer = fenced(
        "print('loading')\n\ndef square(x):\n    print('squaring', x, end='')\n    return x * x\n"
    )
    score = await CodeExecution().score(MBPP, answer)
    assert (score.value, score.correct) == (1.0, True)
    assert score.explanation == "ok"
