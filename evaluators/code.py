"""``code``: the answer's last code block passes the task's tests in the sandbox.

The program run is the answer code, then every string in ``task.tests``, then, when
``metadata["entry_point"]`` is set (HumanEval style: the tests define ``check(candidate)``),
``check(<entry_point>)``. MBPP-style tasks just put ``assert`` lines in ``tests``.

When ``metadata["prompt_prefix"]`` is set (the HumanEval prompt: imports, helpers and the stubbed
signature with its docstring), it always goes first. A completion that gives only the function
body then continues the stub, and one that gives the whole function redefines it while keeping
the prompt's imports (``from typing import List`` is often left out).

A clean exit alone does not pass: answer code can end the process early (``sys.exit(0)``,
``os._exit(0)``, ``exit()``) before any test runs. So each scoring draws a fresh token and sends
it on stdin to a small runner, which reads it into a local, runs the program as ``__main__`` from
its own file and, once the program returns, prints the token. The answer passes only when the run
is ``ok`` and the token is the last line of its stdout. The token is never in a file or in the
program's globals; only frame introspection could reach it.
"""

from __future__ import annotations

import secrets

from maslab.answers import extract_answer
from maslab.context import Context
from maslab.errors import ConfigError
from maslab.evaluation import Evaluator, Score, register_evaluator
from maslab.sandbox import Limits, SandboxResult, arun_python
from maslab.task import Task

_MAX_EXPLANATION = 200
_PROGRAM_FILE = "program.py"
_RUNNER = f"""\
def _run():
    import runpy
    import sys

    token = sys.stdin.readline().strip()
    stdout = sys.stdout
    runpy.run_path({_PROGRAM_FILE!r}, run_name="__main__")
    print(f"\\n{{token}}", file=stdout, flush=True)


_run()
"""


@register_evaluator("code")
class CodeExecution(Evaluator):
    """Correct when the program (answer plus tests) runs to its end within ``limits``."""

    def __init__(self, *, limits: Limits | None = None) -> None:
        super().__init__()
        self.limits = limits or Limits()

    def check_gold(self, task: Task) -> None:
        """The tests are the gold: a task without any cannot be scored."""
        if not task.tests:
            raise ConfigError(f"task {task.id} has no tests to run the answer against")

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        code = extract_answer(answer, "code")
        if code is None:
            return Score.unparsable("no code found")
        token = secrets.token_hex(16)
        result = await arun_python(
            _RUNNER,
            limits=self.limits,
            stdin=f"{token}\n",
            files={_PROGRAM_FILE: _program(task, code)},
        )
        finished = _last_line(result.stdout) == token
        correct = result.passed and finished
        return Score(
            value=float(correct),
            correct=correct,
            extracted=code,
            explanation=_explain(result, finished),
        )


def _program(task: Task, code: str) -> str:
    """Prompt prefix (if any), answer code, tests and the ``check`` call, as one script."""
    prefix = task.metadata.get("prompt_prefix")
    entry_point = task.metadata.get("entry_point")
    parts = [f"{prefix.rstrip()}\n{code}" if prefix else code, *task.tests]
    if entry_point:
        parts.append(f"check({entry_point})")
    return "\n\n".join(parts) + "\n"


def _last_line(text: str) -> str:
    """The last line of ``text``, or ``""`` when it has none."""
    lines = text.splitlines()
    return lines[-1] if lines else ""


def _explain(result: SandboxResult, finished: bool) -> str:
    """The status and the last line of stderr (the exception, usually); an early exit says so."""
    if result.passed and not finished:
        return "error: exited before the tests finished"
    lines = result.stderr.strip().splitlines()
    return (f"{result.status}: {lines[-1]}" if lines else result.status)[:_MAX_EXPLANATION]
