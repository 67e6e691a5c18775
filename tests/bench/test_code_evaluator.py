"""The ``code`` evaluator runs the answer's code against HumanEval- and MBPP-style tests."""

from __future__ import annotations

import pytest

from maslab.bench.evaluation import get_evaluator
from maslab.core.task import Task
from maslab.evaluators.code import CodeExecution
from maslab.sandbox import Limits

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


@pytest.mark.system
async def test_humaneval_full_function_passes():
    # No import of List: the prompt prefix supplies it.
    answer = fenced("def total(xs: List[int]) -> int:\n    return sum(xs)\n")
    score = await CodeExecution().score(HUMANEVAL, answer)
    assert (score.value, score.correct) == (1.0, True)
    assert score.extracted == "def total(xs: List[int]) -> int:\n    return sum(xs)"
    assert score.explanation == "ok"


@pytest.mark.system
async def test_humaneval_body_only_completion_passes():
    score = await CodeExecution().score(HUMANEVAL, fenced("    return sum(xs)\n"))
    assert score.correct


@pytest.mark.system
async def test_humaneval_wrong_answer_fails_with_the_assertion():
    score = await CodeExecution().score(HUMANEVAL, fenced("def total(xs):\n    return len(xs)\n"))
    assert (score.value, score.correct, score.unparsed) == (0.0, False, False)
    assert score.explanation.startswith("error")
    assert "AssertionError" in score.explanation
    assert len(score.explanation) <= 200


async def test_answer_without_code_is_unparsed():
    score = await CodeExecution().score(HUMANEVAL, "I am not sure how to do this.")
    assert score.unparsed and not score.correct and score.value == 0.0


@pytest.mark.system
async def test_mbpp_assert_lines():
    evaluator = CodeExecution()
    right = await evaluator.score(MBPP, fenced("def square(x):\n    return x * x\n"))
    wrong = await evaluator.score(MBPP, fenced("def square(x):\n    return 2 * x\n"))
    assert right.correct and not wrong.correct
    assert "AssertionError" in wrong.explanation


@pytest.mark.system
async def test_runaway_code_times_out():
    evaluator = CodeExecution(limits=Limits(wall_seconds=1))
    score = await evaluator.score(MBPP, fenced("def square(x):\n    while True:\n        pass\n"))
    assert not score.correct
    assert score.explanation == "timeout"


FOLLOWED_BY = {
    "usage_example": "Usage:\n\n```python\nprint(total([1, 2]))\n```\n",
    "printed_output": "It prints:\n\n```\n3\n```\n",
    "json_block": 'As JSON:\n\n```json\n{"total": 3}\n```\n',
    "shell_block": "Run it with:\n\n```bash\npython total.py\n```\n",
    "a_test_of_its_own": "```python\nassert total([1, 2]) == 4\n```\n",
}


@pytest.mark.system
@pytest.mark.parametrize("after", FOLLOWED_BY.values(), ids=FOLLOWED_BY.keys())
async def test_the_block_defining_the_entry_point_is_scored(after: str):
    """A correct solution followed by another block scores correct (the last block did not)."""
    solution = fenced("def total(xs: List[int]) -> int:\n    return sum(xs)\n")
    score = await CodeExecution().score(HUMANEVAL, f"{solution}\n{after}")
    assert (score.correct, score.explanation) == (True, "ok")
    assert score.extracted == "def total(xs: List[int]) -> int:\n    return sum(xs)"


@pytest.mark.system
async def test_of_blocks_defining_the_entry_point_the_last_is_scored():
    first = fenced("def square(x):\n    return 2 * x\n")
    fixed = fenced("def square(x):\n    return x * x\n")
    assert (await CodeExecution().score(MBPP, f"{first}Oops, fixed:\n{fixed}")).correct
    assert not (await CodeExecution().score(MBPP, f"{fixed}Or:\n{first}")).correct


@pytest.mark.system
async def test_answer_printing_output_still_passes():
    answer = fenced(
        "print('loading')\n\ndef square(x):\n    print('squaring', x, end='')\n    return x * x\n"
    )
    score = await CodeExecution().score(MBPP, answer)
    assert (score.value, score.correct) == (1.0, True)
    assert score.explanation == "ok"
