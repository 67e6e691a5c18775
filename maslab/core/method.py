"""The Method base class and the method registry.

A method is a class with a pydantic ``Config`` (defaults from its paper) and
``async solve(task, ctx) -> Solution``. Methods that learn from a validation set also
implement ``optimize``. Methods register under an explicit name; lookups never guess.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, final

from pydantic import AllowInfNan, BaseModel, ConfigDict, Strict, ValidationError, model_validator

from maslab.config_files import validation_message
from maslab.core.context import Context
from maslab.core.episode import episode_answer
from maslab.core.roles import ModelRoles, check_model_roles, check_role_names
from maslab.core.task import Solution, Task
from maslab.defaults import DEMO_MODEL
from maslab.errors import BudgetExceeded, ConfigError, one_line
from maslab.llm.ledger import UsageTotals
from maslab.llm.types import ChatModel
from maslab.plugin_config import PluginConfig
from maslab.registry import Registry

if TYPE_CHECKING:  # networkx stays unloaded until a topology is built
    from maslab.core.topology import Topology

_RELEARN = "delete it to optimise again"  # the fix for a saved learned state that does not load


class MethodConfig(PluginConfig):
    """Base of every method's configuration, a :class:`~maslab.plugin_config.PluginConfig`:
    unknown keys are errors, not silently ignored.

    A config may carry :attr:`presets`, other implementations' protocols by name (MASLab's:
    ``maslab``), and a ``preset`` field naming them (``preset: Literal["maslab"] | None =
    None``): ``preset=maslab`` sets the preset's values for the settings left at their
    defaults (the command line passes every default along with ``--config``, so
    ``preset=maslab n=4`` keeps n = 4)."""

    presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    """Preset name -> the settings it sets."""

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        name = data.get("preset") if isinstance(data, Mapping) else None
        if not isinstance(name, str) or name not in cls.presets:
            return data

        def at_default(key: str) -> bool:
            default = cls.model_fields[key].get_default(call_default_factory=True)
            value = data.get(key, default)
            return (tuple(value) if isinstance(value, list) else value) == default

        return {**data, **{k: v for k, v in cls.presets[name].items() if at_default(k)}}


class MethodState(BaseModel):
    """Base of every method's learned-state schema (``Method.LearnedState``): unknown keys are
    errors."""

    model_config = ConfigDict(extra="forbid")


FiniteNumber = Annotated[float, Strict(), AllowInfNan(False)]
"""A number of a learned state: an int or a float, never a string, a bool, NaN or infinity."""


class Method:
    r"""Base class of all MAS methods: a ``Config`` and ``async solve(task, ctx) -> Solution``.

    ``Config`` is a :class:`MethodConfig` whose defaults come from the paper; the constructor
    takes a mapping, a ``Config`` or keywords (``LLMDebate(agents=5)``) and checks them.
    ``solve`` makes every model call through the sample's context: ``ctx.agent(name, ...)``
    makes an :class:`~maslab.core.agents.Agent`, ``await agent.reply(prompt, round=r)`` returns its
    :class:`~maslab.core.messages.Message`. Independent calls run concurrently (``asyncio.gather``);
    whenever the method has a better answer than before it calls ``ctx.propose(answer)``, which
    a budget stop scores. The returned :class:`Solution` holds the final answer text, as the
    evaluator will read it. A method with more than one agent sets ``ctx.topology`` (who reads
    whom): traces and reports show it. The class docstring cites the paper (title, arXiv id)
    and lists the deviations from it.

    A method that learns (``optimize``) declares what it learns as a schema, ``class
    LearnedState(MethodState)``: :meth:`learned_state` returns an instance of it and
    :meth:`load_learned_state` takes a checked one back. The base class alone turns it to and
    from JSON (:meth:`dump_learned_state`, :meth:`restore_learned_state`) and words the errors
    of a saved state that does not load; no method overrides these.

    Example::

        import asyncio

        from pydantic import Field

        from maslab import Context, Method, MethodConfig, Solution, Task, Topology, register_method
        from maslab.core.roles import numbered
        from maslab.testing import ScriptedModel


        @register_method("solve_then_judge")
        class SolveThenJudge(Method):
            # A real method's docstring cites its paper (title, arXiv id) and its deviations.

            roles = ("solver", "judge")  # what model roles may name, e.g. --model-role judge=...

            class Config(MethodConfig):  # defaults from the paper; unknown keys are errors
                solvers: int = Field(2, ge=1)

            def agent_names(self) -> tuple[str, ...]:  # solver_1, solver_2: each reachable by name
                return numbered("solver", self.config.solvers)

            async def solve(self, task: Task, ctx: Context) -> Solution:
                names = self.agent_names()
                ctx.topology = Topology.star("judge", names, direction="in")
                solvers = [ctx.agent(n, role="solver", system="Solve step by step.") for n in names]
                drafts = await asyncio.gather(*(s.reply(task.prompt(), round=0) for s in solvers))
                ctx.propose(drafts[0].content)  # what a budget stop from here on scores
                seen = ctx.topology.visible_messages("judge", ctx.transcript, round=1)
                shown = "\n\n".join(f"{m.sender}: {m.content}" for m in seen)
                judge = ctx.agent("judge", temperature=0)  # per-agent sampling
                verdict = await judge.reply(f"{task.prompt()}\n\nAnswers:\n{shown}", round=1)
                return Solution(answer=verdict.content)  # the judge decides; the evaluator reads it


        model = ScriptedModel(["6 * 7 = 42", "It is 42.", "Both say 42, and so do I: 42"])
        task = Task(id="q1", question="What is 6 * 7?", gold="42", answer_type="number")
        outcome = SolveThenJudge().run(task, model)  # a notebook awaits .arun(task, model)
        assert outcome.answer.endswith("42") and len(model.calls) == 3
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    config: MethodConfig
    """The checked settings, a ``Config``: a method narrows the type with ``config: Config``."""
    roles: ClassVar[tuple[str, ...]] = ()
    """The roles of the method's agents: the keys of model roles (see :mod:`maslab.core.roles`)."""
    paper: ClassVar[str] = ""
    """The paper the method follows, as docs/methods.md cites it: "Du et al., arXiv 2305.14325"."""
    category: ClassVar[str] = ""
    """The family the method belongs to: "debate", "group-of-agents topology", ..."""
    calls: ClassVar[str] = ""
    """LLM calls per task: the formula in the method's parameters, and its default value."""
    LearnedState: ClassVar[type[MethodState] | None] = None
    """The schema of what :meth:`optimize` learns: :meth:`learned_state` returns an instance
    and ``learned_state.json`` holds its JSON form; None: the method learns nothing to save."""
    runs_model_code: ClassVar[bool] = False
    """Every sample runs model-written code in the sandbox: a run refuses to start where that
    cannot be isolated (see :func:`maslab.sandbox.isolation_refusal`). A method that runs code
    only sometimes leaves it False; its run stops at the first program instead."""

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        """Check the settings against ``Config``; a bad one is a one-line :class:`ConfigError`.

        Args:
            config: Settings as a mapping or a ``Config``; None keeps the paper's defaults.
            **overrides: Settings as keywords, over ``config``.
        """
        what = f"{self.name or type(self).__name__} config"
        self.config = self.Config.build(config, overrides, what=what, example=type(self).__name__)

    def agent_names(self) -> tuple[str, ...]:
        """The agents model roles may name besides the roles (this config's ``debater_1``, ...);
        an agent named after its role, or named only at run time, is reached by its role."""
        return ()

    def structure(self) -> Topology | None:
        """Who reads whom under this config, declared once: ``solve`` sets it as
        ``ctx.topology``, and the skills compiler and the report read it without a call. None
        when the topology depends on the task, the sample or what was learned (or there is
        none)."""
        return None

    def check_model_roles(self, model_roles: Mapping[str, Any] | None) -> ModelRoles:
        """``model_roles`` normalised; a one-line error for a key that names no role or agent."""
        checked = check_model_roles(model_roles)
        check_role_names(checked, self.name or type(self).__name__, self.roles, self.agent_names())
        return checked

    async def solve(self, task: Task, ctx: Context) -> Solution:
        """Solve ``task`` with model calls through ``ctx``; the solution's answer is scored."""
        raise NotImplementedError

    async def run_sample(self, task: Task, ctx: Context) -> Solution:
        """:meth:`solve`, then let the sample's calls settle (all are recorded).

        On a budget stop, even one the method caught, the solution says so in its metadata;
        if ``solve`` did not return, it is the method's best answer so far (``ctx.propose``),
        or empty. Other errors propagate once the calls have settled.

        On a sample with an environment the answer is what was called, turn by turn
        (:func:`~maslab.core.episode.episode_answer`), the same form for every method; the
        method's own answer moves to the metadata (``method_answer``), beside the number of
        turns it was given (``turns_delivered``).
        """
        solution: Solution | None = None
        try:
            solution = await self.solve(task, ctx)
        except BudgetExceeded as exc:
            ctx.budget_stop = ctx.budget_stop or exc  # a method may raise its own
        finally:
            await ctx.settle()
        if ctx.budget_stop is not None or solution is None:
            solution = solution or ctx.proposal or Solution(answer="")
            solution = solution.model_copy(
                update={"metadata": {**solution.metadata, "budget": str(ctx.budget_stop)}}
            )
        if ctx.environment is None:
            return solution
        metadata = {"method_answer": solution.answer, "turns_delivered": ctx.turn + 1}
        return Solution(
            answer=episode_answer(ctx.tool_calls, 1 + len(task.turns)),
            metadata={**solution.metadata, **metadata},
        )

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """Learn from ``tasks`` (a validation split). Most methods have nothing to learn.

        ``maslab run --optimize-on SPLIT`` calls it once, before the test samples, with a
        context of its own (sample id ``"optimize"``, the run seed): its calls are the
        optimisation's cost, recorded apart from the samples'. What it learned must then be
        in :meth:`learned_state`, which the run saves and reloads on a resume.
        """

    def learned_state(self) -> MethodState | None:
        """What :meth:`optimize` learned, an instance of :attr:`LearnedState` (None: nothing
        learned)."""
        return None

    def load_learned_state(self, state: Any) -> None:
        """Take back a :meth:`learned_state`: ``state`` is an instance of :attr:`LearnedState`
        (a method narrows the type to its own), already checked against the schema. What the
        schema cannot check (was it learned for this config?) raises ``ValueError`` with a
        short reason ("trained for 4 agents, this config has 3"), before anything is taken."""
        raise NotImplementedError(f"{type(self).__name__} declares no load_learned_state")

    @final
    def dump_learned_state(self) -> dict[str, Any] | None:
        """:meth:`learned_state` as JSON data, what ``learned_state.json`` holds (None: nothing
        learned)."""
        state = self.learned_state()
        if state is None:
            return None
        if self.LearnedState is None or not isinstance(state, self.LearnedState):
            raise TypeError(
                f"{type(self).__name__}.learned_state() returned a {type(state).__name__}, not "
                "its LearnedState or None"
            )
        return state.model_dump(mode="json")

    @final
    @classmethod
    def check_learned_state(cls, data: Any, source: str) -> MethodState | None:
        """Saved JSON ``data`` read by :attr:`LearnedState` (None: a method without one learned
        nothing); data that does not fit is a one-line :class:`ConfigError` naming ``source``,
        its file."""
        what = f"{source}: invalid {cls.name or cls.__name__} learned state"
        if cls.LearnedState is None:
            if data is None:
                return None
            raise ConfigError(f"{what}: expected null (the method learns nothing); {_RELEARN}")
        if not isinstance(data, Mapping):
            got = "null" if data is None else type(data).__name__
            raise ConfigError(f"{what}: expected an object, got {got}; {_RELEARN}")
        try:
            return cls.LearnedState.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"{validation_message(exc, what)}; {_RELEARN}") from None

    @final
    def restore_learned_state(self, data: Any, source: str) -> None:
        """Load saved JSON ``data`` (a resumed run, a Ray worker) instead of optimising again:
        checked (:meth:`check_learned_state`), then :meth:`load_learned_state`. A state that
        does not fit the schema, or that the method rejects, is a one-line
        :class:`ConfigError` naming ``source``."""
        state = self.check_learned_state(data, source)
        if state is None:
            return
        try:
            self.load_learned_state(state)
        except ValueError as exc:  # a ConfigError or a pydantic ValidationError too
            reason = validation_message(exc) if isinstance(exc, ValidationError) else str(exc)
            raise ConfigError(
                f"{source}: {self.name or type(self).__name__} learned state does not fit this "
                f"config: {one_line(reason)}; {_RELEARN}"
            ) from None

    @classmethod
    def learns(cls) -> bool:
        """Whether the method overrides :meth:`optimize` (has something to learn)."""
        return cls.optimize is not Method.optimize

    async def arun(
        self,
        task: Task | str,
        model: ChatModel | str = DEMO_MODEL,
        *,
        model_roles: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> Outcome:
        """Solve one task on ``model`` in a context of its own; ``await`` it in notebooks.

        Args:
            task: A task, or a bare question (a task with id ``"question"``).
            model: A spec or a handle; the embedded offline demo model by default.
            model_roles: Puts roles or agents on other models (``{"judge": "openai:gpt-4o"}``,
                see :mod:`maslab.core.roles`).
            **context: Keyword arguments of :class:`Context` (``sampling``, ``budget``, ``seed``,
                ...).
        """
        if isinstance(task, str):
            task = Task(id="question", question=task)
        roles = self.check_model_roles(model_roles)
        ctx = Context(model, sample_id=task.id, model_roles=roles, **context)
        try:
            return Outcome(await self.run_sample(task, ctx), ctx)
        finally:
            await ctx.models.aclose()

    def run(
        self,
        task: Task | str,
        model: ChatModel | str = DEMO_MODEL,
        *,
        model_roles: Mapping[str, Any] | None = None,
        **context: Any,
    ) -> Outcome:
        """The blocking form of :meth:`arun`, for plain scripts."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(task, model, model_roles=model_roles, **context))
        raise RuntimeError("an event loop is running (a notebook?): use `await method.arun(...)`")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


@dataclass(frozen=True)
class Outcome:
    """A solved task: the solution and the sample's context (usage, transcript, ledger)."""

    solution: Solution
    context: Context

    @property
    def answer(self) -> str:
        return self.solution.answer

    @property
    def usage(self) -> UsageTotals:
        return self.context.usage


_METHODS: Registry[type[Method]] = Registry("method", "maslab.methods")
register_method = _METHODS.register
get_method = _METHODS.get
list_methods = _METHODS.names
