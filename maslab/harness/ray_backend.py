"""Running a run's samples on Ray (``--backend ray``), local or on a cluster.

The driver (the process that runs ``maslab run``, ``maslab sweep`` or ``maslab.evaluate``)
stays the single writer of every run directory. It deals each run's samples still to do into
shards (:func:`maslab.harness.distributed.plan_shards`) and hands each shard to a free lane of a
worker:
a Ray actor running maslab's asyncio engine, :data:`LANES` shards at once, which streams each
finished sample (its record and trace) back as it finishes. The driver appends them as a local
run would, so resume, exactly one record per (task, repeat) and the manifest hold unchanged.
When a worker dies, the samples of its shard not yet streamed back go to a new worker
(:data:`ATTEMPTS` times at most); a sample that was streamed back is never run again.

The limits hold across the workers: each worker slot has a fixed share of the run's
``concurrency`` and of every endpoint's ``max_concurrency`` and ``rpm``
(:mod:`maslab.harness.distributed`). The response cache stays one SQLite file on the driver's
machine,
served by a cache actor placed there: workers look calls up in it and send it what they fetch,
so a re-run on the cluster replays with zero requests.

Nothing waits for the workers to start: a shard is handed to its worker's lane at once and
sent once that worker is up. With no address the command starts a local Ray of its own (never
the cluster last started on the machine, which Ray's default would join) and stops it at the
end; a running cluster it joins (``--address auto``) is only disconnected from, so a cluster
started once (``ray start --head``) saves every command Ray's start.

Workers need maslab (and any plugin the run uses) installed, and the API keys its endpoints
name in their environment; a local Ray's workers inherit the driver's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from maslab.bench.benchmark import Benchmark
from maslab.bench.evaluation import Evaluator
from maslab.core.method import Method
from maslab.core.scheduling import CallGate
from maslab.core.task import Task
from maslab.errors import ConfigError, RunFailed
from maslab.harness.distributed import plan_shards, share, split_endpoints, usable_slots
from maslab.harness.options import SHARED
from maslab.harness.ray_watchdog import watch
from maslab.harness.runner import all_or_first_failure
from maslab.harness.samples import Finished, SampleSolver, build_evaluator
from maslab.llm.cache import BATCH_SECONDS, BATCH_SIZE, ResponseCache
from maslab.llm.endpoints import EndpointsFile, endpoints_table
from maslab.llm.pool import ModelPool
from maslab.llm.types import Completion
from maslab.sandbox import require_isolation
from maslab.store.run_store import LEARNED_STATE

if TYPE_CHECKING:
    from maslab.harness.runner import RunConfig, Runner

ATTEMPTS = 3  # workers a shard may lose before its run stops (re-running resumes it)
# shards a worker runs at once, under its one share of the limits: while one finishes its last
# samples, the others keep that share busy, and a sweep of up to 4 cells hands each worker a
# shard of every cell at once, as the local backend runs them (with 2, perf/ray_sweep.py's sweep
# took 1.4x the local model window: one worker ran 5 of the 8 shards, the other 3)
LANES = 4

log = logging.getLogger(__name__)


class WorkersLost(RunFailed):
    """A shard's workers died :data:`ATTEMPTS` times; the samples they finished are saved."""


@dataclass(frozen=True)
class RunSpec:
    """What a worker needs to solve a run's samples, whatever files its machine holds: the
    config, the method's and the evaluator's classes (a notebook's own, too), the endpoints
    table (not its file), the state the method learned (its JSON form), if it learns, and the
    benchmark's class, which builds each sample's environment (None: no sample has one)."""

    config: RunConfig
    method: type[Method]
    evaluator: type[Evaluator]
    endpoints: EndpointsFile | None
    learned_state: dict[str, Any] | None
    benchmark: type[Benchmark] | None = None


@dataclass(frozen=True)
class Shard:
    run: RunSpec
    samples: list[tuple[Task, int]]


class CacheServer:
    """The run's response cache, served from the driver's machine to every worker."""

    def __init__(self, path: str) -> None:
        self.cache = ResponseCache(path)

    def get(self, key: str) -> Completion | None:
        return self.cache.get(key)

    def put_many(self, entries: list[tuple[str, Completion]]) -> None:
        for key, completion in entries:
            self.cache.put(key, completion)

    def close(self) -> None:
        self.cache.close()


class RemoteCache:
    """A worker's stand-in for the response cache (a :class:`~maslab.llm.cache.CacheStore`):
    look-ups ask the cache server; new entries go to it in batches, as a local cache writes
    them (:data:`~maslab.llm.cache.BATCH_SIZE`, :data:`~maslab.llm.cache.BATCH_SECONDS`)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self._pending: dict[str, Completion] = {}  # not yet sent
        self._oldest = 0.0
        self._sent: list[Any] = []  # batches the server may not have stored yet

    async def aget(self, key: str) -> Completion | None:
        if key in self._pending:
            return self._pending[key]
        return await self.server.get.remote(key)

    def put(self, key: str, completion: Completion) -> None:
        now = time.monotonic()
        if not self._pending:
            self._oldest = now
        self._pending[key] = completion
        if len(self._pending) >= BATCH_SIZE or now - self._oldest >= BATCH_SECONDS:
            self._send()

    def _send(self) -> None:
        # one caller's calls to an actor run in the order sent: a later look-up sees these
        self._sent.append(self.server.put_many.remote(list(self._pending.items())))
        self._pending = {}

    async def aflush(self) -> None:
        """Send what waits, and wait until the server has it."""
        if self._pending:
            self._send()
        sent, self._sent = self._sent, []
        await asyncio.gather(*sent)


class ShardWorker:
    """One worker slot: runs the shards handed to it on maslab's asyncio engine, under its
    slot's share of the limits, and streams back each finished sample."""

    def __init__(self, slot: int, slots: int, cache: Any | None) -> None:
        self.slot, self.slots = slot, slots
        self.cache = RemoteCache(cache) if cache is not None else None
        self._resources: dict[tuple[Any, ...], tuple[ModelPool, CallGate]] = {}

    def pid(self) -> int:
        return os.getpid()

    def _share(self, total: int) -> int:
        return share(total, self.slot, self.slots)

    def resources(self, run: RunSpec) -> tuple[ModelPool, CallGate]:
        """This slot's model pool and call gate for runs with ``run``'s settings: shared by
        every shard it runs, so its share holds across them."""
        config = run.config
        key = tuple(getattr(config, name) for name in SHARED)
        if key not in self._resources:
            pool = ModelPool(
                endpoints=split_endpoints(run.endpoints, self.slot, self.slots),
                cache=self.cache if config.cache else None,
                native=config.native,
                concurrency=self._share(config.concurrency),
            )
            self._resources[key] = pool, CallGate(self._share(config.concurrency), config.scheduler)
        return self._resources[key]

    async def run(self, shard: Shard) -> AsyncIterator[list[Finished]]:
        """Solve the shard's samples, ``concurrency``'s share at once; yield them in batches as
        they finish (after the last, every response fetched is in the cache)."""
        run = shard.run
        config = run.config
        if config.strict_sandbox:
            require_isolation()
        models, calls = self.resources(run)
        method = run.method(config.method_config)
        if run.learned_state is not None:
            method.restore_learned_state(run.learned_state, f"{config.out}/{LEARNED_STATE}")
        evaluator = build_evaluator(run.evaluator, config.evaluator_options, models)
        benchmark = run.benchmark(config.benchmark_options) if run.benchmark else None
        environment = benchmark.environment if benchmark is not None else None
        solver = SampleSolver(config, method, evaluator, models, environment)
        open_samples = asyncio.Semaphore(self._share(config.concurrency))
        finished: asyncio.Queue[Finished] = asyncio.Queue()

        async def sample(task: Task, repeat: int) -> None:
            async with open_samples:
                finished.put_nowait(await solver.solve(task, repeat, calls))

        solving = asyncio.ensure_future(all_or_first_failure(sample(*s) for s in shard.samples))
        left = len(shard.samples)
        try:
            while left:
                batch = await _next_batch(finished, solving)
                left -= len(batch)
                if not left and self.cache is not None:
                    await self.cache.aflush()
                yield batch
        finally:
            solving.cancel()
            await asyncio.gather(solving, return_exceptions=True)
            await evaluator.aclose()


async def _next_batch(
    finished: asyncio.Queue[Finished], solving: asyncio.Future[None]
) -> list[Finished]:
    """The samples finished by now (at least one), or the failure that stopped ``solving``."""
    if finished.empty():
        waiting = asyncio.ensure_future(finished.get())
        either: set[asyncio.Future[Any]] = {waiting, solving}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():
            waiting.cancel()
            solving.result()  # it failed (it cannot have finished with samples still to come)
        finished.put_nowait(waiting.result())
    batch = []
    while not finished.empty():
        batch.append(finished.get_nowait())
    return batch


class RayWorker(ShardWorker):
    """A :class:`ShardWorker` as a Ray actor. It is built without arguments (its slot comes
    with :meth:`setup`), so that its process has received nothing when it builds its Ray
    serialization context, without pyarrow (:func:`_serialization_without_arrow`)."""

    def __init__(self) -> None:
        _serialization_without_arrow(_ray())
        super().__init__(0, 1, None)

    def setup(self, slot: int, slots: int, cache: Any | None) -> None:
        """Take slot ``slot`` of ``slots``, and the cache server (None: no cache)."""
        super().__init__(slot, slots, cache)


def _serialization_without_arrow(ray: Any) -> None:
    """Build this process's Ray serialization context, without importing pyarrow.

    Ray builds it for the first object a process sends or receives, and imports pyarrow (and
    numpy with it) when installed, only to register serializers for Ray Data's Arrow objects,
    which never cross here: 0.2 s of each command's start-up, and of each worker's. With the
    import refused for that moment, Ray skips them; ``import pyarrow`` works again after."""
    if "pyarrow" in sys.modules:
        return  # imported already: nothing to save
    try:
        build = ray._private.worker.global_worker.get_serialization_context
    except AttributeError:  # another Ray's internals: it builds its own, as it would anyway
        return
    # None in sys.modules: "import pyarrow" raises ModuleNotFoundError
    sys.modules["pyarrow"] = None  # type: ignore[assignment]
    try:
        build()
    finally:
        del sys.modules["pyarrow"]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "--backend ray needs Ray: pip install 'maslab[ray]' (on every machine of the cluster)"
        ) from None
    return ray


class RayCluster:
    """The workers of one ``--backend ray`` session: :meth:`start` them for a run's settings,
    :meth:`run` runs (several at once share the workers), :meth:`close` at the end.

    Args:
        address: A Ray cluster to join (``auto``, ``ray://head:10001``, ...); None joins the one
            ``RAY_ADDRESS`` names, else starts a local Ray (never joining one already running
            here: that takes ``auto``).
        workers: Worker slots (one CPU each); None is one per CPU of the cluster.
        shards: Shards each run's samples are dealt into; None: see
            :func:`~maslab.harness.distributed.plan_shards`.
    """

    def __init__(
        self, address: str | None = None, *, workers: int | None = None, shards: int | None = None
    ) -> None:
        self.address = address
        self.workers = workers
        self.shards = shards
        self.slots = 0
        self._connected = False  # ray.init was called here: close disconnects (or stops) it
        self._watchdog: subprocess.Popen[bytes] | None = None  # of a local Ray started here
        self._cache: Any | None = None
        # each slot's worker (an actor handle) and its setup's reference (the worker is up)
        self._workers: list[tuple[Any, Any]] = []
        self._idle: asyncio.Queue[int] = asyncio.Queue()  # a slot per free lane
        self._worker_class: Any = None

    def start(self, config: RunConfig) -> None:
        """Connect to (or start) Ray and start the workers, sharing the limits of ``config``
        (every run of the session has its endpoints, cache, concurrency and native setting).
        Nothing waits for a worker: each takes its first shard once it is up."""
        ray = _ray()
        address = self.address or os.environ.get("RAY_ADDRESS", "")
        if address.startswith("ray://") and config.cache:
            raise ConfigError(
                f"through Ray Client ({address}) the workers cannot reach this machine's response "
                "cache: run the command on a node of the cluster (--address auto), or --no-cache"
            )
        if not ray.is_initialized():
            self._connect(ray)
        _serialization_without_arrow(ray)
        table = endpoints_table(config.endpoints)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.slots = usable_slots(min(self.workers or cpus, cpus), config.concurrency, table)
        self._worker_class = ray.remote(num_cpus=1, max_concurrency=1_000)(RayWorker)
        if config.cache:
            here = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=False
            )
            server = ray.remote(num_cpus=0)(CacheServer)
            self._cache = server.options(scheduling_strategy=here).remote(config.cache)
        self._workers = [self._new_worker(slot) for slot in range(self.slots)]
        for _ in range(LANES):
            for slot in range(self.slots):
                self._idle.put_nowait(slot)

    @contextmanager
    def running(self, config: RunConfig) -> Iterator[RayCluster]:
        """:meth:`start` for ``config``'s settings; :meth:`close` on the way out."""
        try:
            self.start(config)
            yield self
        finally:
            self.close()

    def _connect(self, ray: Any) -> None:
        options: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        try:
            if self.address or os.environ.get("RAY_ADDRESS"):
                ray.init(address=self.address, **options)
            else:  # "local": Ray would join the cluster last started here, which is not ours
                ray.init(address="local", num_cpus=self.workers, include_dashboard=False, **options)
                self._watchdog = watch(ray._private.worker._global_node.get_session_dir_path())
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = self.address or os.environ.get("RAY_ADDRESS") or "a local Ray"
            raise ConfigError(f"cannot start or join Ray at {where}: {exc}") from None
        self._connected = True

    def _new_worker(self, slot: int) -> tuple[Any, Any]:
        """Start the worker of ``slot``: its handle, and the reference its setup answers."""
        worker = self._worker_class.remote()
        return worker, worker.setup.remote(slot, self.slots, self._cache)

    async def run(self, runner: Runner, todo: list[tuple[Task, int]]) -> None:
        """Run ``todo`` (samples of ``runner``'s run, whose directory is open) on the workers;
        each finished sample goes to :meth:`Runner.record`. A failure stops this run's shards
        (the others run on)."""
        config = runner.config
        spec = RunSpec(
            config,
            type(runner.method),
            type(runner.evaluator),
            endpoints_table(config.endpoints),
            runner.method.dump_learned_state() if config.optimize_on else None,
            type(runner.benchmark),
        )
        shards = plan_shards(todo, self.shards, self.slots)
        await all_or_first_failure(self._shard(runner, Shard(spec, s)) for s in shards)

    async def _shard(self, runner: Runner, shard: Shard) -> None:
        """Run one shard on an idle worker, once that worker is up; when the worker dies, what
        it had not streamed back goes to a new one."""
        ray = _ray()
        left = {(task.id, repeat): (task, repeat) for task, repeat in shard.samples}
        for _ in range(ATTEMPTS):
            slot = await self._idle.get()
            worker, ready = self._workers[slot]
            stream = None
            try:
                await ready
                stream = worker.run.remote(Shard(shard.run, list(left.values())))
                async for ref in stream:
                    for finished in await ref:
                        if left.pop(finished.record.key, None) is not None:
                            runner.record(finished)
                return
            except ray.exceptions.RayActorError as exc:
                log.warning("a worker died (%s); its shard's %d samples left go on", exc, len(left))
                if self._workers[slot][0] is worker:  # not yet replaced (from its other lane)
                    ray.kill(worker, no_restart=True)
                    self._workers[slot] = self._new_worker(slot)
            except ray.exceptions.RayTaskError as exc:  # raised in the worker: raise it here
                cause = exc.cause
                raise (cause if isinstance(cause, Exception) else exc) from None
            except BaseException:
                if stream is not None:
                    ray.cancel(stream)
                raise
            finally:
                self._idle.put_nowait(slot)
        raise WorkersLost(
            f"a shard lost its worker {ATTEMPTS} times; {len(left)} of its samples are not run "
            "(what finished is saved): re-run to resume"
        )

    def close(self) -> None:
        """Stop the workers (without waiting for each), store what the cache server holds, and
        disconnect: that stops Ray only if this started it (a joined cluster runs on)."""
        if not (self._workers or self._cache or self._connected or self._watchdog):
            return  # nothing started
        ray = _ray()
        for worker, _ in self._workers:
            ray.kill(worker, no_restart=True)
        if self._cache is not None:
            ray.get(self._cache.close.remote())
            ray.kill(self._cache, no_restart=True)
        if self._connected:
            ray.shutdown()
        if self._watchdog is not None:  # it kills what the shutdown left, then ends
            self._watchdog.communicate()
        self._workers, self._cache, self._connected, self._watchdog = [], None, False, None
