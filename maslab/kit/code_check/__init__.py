"""Model-written code against tests, in two sandboxes, so that a pass is earned.

The code under test runs in one sandbox (the *subject*, :mod:`.subject`); the tests run in
another (the *examiner*, :mod:`.examiner`), linked to it by a socket pair and to nothing else.
The tests' calls of the code cross the link; what comes back is rebuilt as built-in data
(:mod:`.wire`), so a test compares built-in values only. The examiner reports behind a token it
alone was given. So the model's code cannot reach the tests, their expected values or the
token: frame or ``gc`` walks find nothing, an object that claims to equal everything never
reaches a comparison, patched builtins and an early exit (even with status 0) patch and end only
the subject, and whatever it prints is not the examiner's report.

What remains possible: code that knows the answers (memorised, or read from a file the sandbox
shows, such as a dataset installed in the base Python's site-packages) passes as a correct
solution would; the isolation between the two programs is the sandbox's, so where it runs
without namespaces (:func:`maslab.sandbox.protections`) the subject, under the same user, could
reach the examiner. Values the tests need back that are not built-in data (a numpy scalar, a
generator) arrive as opaque references and compare unequal; arguments are copies, so a test
that checks how the code changed its argument in place fails.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from maslab.sandbox import CHANNEL_VARIABLE, Limits, SandboxResult, arun_python, read_report

_HERE = Path(__file__).parent
_LIMITS = ("timeout", "memory", "output_limit", "disk_limit")


@cache
def _program(name: str) -> str:
    """The source of one of the sandboxed programs beside this file (read once)."""
    return (_HERE / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class TestResult:
    """One test: whether it passed; else its error, the test's line where it was raised
    (``at``) and, for ``assert f(x) == y``, what ``f(x)`` was."""

    passed: bool
    error: str | None = None
    at: str | None = None
    got: str | None = None


@dataclass(frozen=True)
class Examination:
    """How the tests went. ``error``: the code could not be defined or the run broke down
    (then ``results`` may be short); ``status``: how the examiner's sandbox ended, or the
    subject's when only it met a limit (its wall time, memory or output)."""

    results: tuple[TestResult, ...]
    tests: int
    error: str | None
    status: str

    @property
    def passed(self) -> bool:
        """Every test ran to its end and passed."""
        complete = len(self.results) == self.tests
        return self.error is None and complete and all(r.passed for r in self.results)

    def first_failure(self) -> str | None:
        """Why the code did not pass, in one line (a sandbox limit by its status, such as
        ``timeout``); None if it did."""
        if self.passed:
            return None
        if self.status in _LIMITS:
            return self.status
        if self.error:
            return self.error
        for number, result in enumerate(self.results):
            if not result.passed:
                at = f" at `{result.at}`" if result.at else ""
                shown = f" (got {result.got})" if result.got else ""
                return f"test {number + 1}: {result.error}{at}{shown}"
        return "the tests did not finish"


async def examine(
    program: str,
    tests: list[str],
    *,
    prefix: str = "",
    entry_point: str | None = None,
    call_seconds: float | None = None,
    stop_at_failure: bool = True,
    limits: Limits | None = None,
) -> Examination:
    """Run ``program`` (the code under test) against ``tests``, each sandboxed apart.

    Args:
        program: The code under test, as a module's source.
        tests: Python sources run one after another in the examiner's namespace.
        prefix: Trusted code run first in that namespace (HumanEval's imports and helpers).
        entry_point: A name that always stands for the code's object of that name, whatever
            ``prefix`` defines under it.
        call_seconds: Time limit of each call of the code, and of defining it; None: only
            ``limits``'s wall time bounds the whole run.
        stop_at_failure: Stop at the first failing test.
        limits: Each of the two sandboxes' limits (the sandbox's defaults if None).
    """
    limits = limits or Limits()
    token = secrets.token_hex(16)
    examiner_end, subject_end = socket.socketpair()
    settings = {"call_seconds": call_seconds, "link_variable": CHANNEL_VARIABLE}
    plan = {
        **settings,
        "prefix": prefix,
        "tests": tests,
        "entry_point": entry_point,
        "stop_at_failure": stop_at_failure,
    }
    wire = _program("wire.py")
    subject = asyncio.ensure_future(
        arun_python(
            _program("subject.py"),
            limits=limits,
            files={"wire.py": wire, "solution.py": program, "subject.json": json.dumps(settings)},
            channel=subject_end,
        )
    )
    try:
        examiner = await arun_python(
            _program("examiner.py"),
            limits=limits,
            stdin=f"{token}\n",
            files={"wire.py": wire, "plan.json": json.dumps(plan)},
            channel=examiner_end,
        )
    finally:
        if not subject.done():
            subject.cancel()
        await asyncio.wait({subject})
    subject_result = None if subject.cancelled() else subject.result()
    return _examination(read_report(examiner.stdout, token), examiner, len(tests), subject_result)


def _examination(
    report: dict[str, Any] | None,
    examiner: SandboxResult,
    tests: int,
    subject: SandboxResult | None,
) -> Examination:
    status = examiner.status
    if status == "ok" and subject is not None and subject.status in _LIMITS:
        status = subject.status
    if report is None:
        lines = examiner.stderr.strip().splitlines()
        why = status if status != "ok" else "the examiner sent no report"
        error = f"{why}: {lines[-1]}" if lines and status == "error" else why
        return Examination((), tests, error, status)
    results = tuple(
        TestResult(bool(r.get("passed")), r.get("error"), r.get("at"), r.get("got"))
        for r in report.get("results") or []
    )
    return Examination(results, tests, report.get("error"), status)
