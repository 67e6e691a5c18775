"""Scoring protocol: the :class:`Score` record, the :class:`Evaluator` base and its registry.

Concrete evaluators live in the ``evaluators`` package. A failed extraction scores wrong and
is counted as unparsed (``extracted is None``); no sample ever leaves the denominator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from maslab.errors import ConfigError
from maslab.llm.registry import ModelPool, load_model
from maslab.llm.types import ChatMessage, ChatModel
from maslab.registry import Registry
from maslab.task import Task

if TYPE_CHECKING:
    from maslab.context import Context


class Score(BaseModel):
    """How one answer scored. ``value`` is in [0, 1]; ``extracted=None`` means unparsed."""

    model_config = ConfigDict(frozen=True)

    value: float
    correct: bool
    extracted: str | None = None
    explanation: str = ""

    @property
    def unparsed(self) -> bool:
        return self.extracted is None

    @classmethod
    def unparsable(cls, explanation: str = "no answer found") -> Score:
        return cls(value=0.0, correct=False, extracted=None, explanation=explanation)

    @classmethod
    def graded(cls, correct: bool, extracted: str, gold: str, explanation: str = "") -> Score:
        """A parsed answer's score; a wrong one explains itself unless told otherwise."""
        if not correct and not explanation:
            explanation = f"expected {gold!r}, got {extracted!r}"
        return cls(
            value=float(correct), correct=correct, extracted=extracted, explanation=explanation
        )


def gold_of(task: Task) -> str:
    """The task's gold answer; a task without one cannot be scored."""
    if task.gold is None:
        raise ConfigError(f"task {task.id} has no gold answer to score against")
    return task.gold


class Evaluator:
    """Scores a method's final answer text against a task's gold answer.

    ``ctx`` is the sample's context: an evaluator that asks a model does it through
    ``ctx.chat(..., purpose="scoring")`` so its calls are gated, traced and counted as scoring.
    """

    name: ClassVar[str] = ""

    def __init__(self, **options: Any) -> None:
        if options:
            raise TypeError(f"{type(self).__name__} takes no options, got {sorted(options)}")

    def check_gold(self, task: Task) -> None:
        """Raise :class:`ConfigError` if ``task`` cannot be scored (checked before a run spends)."""
        gold_of(task)

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release resources (worker processes, model connections)."""
        return None


class Judge:
    """The judge model of an LLM-graded evaluator: asked at temperature 0, two-turn prompts.

    A spec string is loaded from ``models`` (borrowed) or on its own (owned, closed by
    :meth:`aclose`); a model handle is borrowed.
    """

    def __init__(self, judge: str | ChatModel, models: ModelPool | None = None) -> None:
        self._owned = isinstance(judge, str) and models is None
        if isinstance(judge, str):
            judge = models.get(judge) if models is not None else load_model(judge)
        self.model = judge

    async def ask(self, system: str, user: str, ctx: Context | None = None, **params: Any) -> str:
        """The judge's reply; through ``ctx`` (a scoring call of its sample) when given.
        ``params`` go to the call (e.g. a ``response_format``)."""
        messages: list[ChatMessage] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        if ctx is None:
            return (await self.model.chat(messages, temperature=0, **params)).text
        completion = await ctx.chat(
            messages, model=self.model, agent="judge", purpose="scoring", temperature=0, **params
        )
        return completion.text

    async def aclose(self) -> None:
        if self._owned:
            await self.model.aclose()


_EVALUATORS: Registry[type[Evaluator]] = Registry("evaluator", "maslab.evaluators")
register_evaluator = _EVALUATORS.register
get_evaluator = _EVALUATORS.get
list_evaluators = _EVALUATORS.names
