"""The runner of one run (method x benchmark x model x config x repeats), resumable.

Every (task, repeat) is an asyncio task. Two caps bound the work: ``concurrency`` model calls
in flight across the run, and as many samples in flight. An endpoint takes ``concurrency`` as
its own cap unless its endpoints file sets ``max_concurrency``; where that is lower, the
manifest's ``endpoint_caps`` keeps it for the summary to say. Runs that execute together (a
sweep's cells) can share :class:`SharedResources`: then the call cap and every endpoint's cap
hold across them all.
Each finished sample is scored and appended to the run directory at once; re-running the
same run skips finished samples and retries errored ones.

Everything that can be checked before spending is checked before the run directory is
touched: the method, benchmark and evaluator names and options, the model specs (and their
keys), and every task's gold answer. A run whose first samples all fail because the endpoint
cannot be reached (or refuses the credentials or the model) stops early and says why.
"""

from __future__ import annotations

import asyncio
import hashlib
import platform
import subprocess
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from maslab import defaults, telemetry
from maslab.bench.benchmark import Benchmark, get_benchmark
from maslab.bench.evaluation import Evaluator, get_evaluator, identity_options
from maslab.core.context import Budget, check_sampling
from maslab.core.method import Method, get_method
from maslab.core.roles import ModelRoles, check_model_roles, role_models
from maslab.core.scheduling import CallGate, Policy
from maslab.core.task import Task
from maslab.errors import ConfigError, ConnectionRefused, RunFailed
from maslab.harness.samples import (
    Finished,
    SampleSolver,
    build_evaluator,
    describe,
    trace,
    usage_fields,
)
from maslab.harness.shard import shard_out, shard_tasks
from maslab.llm.pool import ModelPool
from maslab.sandbox import (
    isolation_refusal,
    missing_isolation,
    protections,
    require_isolation,
    unsafe_no_sandbox,
)
from maslab.store.records import Trace
from maslab.store.run_store import LEARNED_STATE, Manifest, ResultRecord, RunStore
from maslab.version import __version__

if TYPE_CHECKING:
    from maslab.harness.ray_backend import RayCluster

# a run stops when this many samples failed with an endpoint failure before any succeeded (at
# the first that a server on this machine refused: nothing listens there)
UNREACHABLE_AFTER = 3


OPTIMIZE_ID = "optimize"  # the optimisation step's sample id: its context, record and trace


class EndpointUnreachable(RunFailed):
    """The run's first samples all failed to reach the model; it stopped before spending more."""


class OptimizationFailed(RunFailed):
    """The optimisation step raised; its spend is recorded, nothing learned was saved."""


def question_hash(task: Task) -> str:
    """A hash of the task's question text (whitespace and case folded), to find duplicates
    across splits whatever their ids."""
    text = " ".join(task.question.split()).casefold()
    return hashlib.sha256(text.encode()).hexdigest()


class RunConfig(BaseModel):
    """Everything a run needs. Identical configs resume into the same output directory.

    Attributes:
        method: A registered method's name.
        method_config: Its :class:`MethodConfig` settings; the paper's defaults for the rest.
        benchmark: A registered benchmark's name.
        benchmark_options: The benchmark's options (its ``Config``); the defaults for the rest.
        split: Which split of the benchmark.
        limit: Run the first ``limit`` tasks (after any shuffle); None runs all.
        shuffle: Shuffle the tasks with ``seed`` before ``limit``.
        data: A local data file to read instead of the benchmark's sources.
        model: The model spec every agent uses unless its method config names another.
        endpoints: An endpoints YAML file that serves ``model`` (aliases, keys, limits).
        sampling: Sampling parameters of every call (MASLab's by default).
        repeats: Independent attempts at each task.
        seed: The run seed: per-sample random streams, response-cache draws, the shuffle.
        concurrency: Model calls in flight across the run, and as many samples; also each
            endpoint's cap, unless the endpoints file sets its ``max_concurrency``.
        scheduler: Which waiting call goes next when ``concurrency`` binds (``fcfs`` or
            ``progress``, see :mod:`maslab.core.scheduling`); it orders calls, never changes them.
        evaluator: The scoring protocol; None is the benchmark's default.
        evaluator_options: The evaluator's options (its ``Config``: ``judge``, ...).
        max_calls: Per-sample budget: model calls.
        max_tokens: Per-sample budget: tokens (prompt and completion) over all calls.
        max_seconds: Per-sample budget: wall-clock seconds.
        cache: The SQLite response cache file; None runs uncached.
        strict_sandbox: Refuse to start where model-written code cannot run fully isolated.
        unsafe_no_sandbox: Let model-written code run where it cannot be isolated (no new root or
            no network of its own), with your user's rights; without it such a run refuses.
        native: Let methods and judges use what a model does natively (structured output,
            tool calls); False keeps every call on the text protocol, for comparisons.
        optimize_on: A split of the benchmark the method learns from (its ``optimize``) before
            the test samples; it may share no task with ``split`` (by id or question text).
        optimize_limit: Optimise on the first ``optimize_limit`` tasks of ``optimize_on``.
        shard: (i, N): run only shard i of N of the tasks (see :mod:`maslab.harness.shard`).
        out: The run directory (created, or resumed); None: the one the run's identity names
            (:meth:`~maslab.store.run_store.Manifest.directory`), so the same run resumes.
    """

    model_config = ConfigDict(extra="forbid")

    method: str
    method_config: dict[str, Any] = Field(default_factory=dict)
    benchmark: str
    benchmark_options: dict[str, Any] = Field(default_factory=dict)
    split: str = defaults.SPLIT
    limit: int | None = Field(None, ge=1)
    shuffle: bool = False
    data: str | None = None
    model: str
    model_roles: dict[str, Any] = Field(default_factory=dict)
    """Roles and agents on other models than ``model`` (see :mod:`maslab.core.roles`)."""
    endpoints: str | None = None
    sampling: dict[str, Any] = Field(default_factory=lambda: dict(defaults.SAMPLING))
    repeats: int = Field(defaults.REPEATS, ge=1)
    seed: int = defaults.SEED
    concurrency: int = Field(defaults.CONCURRENCY, ge=1)
    scheduler: Policy = defaults.SCHEDULER
    evaluator: str | None = None
    evaluator_options: dict[str, Any] = Field(default_factory=dict)
    max_calls: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    max_seconds: float | None = Field(None, gt=0)
    cache: str | None = None
    strict_sandbox: bool = False
    unsafe_no_sandbox: bool = False
    native: bool = True
    log_to: Literal["mlflow"] | None = None
    """The experiment tracker the finished run is logged to (:mod:`maslab.harness.tracking`);
    not part of what the run is."""
    optimize_on: str | None = None
    optimize_limit: int | None = Field(None, ge=1)
    shard: tuple[int, int] | None = None
    out: str | None = None

    @field_validator("sampling")
    @classmethod
    def _sampling(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_sampling(value, what="")

    @field_validator("model_roles")
    @classmethod
    def _model_roles(cls, value: dict[str, Any]) -> ModelRoles:
        return check_model_roles(value)

    def budget(self) -> Budget:
        return Budget(self.max_calls, self.max_tokens, self.max_seconds)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


_MANIFEST_FIELDS = {
    "method", "method_config", "benchmark", "split", "limit", "seed", "data", "model",
    "model_roles", "native", "sampling", "repeats", "concurrency", "shard",
}  # fmt: skip


def _manifest(
    config: RunConfig,
    tasks: list[Task],
    dataset_hash: str,
    benchmark: Benchmark,
    evaluator: str,
    scorer: Evaluator,
    optimize: dict[str, Any],
    endpoint_caps: dict[str, int],
) -> Manifest:
    """The run's manifest; the benchmark's and the evaluator's options as they checked them,
    defaults included (the evaluator's less its execution options)."""
    return Manifest(
        **config.model_dump(include=_MANIFEST_FIELDS),
        benchmark_options=benchmark.options,
        dataset_hash=dataset_hash,
        tasks=len(tasks),
        task_ids=[task.id for task in tasks],
        evaluator=evaluator,
        budget={k: v for k, v in asdict(config.budget()).items() if v is not None},
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        maslab_version=__version__,
        git_commit=_git_commit(),
        python=platform.python_version(),
        evaluator_options=identity_options(evaluator, scorer.config.model_dump(mode="json")),
        sandbox={
            **protections(),
            "strict": config.strict_sandbox,
            "unsafe_no_sandbox": config.unsafe_no_sandbox,
            "missing": missing_isolation(strict=False),
        },
        optimize=optimize,
        endpoint_caps=endpoint_caps,
    )


Listener = Callable[[ResultRecord], None]
TraceListener = Callable[[ResultRecord, Trace], None]


def _pool(config: RunConfig) -> ModelPool:
    return ModelPool(
        endpoints=config.endpoints,
        cache=config.cache,
        native=config.native,
        concurrency=config.concurrency,
    )


@dataclass(frozen=True)
class SharedResources:
    """What runs executing together share, so the run-wide caps hold across them: one model
    pool (one cap per endpoint, one response cache) and one gate on the model calls in flight.
    Their runs must agree on the settings it was built from
    (:data:`~maslab.harness.options.SHARED`); its builder closes it (:meth:`aclose`), never a
    run.
    """

    models: ModelPool
    calls: CallGate

    @classmethod
    def for_config(cls, config: RunConfig) -> SharedResources:
        """The resources of runs with ``config``'s shared settings."""
        return cls(_pool(config), CallGate(config.concurrency, config.scheduler))

    async def aclose(self) -> None:
        await self.models.aclose()


class Runner:
    """Runs one :class:`RunConfig`: :meth:`open`, then ``await`` :meth:`run`.

    Building it checks everything that can be checked before spending (names, options, model
    specs and keys, every task's gold answer); the run directory is untouched until :meth:`open`.

    Args:
        config: The run.
        listener: Called with every finished sample's record (a progress display).
        trace_listener: Called with every finished sample's record and trace, as it is written
            (figures added up while the run goes, so its report reads no trace again).
        shared: Resources this run shares with others running beside it; None gives it its
            own pool and call gate.
        cluster: Workers that solve the samples instead (``--backend ray``; the runner
            records what they stream back); None solves them in this process.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        listener: Listener | None = None,
        trace_listener: TraceListener | None = None,
        shared: SharedResources | None = None,
        cluster: RayCluster | None = None,
    ) -> None:
        self.config = config
        self.listener = listener
        self.trace_listener = trace_listener
        self.admitted = config.concurrency
        """Samples open at once."""
        self.shared = shared
        self.cluster = cluster
        self.benchmark = get_benchmark(config.benchmark)(**config.benchmark_options)
        every = self.benchmark.load(
            config.split, seed=config.seed if config.shuffle else None, data=config.data
        )
        # the hash covers the whole split, so a larger --limit extends the same run
        self.dataset_hash = self.benchmark.dataset_hash(every)
        self.tasks = every[: config.limit]
        if config.shard is not None:
            self.tasks = shard_tasks(self.tasks, config.shard)
        self.method: Method = get_method(config.method)(config.method_config)
        self.method.check_model_roles(config.model_roles)
        self.optimize_tasks: list[Task] = []
        optimize: dict[str, Any] = {}
        if config.optimize_on is not None:
            self.optimize_tasks, optimize = self._optimize_split(config.optimize_on, every)
        self.evaluator_name = config.evaluator or self.benchmark.evaluator
        # a shared pool's share closes nothing: the sweep closes the pool once, at its end
        self.models = shared.models.share() if shared is not None else _pool(config)
        self.evaluator: Evaluator = build_evaluator(
            get_evaluator(self.evaluator_name), config.evaluator_options, self.models
        )
        self.solver = SampleSolver(
            config, self.method, self.evaluator, self.models, self.benchmark.environment
        )
        # refuse before anything runs where code cannot be contained
        if config.strict_sandbox:
            require_isolation()
        elif (
            not config.unsafe_no_sandbox
            and self.runs_model_code()
            and (refusal := isolation_refusal())
        ):
            raise ConfigError(refusal)
        self._check_golds()
        for spec in (config.model, *role_models(config.model_roles)):
            self.models.get(spec)  # a bad spec or a missing key fails here, not per sample
        self.todo: list[tuple[Task, int]] | None = None
        self.manifest = _manifest(
            config,
            self.tasks,
            self.dataset_hash,
            self.benchmark,
            self.evaluator_name,
            self.evaluator,
            optimize,
            self.models.binding_caps(),
        )
        out = config.out
        if out is None:  # the directory the run's identity names
            directory = self.manifest.directory()
            out = str(directory if config.shard is None else shard_out(directory, config.shard))
            self.config = config = config.model_copy(update={"out": out})
        self.store = RunStore(out)
        self._succeeded = False
        self._endpoint_failures = 0

    def runs_model_code(self) -> bool:
        """Whether every sample runs model-written code (the method's or the scoring's)."""
        return self.method.runs_model_code or self.evaluator.runs_model_code

    def _optimize_split(self, split: str, test: list[Task]) -> tuple[list[Task], dict[str, Any]]:
        """The optimisation step's tasks (of ``split``) and their part of the run's identity; a
        one-line error when the method learns nothing, the split has no task or shares one
        with the test split ``test`` (the same split, a shared id or the same question text)."""
        config = self.config
        if not self.method.learns():
            raise ConfigError(f"{config.method} has nothing to learn (no optimize step)")
        if split == config.split:
            raise ConfigError(f"the optimisation split {split!r} is the test split")
        every = self.benchmark.load(split, seed=config.seed if config.shuffle else None)
        tasks = every[: config.optimize_limit]
        if not tasks:  # nothing to learn from: its learned state would be null
            raise ConfigError(f"the optimisation split {split!r} has no tasks")
        ids, questions = {t.id for t in test}, {question_hash(t) for t in test}
        shared = [t for t in tasks if t.id in ids or question_hash(t) in questions]
        if shared:
            raise ConfigError(
                f"the optimisation split {split!r} shares {len(shared)} of its {len(tasks)} "
                f"tasks with the test split {config.split!r} (by id or question, first "
                f"{shared[0].id}): optimise on tasks the run does not score"
            )
        identity = {
            "split": split,
            "limit": config.optimize_limit,
            "dataset_hash": self.benchmark.dataset_hash(every),
            "task_ids": [t.id for t in tasks],
        }
        return tasks, identity

    def _check_golds(self) -> None:
        """Every task's gold must be one the evaluator can score, before anything is spent."""
        problems = []
        for task in self.tasks:
            try:
                self.evaluator.check_gold(task)
            except ConfigError as exc:
                problems.append(str(exc))
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise ConfigError(f"unusable gold answer: {problems[0]}{more}")

    def pending(self, finished: set[tuple[str, int]]) -> list[tuple[Task, int]]:
        return [
            (task, repeat)
            for repeat in range(self.config.repeats)
            for task in self.tasks
            if (task.id, repeat) not in finished
        ]

    def open(self) -> list[tuple[Task, int]]:
        """Open (or resume) the run directory; returns the samples still to do."""
        self.todo = self.pending(self.store.open(self.manifest))
        return self.todo

    async def run(self) -> list[ResultRecord]:
        """Run every unfinished sample; returns the run's full result set afterwards."""
        await self.run_pending()
        return self.store.results()

    async def run_pending(self) -> None:
        """Run every unfinished sample (:meth:`run` without reading the results back)."""
        todo = self.todo if self.todo is not None else self.open()
        calls = self._call_gate()
        c = self.config
        about = {"maslab.method": c.method, "maslab.benchmark": c.benchmark,
                 "gen_ai.request.model": c.model, "maslab.run": str(self.store.dir),
                 "maslab.samples": len(todo)}  # fmt: skip
        try:
            with telemetry.span(f"maslab run {c.method} {c.benchmark}", about):
                if self.config.optimize_on is not None:
                    await self._optimize(calls)
                if self.cluster is not None:
                    await self.cluster.run(self, todo)
                else:
                    pending, workers = iter(todo), min(self.admitted, len(todo))
                    await all_or_first_failure(self._work(pending, calls) for _ in range(workers))
        finally:
            self.store.close()
            await self.solver.aclose()

    def _call_gate(self) -> CallGate:
        """The gate every model call of the run passes: ``concurrency`` in flight, waiting
        calls served by the run's scheduler (the sweep's gate, when runs share one)."""
        if self.shared is not None:
            return self.shared.calls
        return CallGate(self.config.concurrency, self.config.scheduler)

    async def _optimize(self, calls: CallGate) -> None:
        """The optimisation step: load the learned state a previous attempt saved, or run the
        method's ``optimize`` in a context of its own, record its spend (whatever happens)
        and save what it learned, atomically."""
        saved, state = self.store.learned_state()
        if saved:
            self.method.restore_learned_state(state, str(self.store.dir / LEARNED_STATE))
            return
        config = self.config
        ctx = self.solver.context(OPTIMIZE_ID, 0, calls, budget=None)
        started = time.monotonic()
        failure: BaseException | None = None
        try:
            with unsafe_no_sandbox(config.unsafe_no_sandbox):
                await self.method.optimize(self.optimize_tasks, ctx)
        except BaseException as exc:  # recorded below; an interrupt propagates as it is
            failure = exc
        await ctx.settle()
        record = ResultRecord(
            task_id=OPTIMIZE_ID,
            status="ok" if failure is None else "error",
            error=None if failure is None else describe(failure),
            metadata={"split": config.optimize_on, "tasks": len(self.optimize_tasks)},
            elapsed_s=time.monotonic() - started,
            **usage_fields(ctx),
        )
        self.store.append_optimization(record, trace(OPTIMIZE_ID, 0, None, ctx))
        if isinstance(failure, Exception):
            raise OptimizationFailed(
                f"the optimisation step on {config.optimize_on!r} failed ({describe(failure)}); "
                "nothing learned was saved: fix it and re-run"
            ) from failure
        if failure is not None:
            raise failure
        self.store.write_learned_state(
            self.method.dump_learned_state(),
            method=config.method,
            split=config.optimize_on,
            tasks=len(self.optimize_tasks),
        )

    async def _work(self, pending: Iterator[tuple[Task, int]], calls: CallGate) -> None:
        """Solve and record the samples ``pending`` yields, the next as each ends, until none is
        left (:attr:`admitted` of these run at once, so a run holds that many samples open,
        however many it has to do)."""
        for task, repeat in pending:
            self.record(await self.solver.solve(task, repeat, calls))

    def record(self, finished: Finished) -> None:
        """Append a finished sample to the run directory (whoever solved it), tell the listener,
        and stop the run once its first samples have all failed on an unusable endpoint."""
        record = finished.record
        self.store.append(record, finished.trace)
        if self.listener is not None:
            self.listener(record)
        if self.trace_listener is not None:
            self.trace_listener(record, finished.trace)
        if record.status != "error":
            self._succeeded = True
        elif not self._succeeded and finished.endpoint_failure:
            self._endpoint_failures += 1
            if (record.error or "").startswith(f"{ConnectionRefused.__name__}: "):
                raise EndpointUnreachable(f"stopped: {record.error}; then re-run to resume")
            if self._endpoint_failures >= UNREACHABLE_AFTER:
                raise EndpointUnreachable(
                    f"stopped after {self._endpoint_failures} samples failed and none "
                    f"succeeded: {record.error}; fix the endpoint, then re-run to resume"
                )


async def all_or_first_failure(coroutines: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run all at once; a failure (a stop, a full disk, a bug) cancels the rest and is raised."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    if not tasks:
        return
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]


async def run(config: RunConfig, *, listener: Listener | None = None) -> list[ResultRecord]:
    """Build a :class:`Runner` (arguments as there) and run it; returns every record."""
    return await Runner(config, listener=listener).run()
