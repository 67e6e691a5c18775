"""Scoring protocol: the :class:`Score` record, the :class:`Evaluator` base and its registry.

Concrete evaluators live in the ``evaluators`` package. A failed extraction scores wrong and
is counted as unparsed (``extracted is None``); no sample ever leaves the denominator.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from maslab.core.task import Task
from maslab.defaults import JUDGE_TEMPERATURE
from maslab.errors import ConfigError
from maslab.llm.pool import ModelPool
from maslab.llm.registry import load_model
from maslab.llm.types import ChatMessage, ChatModel
from maslab.plugin_config import PluginConfig, Settings
from maslab.plugins import import_function
from maslab.registry import Registry

if TYPE_CHECKING:
    from maslab.core.context import Context


CHANGED_AFTER_SOLVED = "changed_after_solved"
"""The :attr:`Score.details` key under which an evaluator of stateful episodes counts the calls
that moved the state away from the expected one after a turn had reached it (a solved turn
undone); the triage signal of that name reads it."""


STRICT = "strict"
"""The :attr:`Score.details` key of the strict verdict (a :class:`Strict`), which an evaluator
records beside its score, the flexible verdict; the summary's strict accuracy and format
compliance and the triage signal ``strict_flexible_disagree`` read it."""


class Strict(BaseModel):
    """The strict verdict on an answer: what it gives in the instructed form only
    (:func:`maslab.core.answers.strict_answer`; None: nothing in that form), and whether that is
    correct."""

    model_config = ConfigDict(frozen=True)

    extracted: str | None
    correct: bool


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

    @property
    def strict(self) -> Strict | None:
        """The strict verdict the evaluator recorded (``details[STRICT]``), or None."""
        verdict = self.details.get(STRICT)
        return None if verdict is None else Strict.model_validate(verdict)

    def with_strict(self, extracted: str | None, correct: bool) -> Score:
        """This score with the strict verdict on the same answer in its details: ``extracted``,
        the answer in the instructed form (None: none), ``correct`` whether it is right."""
        verdict = Strict(extracted=extracted, correct=correct and extracted is not None)
        return self.model_copy(update={"details": {**self.details, STRICT: verdict.model_dump()}})

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

    A subclass implements ``async score(task, answer, *, ctx)`` and registers under a name.
    ``score`` returns :meth:`Score.graded` for an answer it could read and :meth:`Score.unparsable`
    for one it could not (scored wrong and counted apart, never dropped). ``check_gold`` rejects
    the tasks it cannot score before a run spends anything. ``ctx`` is the sample's context: an
    evaluator that asks a model does it through :class:`Judge` (or ``ctx.chat(...,
    purpose="scoring")``), so those calls are gated, traced and counted as scoring, never
    against the method's budget.

    An evaluator with options (a tolerance, a time limit, a judge model's spec) declares them as
    its ``Config``, a :class:`~maslab.plugin_config.PluginConfig` with a default and a description
    for each; the constructor takes a mapping, a ``Config`` or keywords
    (``NumericEvaluator(rel_tol=0.01)``, ``--evaluator-option rel_tol=0.01``), checks them and
    keeps them as ``self.config``; a bad one is a one-line :class:`ConfigError`. The run's
    manifest records them, defaults included, as ``evaluator_options`` (less
    :attr:`execution_options`). Run-time handles are keyword arguments of the constructor of
    their own, never options: ``models``, the run's model pool, which the runner gives to an
    evaluator that names it; a model handle for a judge; the ``code`` evaluator's ``limits``.

    Example::

        import asyncio
        import re

        from pydantic import Field

        from maslab import Context, Task
        from maslab.bench.evaluation import Evaluator, Score, gold_of, register_evaluator
        from maslab.plugin_config import PluginConfig


        @register_evaluator("last_integer")
        class LastInteger(Evaluator):
            # The class docstring's first line is what `maslab list evaluators` shows.

            class Config(PluginConfig):  # --evaluator-option last=false; unknown keys are errors
                last: bool = Field(True, description="read the last integer, not the first")

            config: Config

            async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
                gold = gold_of(task)  # a task without a gold answer: one-line ConfigError
                found = re.findall(r"-?\d+", answer)
                if not found:
                    return Score.unparsable()
                read = found[-1] if self.config.last else found[0]
                return Score.graded(int(read) == int(gold), read, gold)


        task = Task(id="q1", question="What is 6 * 7?", gold="42")
        score = asyncio.run(LastInteger().score(task, "6 * 7 = 42"))
        assert score.correct and score.extracted == "42" and score.value == 1.0
        assert not asyncio.run(LastInteger(last=False).score(task, "6 * 7 = 42")).correct
    """

    name: ClassVar[str] = ""
    execution_options: ClassVar[frozenset[str]] = frozenset()
    """Options that change how scoring runs, never a score (a worker count): they stay out of
    a run's identity, so a run resumes under other values of them."""
    runs_model_code: ClassVar[bool] = False
    """Scoring runs the answer's code (see :attr:`maslab.core.method.Method.runs_model_code`)."""
    Config: ClassVar[type[PluginConfig]] = PluginConfig
    config: PluginConfig
    """The checked options, a ``Config``: an evaluator narrows the type with ``config: Config``."""

    def __init__(self, config: Settings = None, **options: Any) -> None:
        """Check the options against ``Config``; a bad one is a one-line :class:`ConfigError`.

        Args:
            config: Options as a mapping or a ``Config``; None keeps the defaults.
            **options: Options as keywords, over ``config``.
        """
        what = f"{self.name or type(self).__name__} options"
        self.config = self.Config.build(config, options, what=what, example=type(self).__name__)

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


def model_spec(model: str | ChatModel) -> str:
    """What an option that names a model records: the spec, or the name of a handle given
    instead."""
    return model if isinstance(model, str) else model.name


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

    async def ask(
        self, system: str | None, user: str, ctx: Context | None = None, **params: Any
    ) -> str:
        """The judge's reply; through ``ctx`` (a scoring call of its sample) when given.
        ``system`` None sends no system turn (the served model's template adds its own).
        ``params`` go to the call (e.g. a ``response_format``)."""
        messages: list[ChatMessage] = [{"role": "user", "content": user}]
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
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
list_evaluators = _EVALUATORS.names

ScoreFunction = Callable[[Task, str], bool | float | Score | Awaitable[bool | float | Score]]
"""A function as an evaluator: ``fn(task, answer)`` returns (or, async, awaits to) a bool, a
number in [0, 1] or a :class:`Score` (see :class:`FunctionEvaluator`)."""


class FunctionEvaluator(Evaluator):
    """Scores with a function (:data:`ScoreFunction`), as DSPy's metrics do: a bool is
    :meth:`Score.graded` with the answer as extracted, a number in [0, 1] the score's value
    (correct at 1), a :class:`Score` is used as is; anything else, or an exception, is the
    sample's error. Made by :func:`function_evaluator`, which names it."""

    function: ClassVar[staticmethod[[Task, str], Any]]

    def check_gold(self, task: Task) -> None:
        """Any task will do: the function decides what it needs of it."""

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        result = self.function(task, answer)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, Score):
            return result
        if hasattr(result, "item"):  # a numpy or torch scalar
            result = result.item()
        if isinstance(result, bool):
            wrong = "" if result or task.gold is not None else f"{self.name} returned False"
            return Score.graded(result, answer, task.gold or "", wrong)
        if isinstance(result, int | float) and 0 <= result <= 1:
            return Score(value=float(result), correct=result == 1, extracted=answer)
        raise TypeError(
            f"{self.name} returned {result!r}: return a bool, a number in [0, 1] or a Score"
        )


_FUNCTIONS: dict[str, type[FunctionEvaluator]] = {}


def function_name(function: Callable[..., Any]) -> str:
    """``module:qualified.name``: what a run records as the evaluator ``function`` is."""
    module = getattr(function, "__module__", None) or type(function).__module__
    return f"{module}:{getattr(function, '__qualname__', type(function).__qualname__)}"


def function_evaluator(function: ScoreFunction, name: str | None = None) -> type[Evaluator]:
    """An evaluator class scoring with ``function`` (:class:`FunctionEvaluator`), named
    ``name`` (by default :func:`function_name`), which :func:`get_evaluator` then returns."""
    if not callable(function):
        raise ConfigError(f"evaluator {name or function!r} is not callable")
    name = name or function_name(function)
    cls = type(
        FunctionEvaluator.__name__,
        (FunctionEvaluator,),
        {"name": name, "function": staticmethod(function), "__module__": __name__},
    )
    _FUNCTIONS[name] = cls
    return cls


def get_evaluator(name: str) -> type[Evaluator]:
    """The evaluator class registered as ``name`` (a one-line :class:`ConfigError`, with close
    matches, for an unknown one); a name with a colon, ``module:function`` or
    ``path/to/file.py:function``, is that function as an evaluator (:func:`function_evaluator`),
    imported on its first use."""
    if isinstance(name, str) and ":" in name:
        return _FUNCTIONS.get(name) or function_evaluator(import_function(name, "evaluator"), name)
    return _EVALUATORS.get(name)


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
    """``options`` for evaluator ``name``, checked against its ``Config`` before a run: a
    one-line :class:`ConfigError` for an option it does not take, a required one missing or a
    bad value; ``flag`` spells the option in the message (``--evaluator-option``)."""
    cls = get_evaluator(name)
    fields = cls.Config.model_fields
    if unknown := [key for key in options if key not in fields]:
        takes = ", ".join(fields) or "none"
        raise ConfigError(
            f"evaluator {name} has no option {', '.join(map(repr, unknown))} (its options: {takes})"
        )
    if missing := [key for key, f in fields.items() if f.is_required() and key not in options]:
        example = " ".join(f"{flag} {key}=..." for key in missing)
        raise ConfigError(f"evaluator {name} needs {', '.join(missing)}: {example}")
    cls.Config.build(options, {}, what=f"{name} options", example=cls.__name__)
    return dict(options)
