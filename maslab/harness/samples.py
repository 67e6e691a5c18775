"""One sample, solved and scored: what a run does for each (task, repeat), wherever it runs
(in the run's own process, or on a cluster's worker that streams the outcome back).

:class:`SampleSolver` holds what solving needs (the method, the evaluator, the model pool and
the run's settings) and nothing of the run directory: whoever holds the directory appends the
:class:`Finished` sample it returns.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

from maslab import telemetry
from maslab.analysis.triage import signals, truncated_calls
from maslab.bench.evaluation import Evaluator
from maslab.core.context import Budget, Context
from maslab.core.environment import Environment
from maslab.core.method import Method
from maslab.core.scheduling import CallGate
from maslab.core.task import Task
from maslab.errors import LLMConnectionError, RequestRejected
from maslab.kit.aggregation import answer_key
from maslab.llm.pool import ModelPool
from maslab.sandbox import IsolationMissing, unsafe_no_sandbox
from maslab.store.records import ResultRecord, Status, Trace

if TYPE_CHECKING:
    from maslab.harness.runner import RunConfig

_ENDPOINT_STATUSES = {401, 403, 404}  # credentials or model refused: no sample can succeed
TOOL_RESULT_CHARS = 2000  # a tool call's result in the trace, cut to this many characters


class _SampleFields(TypedDict):
    """The fields of a sample's record whatever its outcome."""

    task_id: str
    repeat: int
    gold: str | None


@dataclass(frozen=True)
class Finished:
    """A finished sample: its result record, its trace, and whether it failed because the
    endpoint itself is unusable (the run stops early when its first samples all did)."""

    record: ResultRecord
    trace: Trace
    endpoint_failure: bool = False


def build_evaluator(cls: type[Evaluator], options: dict[str, Any], models: ModelPool) -> Evaluator:
    """``cls`` built with ``options``; an evaluator that takes ``models`` (its judges) gets the
    run's pool, so its calls share the run's caps and cache."""
    options = dict(options)
    if "models" in inspect.signature(cls).parameters:
        options["models"] = models
    return cls(**options)


def endpoint_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says the endpoint itself is unusable, not this one request."""
    if isinstance(exc, LLMConnectionError):
        return True
    return isinstance(exc, RequestRejected) and exc.status in _ENDPOINT_STATUSES


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def usage_fields(ctx: Context) -> dict[str, Any]:
    """A sample's spend for its result record: the method's calls (in total and per model) and
    the scoring calls, each as :class:`UsageTotals` fields."""
    return {
        "usage": ctx.usage.to_dict(),
        "usage_by_model": {m: t.to_dict() for m, t in ctx.ledger.by_model().items()},
        "scoring_usage": ctx.ledger.totals(purpose="scoring").to_dict(),
    }


def trace(
    task_id: str, repeat: int, prompt: str | None, ctx: Context, task: Task | None = None
) -> Trace:
    """A sample's trace (:class:`~maslab.store.records.Trace`, checked as it is built): its
    calls, the requests of its programs that the bridge refused and the calls of theirs that
    failed (:mod:`maslab.kit.bridge`), its transcript and the topology it ran on; given the
    ``task``, also the answer extracted from each message as its answer type extracts (None
    where there is none), which :mod:`maslab.analysis.trajectory` reads; any calls on its
    environment, each result cut to :data:`TOOL_RESULT_CHARS`; each agent's role."""
    line: dict[str, Any] = {
        "task_id": task_id,
        "repeat": repeat,
        "prompt": prompt,
        "calls": [r.to_dict() for r in ctx.ledger.records],
        "program_calls_refused": ctx.program_calls_refused,
        "program_calls_failed": ctx.program_calls_failed,
        "messages": [m.model_dump(mode="json") for m in ctx.transcript],
        "topology": ctx.topology.to_dict() if ctx.topology is not None else None,
    }
    if task is not None:
        line["answers"] = [answer_key(task, m.content) for m in ctx.transcript]
    if ctx.roles:
        line["roles"] = ctx.roles
    if ctx.tool_calls:
        line["tools"] = [
            {**vars(call), "result": _clip(call.result, TOOL_RESULT_CHARS)}  # a shallow copy
            for call in ctx.tool_calls
        ]
    return Trace.model_validate(line)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"


def tool_fields(ctx: Context) -> dict[str, int]:
    """A sample's calls on its environment for its result record: how many, and how many
    errored."""
    return {
        "tool_calls": len(ctx.tool_calls),
        "tool_errors": sum(call.error for call in ctx.tool_calls),
    }


class SampleSolver:
    """Solves and scores the samples of one run.

    Args:
        config: The run.
        method: Its method, built from ``config`` (and any learned state loaded).
        evaluator: Its evaluator.
        models: The pool every call of its samples goes through.
        environment: Builds a fresh environment for each sample of a task, or None for a task
            that needs none (the benchmark's :meth:`~maslab.bench.benchmark.Benchmark.environment`);
            None: no task has one.
    """

    def __init__(
        self,
        config: RunConfig,
        method: Method,
        evaluator: Evaluator,
        models: ModelPool,
        environment: Callable[[Task], Environment | None] | None = None,
    ) -> None:
        self.config = config
        self.method = method
        self.evaluator = evaluator
        self.models = models
        self.environment = environment

    def context(
        self,
        sample_id: str,
        repeat: int,
        calls: CallGate,
        budget: Budget | None,
        environment: Environment | None = None,
    ) -> Context:
        config = self.config
        return Context(
            config.model,
            models=self.models,
            sample_id=sample_id,
            repeat=repeat,
            seed=config.seed,
            budget=budget,
            sampling=config.sampling,
            model_roles=config.model_roles,
            gate=calls,
            environment=environment,
        )

    async def solve(self, task: Task, repeat: int, calls: CallGate) -> Finished:
        """Solve (see :meth:`Method.run_sample`), then score through the sample's context:
        scoring calls are the sample's too, but never count against its budget. The record
        carries the sample's triage signals, read from its trace, its calls cut at
        ``max_tokens``, and its calls on the environment the benchmark builds for it, if any."""
        environment = self.environment(task) if self.environment is not None else None
        ctx = self.context(task.id, repeat, calls, self.config.budget(), environment)
        started = time.monotonic()
        about = {"maslab.task": task.id, "maslab.repeat": repeat}
        with (
            telemetry.span(f"maslab sample {task.id}", about) as span,
            unsafe_no_sandbox(self.config.unsafe_no_sandbox),
        ):
            record, failure = await self._solve_and_score(task, ctx)
            if span is not None:
                span.set_attributes({"maslab.status": record.status,
                                     "maslab.correct": record.correct})  # fmt: skip
        elapsed = time.monotonic() - started
        line = trace(task.id, repeat, task.prompt(), ctx, task)
        update = {
            **usage_fields(ctx),
            **tool_fields(ctx),
            "truncated_calls": truncated_calls(line),
            "elapsed_s": elapsed,
            "signals": signals(record, line),
        }
        record = record.model_copy(update=update)
        return Finished(record, line, failure is not None and endpoint_failure(failure))

    async def _solve_and_score(
        self, task: Task, ctx: Context
    ) -> tuple[ResultRecord, BaseException | None]:
        """The record, and the exception that made it an error, if one did."""
        base: _SampleFields = {"task_id": task.id, "repeat": ctx.repeat, "gold": task.gold}
        try:
            solution = await self.method.run_sample(task, ctx)
        except IsolationMissing:  # the run's to stop, not this sample's to record
            raise
        except Exception as exc:  # a model failure or a method bug: recorded, retried on resume
            return ResultRecord(**base, status="error", error=describe(exc)), exc
        status: Status = "ok" if ctx.budget_stop is None else "budget"
        try:
            score = await self.evaluator.score(task, solution.answer, ctx=ctx)
        except IsolationMissing:
            raise
        except Exception as exc:  # a judge failure or an evaluator bug: this sample's error
            error = f"evaluator: {describe(exc)}"
            return ResultRecord(**base, status="error", answer=solution.answer, error=error), exc
        return ResultRecord(
            **base, status=status, answer=solution.answer, score=score, metadata=solution.metadata
        ), None

    async def aclose(self) -> None:
        await self.models.aclose()
        await self.evaluator.aclose()
