"""``code``: the answer's last code block passes the task's tests in the sandbox.

The program run is the answer code, then every string in ``task.tests``, then, when
``metadata["entry_point"]`` is set (HumanEval style: the tests define ``check(candidate)``),
``check(<entry_point>)``. MBPP-style tasks just put ``assert`` lines in ``tests``.

When ``metadata["prompt_prefix"]`` is set (the HumanEval prompt: imports, helpers and the stubbed
signature with its docstring), it always goes first. A completion that gives only the function
body then continues the stub, and one that gives the whole function redefines it while keeping
the prompt's imports (``from typing import List`` is often left out).
"""

from __future__ import annotations

from maslab.answers import extract_answer
from maslab.context import Context
from maslab.errors import ConfigError
from maslab.evaluation import Evaluator, Score, register_evaluator
from maslab.sandbox import Limits, SandboxResult, arun_python
from maslab.task import Task

_MAX_EXPLANATION = 200


@register_evaluator("code")
class CodeExecution(Evaluator):
    """Correct when the program (answer plus tests) exits cleanly within ``limits``."""

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
        result = await arun_python(_program(task, code), limits=self.limits)
        return Score(
            value=float(result.passed),
            correct=result.passed,
            extracted=code,
            explanation=_explain(result),
        )


def _program(task: Task, code: str) -> str:
    """Prompt prefix (if any), answer code, tests and the ``check`` call, as one script."""
    prefix = task.metadata.get("prompt_prefix")
    entry_point = task.metadata.get("entry_point")
    parts = [f"{prefix.rstrip()}\n{code}" if prefix else code, *task.tests]
    if entry_point:
        parts.append(f"check({entry_point})")
    return "\n\n".join(parts) + "\n"


def _explain(result: SandboxResult) -> str:
    """The status and the last line of stderr (the exception, usually)."""
    lines = result.stderr.strip().splitlines()
    return (f"{result.status}: {lines[-1]}" if lines else result.status)[:_MAX_EXPLANATION]
