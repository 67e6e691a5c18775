"""Scoring protocol: the :class:`Score` record, the :class:`Evaluator` base and its registry.

Concrete evaluators live in the ``evaluators`` package. A failed extraction scores wrong and
is counted as unparsed (``extracted is None``); no sample ever leaves the denominator.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from maslab.core.task import Task
from maslab.defaults import JUDGE_TEMPERATURE
from maslab.errors import ConfigError
from maslab.llm.registry import ModelPool, load_model
from maslab.llm.types import ChatMessage, ChatModel
from maslab.registry import Registry

if TYPE_CHECKING:
    from maslab.core.context import Context


class Score(BaseModel):
    """How one answer scored. ``value`` is in [0, 1]; ``extracted=None`` means unparsed."""

    model_config = ConfigDict(frozen=True)

    value: float
    correct: bool
    extracted: str | None = None
    explanation: str = ""
    measurement: bool = False
    """True when the evaluator measures something other than correctness (a bias, a style):
    then ``correct`` is no verdict, and a run of such scores shows no accuracy."""
    details: dict[str, Any] = Field(default_factory=dict)
    """What else the evaluator measured on this answer, JSON-able (per-message behaviour codes,
    per-position bias); kept in the sample's record, never part of the verdict."""

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
    r"""Scores a method's final answer text against a task's gold answer.

    A subclass implements ``async score(task, answer, *, ctx)`` and registers under a name; its
    options, if any, are keyword arguments of its constructor (a run's ``evaluator_options``).
    ``score`` returns :meth:`Score.graded` for an answer it could read and :meth:`Score.unparsable`
    for one it could not (scored wrong and counted apart, never dropped). ``check_gold`` rejects
    the tasks it cannot score before a run spends anything. ``ctx`` is the sample's context: an
    evaluator that asks a model does it through :class:`Judge` (or ``ctx.chat(...,
    purpose="scoring")``), so those calls are gated, traced and counted as scoring, never
    against the method's budget.

    Example::

        import asyncio
        import re

        from maslab import Context, Task
        from maslab.bench.evaluation import Evaluator, Score, gold_of, register_evaluator


        @register_evaluator("last_integer")
        class LastInteger(Evaluator):
            # The class docstring's first line is what `maslab list evaluators` shows.

            async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
                gold = gold_of(task)  # a task without a gold answer: one-line ConfigError
                found = re.findall(r"-?\d+", answer)
                if not found:
                    return Score.unparsable()
                return Score.graded(int(found[-1]) == int(gold), found[-1], gold)


        task = Task(id="q1", question="What is 6 * 7?", gold="42")
        score = asyncio.run(LastInteger().score(task, "6 * 7 = 42"))
        assert score.correct and score.extracted == "42" and score.value == 1.0
    """

    name: ClassVar[str] = ""
    execution_options: ClassVar[frozenset[str]] = frozenset()
    """Options that change how scoring runs, never a score (a worker count): they stay out of
    a run's identity, so a run resumes under other values of them."""
    runs_model_code: ClassVar[bool] = False
    """Scoring runs the answer's code (see :attr:`maslab.core.method.Method.runs_model_code`)."""

    def __init__(self, **options: Any) -> None:
        if options:
            raise TypeError(f"{type(self).__name__} takes no options, got {sorted(options)}")

    def check_gold(self, task: Task) -> None:
        """Raise :class:`ConfigError` if ``task`` cannot be scored (checked before a run spends)."""
        gold_of(task)

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        """How ``answer`` scores against ``task``.

        Args:
            task: The task, with its gold answer (and tests, choices, ...).
            answer: The method's final answer text, as it wrote it.
            ctx: The sample's context, for model calls (scoring); None outside a run.
        """
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release resources (worker processes, model connections)."""
        return None


class Judge:
    """The judge model of an LLM-graded evaluator: asked at temperature 0, two-turn prompts.

    Args:
        judge: A spec or a model handle (borrowed: never closed here).
        models: The pool a spec is loaded from (borrowed); None loads the spec on its own, and
            :meth:`aclose` closes it.
        agent: The name its calls are recorded under (an evaluator with two judges tells them
            apart by it).
    """

    def __init__(
        self, judge: str | ChatModel, models: ModelPool | None = None, *, agent: str = "judge"
    ) -> None:
        self._owned = isinstance(judge, str) and models is None
        if isinstance(judge, str):
            judge = models.get(judge) if models is not None else load_model(judge)
        self.model = judge
        self.agent = agent

    async def ask(self, system: str, user: str, ctx: Context | None = None, **params: Any) -> str:
        """The judge's reply; through ``ctx`` (a scoring call of its sample) when given.
        ``params`` go to the call (e.g. a ``response_format``)."""
        messages: list[ChatMessage] = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        if ctx is None:
            return (await self.model.chat(messages, temperature=JUDGE_TEMPERATURE, **params)).text
        completion = await ctx.chat(
            messages,
            model=self.model,
            agent=self.agent,
            purpose="scoring",
            temperature=JUDGE_TEMPERATURE,
            **params,
        )
        return completion.text

    async def aclose(self) -> None:
        if self._owned:
            await self.model.aclose()


_EVALUATORS: Registry[type[Evaluator]] = Registry("evaluator", "maslab.evaluators")
register_evaluator = _EVALUATORS.register
get_evaluator = _EVALUATORS.get
list_evaluators = _EVALUATORS.names

EVALUATOR_BY_ANSWER_TYPE: dict[str, str] = {
    "number": "numeric", "math": "math", "choice": "choice", "code": "code", "text": "exact",
}  # fmt: skip
"""The evaluator a method that scores its own validation runs uses for each answer type."""


class Scorer:
    """Scores answers for a method that learns from validation tasks (``optimize``): with the
    evaluator ``evaluator``, or None for the one of each task's answer type
    (:data:`EVALUATOR_BY_ANSWER_TYPE`). Each evaluator is made on first use and released by
    :meth:`aclose` (or at the end of ``async with``)."""

    def __init__(self, evaluator: str | None = None) -> None:
        self.evaluator = evaluator
        self._evaluators: dict[str, Evaluator] = {}

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        name = self.evaluator or EVALUATOR_BY_ANSWER_TYPE[task.answer_type]
        if name not in self._evaluators:
            self._evaluators[name] = get_evaluator(name)()
        return await self._evaluators[name].score(task, answer, ctx=ctx)

    async def aclose(self) -> None:
        evaluators, self._evaluators = list(self._evaluators.values()), {}
        for evaluator in evaluators:
            await evaluator.aclose()

    async def __aenter__(self) -> Scorer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def identity_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The evaluator ``name``'s ``options`` that can change a score: a run's identity holds
    these, not its ``execution_options``."""
    execution = get_evaluator(name).execution_options
    return {key: value for key, value in options.items() if key not in execution}


def check_evaluator_options(name: str, options: Mapping[str, Any], flag: str) -> dict[str, Any]:
    """``options`` for evaluator ``name``'s constructor, or a one-line :class:`ConfigError` for
    an option it does not take or a required one missing (``models`` is the runner's to give);
    ``flag`` spells the option in the message (``--evaluator-option``)."""
    parameters = {
        key: p
        for key, p in inspect.signature(get_evaluator(name)).parameters.items()
        if key != "models" and p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    takes = ", ".join(parameters) or "none"
    if unknown := [key for key in options if key not in parameters]:
        raise ConfigError(
            f"evaluator {name} has no option {', '.join(map(repr, unknown))} (its options: {takes})"
        )
    if missing := [
        key for key, p in parameters.items() if p.default is p.empty and key not in options
    ]:
        example = " ".join(f"{flag} {key}=..." for key in missing)
        raise ConfigError(f"evaluator {name} needs {', '.join(missing)}: {example}")
    return dict(options)
