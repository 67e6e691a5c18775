"""Per-sample context: the one door every model call of a sample goes through.

It resolves model handles, numbers identical requests (the cache's draw index), enforces the
sample's budget, records every call in the usage ledger and every agent message in the
transcript, counts the requests of its sandboxed programs (:mod:`maslab.kit.bridge`) that were
refused or failed, and gives the sample its own seeded random generator. On a task of several
turns or with an environment it is also the tool door: it delivers the episode's turns and runs
and records every call on the environment (:mod:`maslab.core.episode`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from maslab import defaults, telemetry
from maslab.config_files import validation_message
from maslab.core.environment import Environment, ToolError
from maslab.core.episode import ToolOutcome, ToolRecord, Turn
from maslab.core.messages import Message, Transcript
from maslab.core.roles import check_model_roles, role_models
from maslab.core.scheduling import CallGate
from maslab.core.task import Solution, Task
from maslab.errors import (
    BudgetExceeded,
    ConfigError,
    ContextTooLong,
    ContextWindowFull,
    SampleEnded,
)
from maslab.llm.ledger import CallRecord, Purpose, UsageLedger, UsageTotals
from maslab.llm.pool import ModelPool
from maslab.llm.types import ChatMessage, ChatModel, ChatRequest, Completion, make_request
from maslab.secrets import redact

if TYPE_CHECKING:
    from maslab.core.agents import Agent
    from maslab.core.topology import Topology


SETTLE_GRACE_S = 10.0
_RESUME_STEPS = 16  # event-loop turns: enough for a few levels of nested gathers


@dataclass(frozen=True)
class Budget:
    """Per-sample limits; ``None`` means unlimited. Cached calls count too, so reruns replay."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None


class Sampling(BaseModel):
    """The sampling parameters a run or sample may set (those of :func:`make_request`)."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    extra: dict[str, Any] | None = None


def check_sampling(sampling: Mapping[str, Any] | None, what: str = "sampling") -> dict[str, Any]:
    """``sampling`` as a plain dict (values as given), or a one-line :class:`ConfigError`
    naming the bad key; ``what`` prefixes the message ("" when the caller names the field)."""
    if sampling is None:
        return {}
    if not isinstance(sampling, Mapping):
        kind = type(sampling).__name__
        raise ConfigError(f"sampling must be a mapping like {{'temperature': 0.5}}, got {kind}")
    try:
        Sampling.model_validate(sampling)
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, what)) from None
    return dict(sampling)


def derive_seed(*parts: object) -> int:
    """A 64-bit seed from any parts (run seed, task id, repeat), stable across processes."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


class Context:
    """Everything one sample (task x repeat) of a run needs.

    Every call draws from the random stream (run seed, task, repeat, agent); identical requests
    within a stream are numbered. Both go into the cache key and the local model's seed, so
    repeats and new seeds draw afresh and a re-run replays each draw exactly.
    """

    def __init__(
        self,
        model: ChatModel | str,
        *,
        models: ModelPool | None = None,
        sample_id: str = "sample",
        repeat: int = 0,
        seed: int = defaults.SEED,
        budget: Budget | None = None,
        sampling: Mapping[str, Any] | None = None,
        model_roles: Mapping[str, Any] | None = None,
        gate: CallGate | asyncio.Semaphore | None = None,
        environment: Environment | None = None,
    ) -> None:
        """Check the arguments and open the sample's ledger, transcript and random stream.

        Args:
            model: The sample's default model: a spec (``"openai:gpt-4o-mini"``) or a handle.
            models: The pool that turns specs into handles; a run's samples share one (and so
                its connections and response cache). None: a pool of this context's own.
            sample_id: The sample's name in the ledger and its random stream (the task id).
            repeat: Which attempt at the task this is (0-based), for the random stream.
            seed: The run seed; with ``sample_id`` and ``repeat`` it seeds ``rng`` and the
                response cache's draws.
            budget: The sample's limits on calls, tokens and seconds; None is unlimited.
            sampling: Sampling parameters of every call (``temperature``, ``max_tokens``, ...);
                a call's own keywords override them. None: the model's defaults.
            gate: Caps the model calls in flight across every sample that shares it; a
                :class:`~maslab.core.scheduling.CallGate` also weighs each waiting call by the calls
                of its sample answered so far (its policy decides whether that counts).
            model_roles: Role or agent name -> model spec (or ``{model, temperature}``), giving
                agents other models than ``model`` (see :mod:`maslab.core.roles`).
            environment: The sample's own environment, whose functions its agents call through
                :meth:`call_tool`; None for a task that needs none.

        Raises:
            ConfigError: An argument of the wrong type, or an unknown sampling parameter.
        """
        if not isinstance(model, str) and not callable(getattr(model, "complete", None)):
            _wrong("model", model, "a model spec like 'openai:gpt-4o-mini' or a ChatModel")
        for name, value, kind, expected in (
            ("models", models, ModelPool, "a ModelPool"),
            ("budget", budget, Budget, "a Budget"),
            ("gate", gate, (asyncio.Semaphore, CallGate), "an asyncio.Semaphore or a CallGate"),
            ("environment", environment, Environment, "an Environment"),
        ):
            if value is not None and not isinstance(value, kind):
                _wrong(name, value, expected)
        if not isinstance(sample_id, str):
            _wrong("sample_id", sample_id, "a string")
        for name, number in (("repeat", repeat), ("seed", seed)):
            if not isinstance(number, int) or isinstance(number, bool):
                _wrong(name, number, "an int")
        self.sampling = check_sampling(sampling)
        self.models = models or ModelPool()
        self.model = self.resolve(model)
        self.model_roles = check_model_roles(model_roles)
        for spec in role_models(self.model_roles):
            self.resolve(spec)  # a bad spec or a missing key fails here, before any call
        self.sample_id = sample_id
        self.repeat = repeat
        self.seed = seed
        self.budget = budget or Budget()
        self.gate = gate
        self.rng = random.Random(derive_seed(seed, sample_id, repeat))
        self.affinity = "\x1f".join(map(str, (seed, sample_id, repeat)))  # see ChatRequest
        self.ledger = UsageLedger()
        self.transcript = Transcript()
        self.topology: Topology | None = None
        self.proposal: Solution | None = None
        self.budget_stop: BudgetExceeded | None = None
        self.program_calls_refused = 0  # its programs' requests the bridge refused (no call)
        self.program_calls_failed = 0  # its programs' calls the model failed (error replies)
        self.environment = environment
        self.turn = 0  # the episode's current turn (0-based): the turn of each call recorded
        self.tool_calls: list[ToolRecord] = []  # every call on the environment, in order
        self.roles: dict[str, str] = {}  # each agent's role, by name (ctx.agent records it)
        self._ended = False
        self._draws: Counter[tuple[str, str]] = Counter()
        self._inflight: set[asyncio.Future[Completion]] = set()
        self._callers: set[asyncio.Task[Any]] = set()
        self._calls = self._tokens_used = 0  # the method's, for its budget
        self._answered = 0  # calls answered, scoring too: the sample's progress for the gate
        self._started = time.monotonic()

    def resolve(self, model: ChatModel | str | None) -> ChatModel:
        """A model handle: ``None`` is the sample's default model, a string a spec."""
        if model is None:
            return self.model
        return self.models.get(model) if isinstance(model, str) else model

    def agent(self, name: str, **options: Any) -> Agent:
        """A new agent bound to this sample (see :class:`maslab.core.agents.Agent`)."""
        from maslab.core.agents import Agent

        return Agent(self, name, **options)

    def post(self, sender: str, content: str, **fields: Any) -> Message:
        """Add a message that no model wrote (a vote, a tool result, an environment event)."""
        return self.transcript.add(Message(sender=sender, content=content, **fields))

    def propose(self, answer: str, **metadata: Any) -> None:
        """Record the method's best answer so far: a budget stop scores the latest one."""
        self.proposal = Solution(answer=answer, metadata=metadata)

    async def episode(self, task: Task) -> AsyncIterator[Turn]:
        """The user turns of ``task``, each delivered when the method asks for the next: the
        first is its prompt, then each of ``task.turns``. While a turn is the current one, every
        call on the environment is recorded at it. A method that never asks sees the first turn
        only (``task.prompt()``), and every call it makes counts at that turn.

        The functions of a turn are the environment's at that turn, else the task's declared
        ``tools`` (the same at every turn)."""
        for index, message in enumerate((task.prompt(), *task.turns)):
            self.turn = index
            functions = (
                self.environment.functions(index) if self.environment is not None else task.tools
            )
            yield Turn(index, message, tuple(functions))

    def call_tool(self, agent: str | None, name: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Call function ``name`` of the sample's environment at the current turn and record it.

        A call the environment refuses (:class:`~maslab.core.environment.ToolError`) is an
        error observation, ``"error: <its message>"``; any other exception is the
        environment's fault and propagates. A tool call is no model call: it counts against no
        budget (a method bounds its loop, :func:`maslab.kit.acting.act`).

        Raises:
            SampleEnded: The sample has ended (:meth:`settle`).
            RuntimeError: The sample has no environment (its tools are only declared).
        """
        if self._ended:
            raise SampleEnded(f"sample {self.sample_id} has ended: no new tool call starts")
        if self.environment is None:
            raise RuntimeError(f"sample {self.sample_id} has no environment to call {name!r} on")
        started = time.perf_counter()
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                      "maslab.task": self.sample_id, "maslab.agent": agent}  # fmt: skip
        with telemetry.span(f"execute_tool {name}", attributes) as span:
            try:
                outcome = ToolOutcome(self.environment.execute(name, arguments))
            except ToolError as exc:
                outcome = ToolOutcome(f"error: {exc}", error=True)
            if span is not None:
                span.set_attribute("maslab.tool_error", outcome.error)
        duration = time.perf_counter() - started
        self.tool_calls.append(
            ToolRecord(
                self.turn, agent, name, dict(arguments), outcome.result, outcome.error, duration
            )
        )
        return outcome

    @property
    def usage(self) -> UsageTotals:
        """The method's calls (scoring calls are in ``ledger.totals(purpose="scoring")``)."""
        return self.ledger.totals()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def _stop(self, exc: BudgetExceeded) -> BudgetExceeded:
        """Remember the first budget stop (a method may catch it; the run still counts it)."""
        if self.budget_stop is None:
            self.budget_stop = exc
        return exc

    def _admit(self) -> float | None:
        """Raise unless a new method call may start; return the seconds left (None: no limit)."""
        if self._ended:
            raise SampleEnded(f"sample {self.sample_id} has ended: no new model call starts")
        b = self.budget
        if b.max_calls is not None and self._calls >= b.max_calls:
            raise self._stop(BudgetExceeded("calls", b.max_calls, self._calls))
        if b.max_tokens is not None and self._tokens_used >= b.max_tokens:
            raise self._stop(BudgetExceeded("tokens", b.max_tokens, self._tokens_used))
        if b.max_seconds is None:
            return None
        left = b.max_seconds - self.elapsed
        if left <= 0:
            raise self._stop(BudgetExceeded("seconds", b.max_seconds, self.elapsed))
        return left

    async def chat(
        self,
        messages: str | Sequence[ChatMessage],
        *,
        model: ChatModel | str | None = None,
        agent: str | None = None,
        round: int | None = None,
        purpose: Purpose = "method",
        stream: str | None = None,
        **params: Any,
    ) -> Completion:
        """One model call, budgeted and recorded.

        A call whose caller stops waiting (budget deadline, cancellation) still runs to its end
        and is recorded.

        Args:
            messages: A prompt (one user turn) or the whole chat, system turn included.
            model: A spec or handle for this call; None is the sample's model.
            agent: The calling agent's name: in the ledger and in the random stream.
            round: The method's round, recorded with the call.
            purpose: ``"method"``, or ``"scoring"`` for an evaluator's call: recorded and gated
                like any other, but never counted against, or stopped by, the method's budget.
            stream: A run-wide random stream, for a call whose result the method shares across
                samples (built once, by whichever sample comes first): keyed by (run seed,
                stream) instead of the sample.
            **params: Sampling parameters (those of :class:`Sampling`) over the context's.

        Raises:
            LLMError: The model failed for good (after any retries).
            BudgetExceeded: The budget forbids the call, or its time ran out while waiting;
                :class:`~maslab.errors.ContextWindowFull` when a method's call did not fit the
                model's context window (the sample ends there, scored on what it did).
            SampleEnded: The sample has ended (:meth:`settle`); no new method call starts.
        """
        left = None
        if purpose == "method":
            left = self._admit()
            self._calls += 1
        handle = self.resolve(model)
        where = (stream,) if stream else (self.sample_id, self.repeat, agent or "")
        scope = "\x1f".join(map(str, (self.seed, *where)))
        request = make_request(
            messages, scope=scope, affinity=self.affinity, **{**self.sampling, **params}
        )
        key = (scope, request.fingerprint(handle.name, with_draw=False))
        draw = self._draws[key]
        self._draws[key] = draw + 1
        if draw:  # an identical request came first in this stream: a new draw
            request = request.with_draw(draw, scope)
        record = CallRecord(
            self.sample_id, agent, round, handle.name,
            draw=request.draw, purpose=purpose, messages=request.messages,
        )  # fmt: skip
        self.ledger.add(record)
        call = asyncio.ensure_future(self._call(handle, request, record))
        self._inflight.add(call)
        call.add_done_callback(functools.partial(self._call_done, record))
        caller = asyncio.current_task()
        if caller is not None:
            self._callers.add(caller)
        try:
            return await asyncio.wait_for(asyncio.shield(call), left)
        except asyncio.TimeoutError:
            raise self._stop(
                BudgetExceeded("seconds", self.budget.max_seconds or 0, self.elapsed)
            ) from None
        except ContextTooLong as exc:
            if purpose != "method":
                raise
            raise self._stop(ContextWindowFull(exc)) from None

    def _call_done(self, record: CallRecord, call: asyncio.Future[Completion]) -> None:
        """Forget a finished call; one cancelled before it began is marked failed here."""
        self._inflight.discard(call)
        if call.cancelled() and record.error is None:
            record.error = "CancelledError: cancelled before it started"

    async def _call(
        self, handle: ChatModel, request: ChatRequest, record: CallRecord
    ) -> Completion:
        """Run one call and fill in its record; any failure (cancellation too) marks it failed
        and propagates."""
        attributes = {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": handle.name,
            "maslab.task": self.sample_id, "maslab.repeat": self.repeat,
            "maslab.agent": record.agent, "maslab.round": record.round,
            "maslab.purpose": record.purpose,
        }  # fmt: skip
        with telemetry.span(f"chat {handle.name}", attributes) as span:
            try:
                async with self._slot():
                    completion = await handle.complete(request)
            except BaseException as exc:
                record.error = redact(f"{type(exc).__name__}: {exc}".removesuffix(": "))
                record.attempts = getattr(exc, "attempts", 1)
                raise
            if span is not None:
                span.set_attributes({
                    "gen_ai.usage.input_tokens": completion.usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": completion.usage.completion_tokens,
                    "gen_ai.response.finish_reasons": [completion.finish_reason or "stop"],
                    "maslab.cached": completion.cached,
                })  # fmt: skip
        self._answered += 1
        record.prompt_tokens = completion.usage.prompt_tokens
        record.completion_tokens = completion.usage.completion_tokens
        record.estimated = completion.usage.estimated
        record.latency_s = completion.latency_s
        record.queued_s = completion.queued_s
        record.cached = completion.cached
        record.response = completion.text
        record.finish_reason = completion.finish_reason
        record.tool_calls = completion.tool_calls
        record.attempts = completion.attempts
        if record.purpose == "method":
            self._tokens_used += completion.usage.total_tokens
        return completion

    def _slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """A place under the gate for one call (none without a gate)."""
        if isinstance(self.gate, CallGate):
            return self.gate.slot(self._answered)
        return self.gate or contextlib.nullcontext()

    async def settle(self, grace_s: float = SETTLE_GRACE_S) -> None:
        """End the sample: no new method call starts; wait for the calls still in flight.

        Sibling calls a method left running (a budget stop or a failure ended it early) finish
        and are recorded; their callers get ``grace_s`` to take the answers in (the transcript,
        a proposal) before they are cancelled.
        """
        self._ended = True
        current = asyncio.current_task()
        others = [t for t in self._callers if t is not current]
        if not (self._inflight or others):
            return  # every call was this task's own and has ended: nothing to wait for
        while self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)
        callers = [t for t in others if not t.done()]
        if callers:
            _, late = await asyncio.wait(callers, timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        for _ in range(_RESUME_STEPS):  # let tasks gathering those callers resume too
            await asyncio.sleep(0)


def _wrong(name: str, value: object, expected: str) -> NoReturn:
    """Raise the one-line error for a :class:`Context` argument of the wrong type."""
    raise ConfigError(f"Context {name} must be {expected}, got {type(value).__name__}")
