"""Model-written code against unit tests, in the sandbox: which tests pass, and feedback.

A method that tests its own candidates (reflexion's self-written tests, a coding team's sample
I/O, a tree search's public tests) runs them here: :func:`run_tests` executes a candidate and
each one-line ``assert`` separately in :mod:`maslab.sandbox`, under a time limit per test, and
returns a :class:`TestRun` with the counts and a feedback text a model can read. The report is
marked with a per-run token, so the candidate cannot forge its own results.
:func:`public_tests` reads the examples a task's prompt shows (asserts, doctests): the tests a
method may use without seeing the hidden ones that score it.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import secrets
from dataclasses import dataclass

from maslab.answers import extract_answer
from maslab.sandbox import Limits, arun_python, read_report
from maslab.task import Task

TEST_SECONDS = 2.0
"""Time limit of one unit test (and of defining the candidate code)."""
SANDBOX_LIMITS = Limits(wall_seconds=20, cpu_seconds=20)
_SHOWN = 200  # characters of an output or error shown in the feedback


_RUNNER = f"""\
import ast
import builtins
import json
import signal
import sys


def _alarm(signum, frame):
    raise TimeoutError("took longer than {TEST_SECONDS:g} s")


def _timed(run):
    signal.setitimer(signal.ITIMER_REAL, {TEST_SECONDS!r})
    try:
        return run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _error(exc):
    text = f"{{type(exc).__name__}}: {{exc}}" if str(exc) else type(exc).__name__
    return text[:{_SHOWN}]


def _actual(test, namespace):
    node = ast.parse(test).body[0]
    compare = node.test if isinstance(node, ast.Assert) else None
    if not isinstance(compare, ast.Compare) or not isinstance(compare.ops[0], ast.Eq):
        return None
    left = compile(ast.Expression(compare.left), "<test>", "eval")
    try:
        return repr(_timed(lambda: eval(left, namespace)))[:{_SHOWN}]  # ok-eval: in the sandbox
    except BaseException:
        return None


def _main():
    out = sys.stdout
    token = sys.stdin.readline().strip()
    source = open("candidate.py").read()
    tests = json.load(open("tests.json"))
    signal.signal(signal.SIGALRM, _alarm)
    namespace = {{"__name__": "candidate"}}
    report = {{"error": None, "results": []}}
    try:
        _timed(lambda: exec(compile(source, "candidate.py", "exec"), namespace))
    except BaseException as exc:
        report["error"] = _error(exc)
    else:
        for test in tests:
            try:
                _timed(lambda: exec(compile(test, "<test>", "exec"), namespace))
                report["results"].append({{"passed": True}})
            except BaseException as exc:
                got = _actual(test, namespace) if isinstance(exc, AssertionError) else None
                report["results"].append({{"passed": False, "error": _error(exc), "got": got}})
    print(f"\\n{{token}}" + json.dumps(report), file=out, flush=True)


_main()
"""


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


async def run_tests(task: Task, attempt: str, tests: list[str]) -> TestRun:
    """Run the attempt's last code block with ``tests`` in the sandbox."""
    code = extract_answer(attempt, "code")
    if code is None:
        return TestRun(False, "No Python code was found in the answer.", (0, len(tests)))
    token = secrets.token_hex(16)  # marks the runner's report: the candidate cannot forge it
    result = await arun_python(
        _RUNNER,
        limits=SANDBOX_LIMITS,
        stdin=f"{token}\n",
        files={"candidate.py": candidate_program(task, code), "tests.json": json.dumps(tests)},
    )
    report = read_report(result.stdout, token)
    if report is None:
        lines = result.stderr.strip().splitlines()
        why = f"{result.status}: {lines[-1]}" if lines else result.status
        return TestRun(
            False, f"The program ended before the tests finished ({why[:_SHOWN]}).", (0, len(tests))
        )
    if report.get("error"):
        return TestRun(False, f"The code failed to run: {report['error']}", (0, len(tests)))
    results = report.get("results") or []
    passed = [t for t, r in zip(tests, results, strict=False) if r.get("passed")]
    failed = [(t, r) for t, r in zip(tests, results, strict=False) if not r.get("passed")]
    if not tests:
        return TestRun(True, "The code ran without error (there were no unit tests).", (0, 0))
    lines = [f"{len(passed)} of {len(tests)} unit tests passed."]
    if passed:
        lines += ["Passed:", *passed]
    if failed:
        lines.append("Failed:")
        for test, r in failed:
            note = f"returned {r['got']}" if r.get("got") else r.get("error") or "failed"
            lines.append(f"{test}  # {note}")
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
