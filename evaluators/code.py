"""``code``: the answer's code passes the task's tests, examined apart from it.

The code is the answer's Python block that defines the task's entry point
(:func:`maslab.core.answers.extract_answer`; see :attr:`maslab.core.task.Task.entry_point`). The
tests are
every string in ``task.tests``, run one after another; when ``metadata["entry_point"]`` is set
(HumanEval style: the tests define ``check(candidate)``), ``check(<entry_point>)`` runs last.
MBPP-style tasks just put ``assert`` lines in ``tests``. When ``metadata["prompt_prefix"]`` is
set (the HumanEval prompt: imports, helpers and the stubbed signature with its docstring), it
goes before the answer's code, so a completion that gives only the function body continues the
stub, and one that gives the whole function keeps the prompt's imports; the tests get the
prompt's helpers too, never the answer's versions of them.

A pass is earned: the code runs in one sandbox and the tests in another
(:mod:`maslab.kit.code_check`), and the verdict is that every test ran to its end on built-in values
the code returned. That module's docstring says what the model's code can and cannot do; in
short, introspection, always-equal objects, patched builtins, early exits and printed success
lines all fail, while code that knows the expected answers passes like a correct solution.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.evaluation import Evaluator, Score, register_evaluator
from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.kit.code_tests import examine_answer
from maslab.plugin_config import Settings
from maslab.sandbox import Limits

_MAX_EXPLANATION = 200


@register_evaluator("code")
class CodeExecution(Evaluator):
    """Correct when every test runs to its end against the code, within ``limits``."""

    runs_model_code = True

    def __init__(
        self, config: Settings = None, *, limits: Limits | None = None, **options: Any
    ) -> None:
        """Args:
        config: Options (the code evaluator has none).
        limits: The sandbox's limits for the code and its tests (a run-time handle, not an
            option); None: the sandbox's defaults.
        """
        super().__init__(config, **options)
        self.limits = limits or Limits()

    def check_gold(self, task: Task) -> None:
        """The tests are the gold: a task without any cannot be scored."""
        if not task.tests:
            raise ConfigError(f"task {task.id} has no tests to run the answer against")

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        code = extract_answer(answer, "code", entry_point=task.entry_point)
        if code is None:
            return Score.unparsable("no code found")
        tests = list(task.tests)
        if entry_point := task.metadata.get("entry_point"):
            tests.append(f"check({entry_point})")
        examination = await examine_answer(task, code, tests, limits=self.limits)
        failure = examination.first_failure()
        explanation = "ok" if failure is None else _explain(examination.status, failure)
        return Score(
            value=float(examination.passed),
            correct=examination.passed,
            extracted=code,
            explanation=explanation[:_MAX_EXPLANATION],
        )


def _explain(status: str, failure: str) -> str:
    """``timeout`` and the like as they are; any other failure as ``error: <why>``."""
    return status if failure == status else f"error: {failure}"
