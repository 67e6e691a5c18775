"""Model-written code against unit tests, in the sandbox: which tests pass, and feedback.

A method that tests its own candidates (reflexion's self-written tests, a coding team's sample
I/O, a tree search's public tests) runs them here: :func:`run_tests` runs each one-line
``assert`` against a candidate under a time limit per test and returns a :class:`TestRun` with
the counts and a feedback text a model can read. :func:`examine_answer` is what it and the
``code`` evaluator share: the candidate and the tests run in sandboxes of their own
(:mod:`maslab.kit.code_check`), so the candidate cannot forge its results.
:func:`public_tests` reads the examples a task's prompt shows (asserts, doctests): the tests a
method may use without seeing the hidden ones that score it.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass

from maslab.core.answers import extract_answer
from maslab.core.task import Task
from maslab.kit.code_check import Examination, examine
from maslab.sandbox import Limits

TEST_SECONDS = 2.0
"""Time limit of one unit test (and of defining the candidate code)."""
SANDBOX_LIMITS = Limits(wall_seconds=20, cpu_seconds=20)


@dataclass(frozen=True)
class TestRun:
    """One attempt run against the generated tests: whether it passed, and the feedback text."""

    passed: bool
    feedback: str
    counts: tuple[int, int]  # (tests passed, tests run)


def parse_tests(text: str, limit: int) -> list[str]:
    """The distinct one-line ``assert`` statements in ``text``, first ``limit`` of them."""
    tests: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("assert") and line not in tests and _is_assert(line):
            tests.append(line)
    return tests[:limit]


def candidate_program(task: Task, code: str) -> str:
    """The task's prompt prefix (HumanEval's stub and imports), when set, then the code."""
    prefix = task.metadata.get("prompt_prefix")
    return f"{prefix.rstrip()}\n{code}\n" if prefix else f"{code}\n"


async def examine_answer(
    task: Task,
    code: str,
    tests: list[str],
    *,
    call_seconds: float | None = None,
    stop_at_failure: bool = True,
    limits: Limits | None = None,
) -> Examination:
    """``code``, after the task's prompt prefix, against ``tests``, which also see that prefix
    (HumanEval's helpers) and find the task's entry point in the code
    (:func:`maslab.kit.code_check.examine`, whose options these are)."""
    return await examine(
        candidate_program(task, code),
        tests,
        prefix=str(task.metadata.get("prompt_prefix") or ""),
        entry_point=task.entry_point,
        call_seconds=call_seconds,
        stop_at_failure=stop_at_failure,
        limits=limits,
    )


async def run_tests(task: Task, attempt: str, tests: list[str]) -> TestRun:
    """Run the attempt's code (the block a grader would score) against ``tests``, each test
    under :data:`TEST_SECONDS`, the code and the tests in sandboxes of their own."""
    code = extract_answer(attempt, "code", entry_point=task.entry_point)
    if code is None:
        return TestRun(False, "No Python code was found in the answer.", (0, len(tests)))
    run = await examine_answer(
        task, code, tests, call_seconds=TEST_SECONDS, stop_at_failure=False, limits=SANDBOX_LIMITS
    )
    if run.error:
        return TestRun(False, f"The code failed to run: {run.error}", (0, len(tests)))
    if len(run.results) < len(tests):
        why = run.first_failure()
        return TestRun(
            False, f"The program ended before the tests finished ({why}).", (0, len(tests))
        )
    if not tests:
        return TestRun(True, "The code ran without error (there were no unit tests).", (0, 0))
    passed = [test for test, result in zip(tests, run.results, strict=True) if result.passed]
    failed = [(t, r) for t, r in zip(tests, run.results, strict=True) if not r.passed]
    lines = [f"{len(passed)} of {len(tests)} unit tests passed."]
    if passed:
        lines += ["Passed:", *passed]
    if failed:
        lines.append("Failed:")
        for test, result in failed:
            note = f"returned {result.got}" if result.got else result.error
            lines.append(f"{test}  # {note or 'failed'}")
    return TestRun(not failed, "\n".join(lines), (len(passed), len(tests)))


# The expected value: the non-blank lines after the call, up to a blank line, the next call or
# the end of the docstring (or of its code fence).
_DOCTEST = re.compile(
    r"^[ \t]*>>> (?P<call>.+)\n(?P<want>(?:[ \t]*(?!>>>|\"{3}|'{3}|`{3})\S.*\n?)+)", re.M
)


_EXAMPLE = re.compile(
    r"^[ \t]*(?:>>>[ \t]*)?(?P<call>(?P<name>[A-Za-z_]\w*)\(.*\))[ \t]*(?:==>?|=>|->|➞)[ \t]*"
    r"(?P<want>.*\S)[ \t]*$",
    re.M,
)  # one line, "f(x) == y", "f(x) => y", "f(x) -> y" or "f(x) ➞ y"
_DEFINED = re.compile(r"^[ \t]*def[ \t]+(\w+)[ \t]*\(", re.M)


def public_tests(task: Task) -> list[str]:
    """The tests the task's prompt shows: its one-line asserts; its doctest examples (``>>>
    f(x)`` and the expected value on the next lines); and its one-line examples of a function
    the prompt defines (``f(x) == y``, ``f(x) => y``, ``f(x) -> y``), each as ``assert f(x) ==
    y``. An example that is not valid Python that way (prose around it) is left out."""
    text = task.prompt()
    tests = parse_tests(text, limit=len(text))
    defined = set(_DEFINED.findall(text))
    found: list[tuple[str, str, set[str] | None]]
    found = [(m["call"], m["want"], None) for m in _DOCTEST.finditer(text)]
    found += [(m["call"], m["want"], defined) for m in _EXAMPLE.finditer(text)]
    for call, want, known in found:
        test = f"assert {call.strip()} == {' '.join(want.split())}"
        if test not in tests and _is_assert(test) and (known is None or _names_in(test, known)):
            tests.append(test)
    return tests


def _names_in(test: str, defined: set[str]) -> bool:
    """Whether every name ``test`` uses is a builtin or a function the prompt defines (a prose
    example such as ``f(abc) => true`` is no test)."""
    used = {node.id for node in ast.walk(ast.parse(test)) if isinstance(node, ast.Name)}
    return used <= defined | set(dir(builtins))


def _is_assert(line: str) -> bool:
    try:
        body = ast.parse(line).body
    except SyntaxError:
        return False
    return len(body) == 1 and isinstance(body[0], ast.Assert)
