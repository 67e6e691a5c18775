"""Runs from Python: the one path that ``maslab run``, ``maslab sweep`` and :func:`evaluate`
share.

:func:`run_config` turns keyword options into a validated :class:`RunConfig` (the CLI's run
options, with Python names) and :func:`execute` opens or resumes its directory, runs what is
left and reads the result back. So ``maslab.evaluate("llm_debate", "arith", limit=5)`` checks
the same things, uses the same defaults and writes to (or resumes) the same directory as
``maslab run --method llm_debate --benchmark arith --limit 5``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import sys
from collections.abc import Callable, Coroutine, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar, Unpack

from pydantic import ValidationError

from maslab.analysis.run_result import RunResult, run_label
from maslab.config_files import validation_message
from maslab.core.method import Method
from maslab.defaults import DEMO_MODEL
from maslab.errors import ConfigError, MaslabError
from maslab.harness.configure import configure
from maslab.harness.heap import steady_heap
from maslab.harness.options import RunKeywords, RunOptions
from maslab.harness.runner import RunConfig, Runner

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress

    from maslab.harness.ray_backend import RayCluster
    from maslab.report.figures import TraceFigures
    from maslab.store.records import ResultRecord, Trace
    from maslab.store.run_store import RunStore

Backend = Literal["local", "ray"]  # where samples are solved: this process, or Ray workers
BACKENDS: tuple[Backend, ...] = ("local", "ray")

log = logging.getLogger(__name__)


def run_config(
    method: str | Method | type[Method],
    benchmark: str,
    model: str | None = None,
    *,
    flags: Mapping[str, str] | None = None,
    **options: Unpack[RunKeywords],
) -> RunConfig:
    """Check every option (:class:`~maslab.harness.options.RunOptions`) and build the run's
    config, before anything is written.

    ``model`` defaults to the embedded demo model, whose ``max_tokens`` defaults to
    :data:`~maslab.defaults.DEMO_MAX_TOKENS` (:data:`~maslab.defaults.MAX_TOKENS` for other
    models). ``config`` and ``bench_options`` override the method's settings and the
    benchmark's options: ``KEY=VALUE`` strings (values read as YAML) or a mapping (keys may
    be dotted paths into nested settings, or values nested mappings). ``model_roles`` puts roles
    or agents of the method on other models (:mod:`maslab.core.roles`): a mapping, or the CLI's
    ``NAME=MODEL`` strings. ``evaluator_options`` are the evaluator's options
    (``KEY=VALUE`` strings or a mapping; ``judge_model`` is the ``judge`` one), checked
    against its ``Config``. ``native=False`` keeps every call on the text protocol (no
    structured output or tool calls, whatever the model offers). ``optimize_on`` names a split
    the method learns from (its ``optimize``, on the first ``optimize_limit`` tasks) before
    the test samples; it may share no task with ``split``. ``shard`` (``"i/N"`` or (i, N))
    runs only shard i of N of the tasks, by default into the whole run's directory suffixed
    ``-shard-i-of-N`` (:mod:`maslab.harness.shard`). ``cache`` is True for the
    user's response cache, False for none, or a file. ``out`` defaults to a directory under
    ``runs/<benchmark>/`` named by the run's identity
    (:meth:`~maslab.store.run_store.Manifest.directory`), so the same run resumes there.
    ``flags`` spells options in error messages (the CLI's ``--out`` for ``out``). A one-line
    :class:`MaslabError` on any mistake, a :class:`TypeError` for a keyword that is no option.
    """
    if unknown := sorted(options.keys() - RunOptions.model_fields.keys()):
        raise TypeError(f"run_config() got an unexpected keyword argument {unknown[0]!r}")
    try:
        validated = RunOptions.model_validate(options)
    except ValidationError as exc:
        raise MaslabError(validation_message(exc, "run")) from None
    return configure(method, benchmark, model, validated, flags=flags)


class _StreamedFigures:
    """The report's figures of a run, added up from each sample's trace as it is written
    (:class:`~maslab.report.figures.TraceFigures`, made at the first sample, so the report's
    modules load while the run's first calls are out, not before them)."""

    def __init__(self) -> None:
        self.figures: TraceFigures | None = None

    def add(self, record: ResultRecord, trace: Trace) -> None:
        if self.figures is None:
            from maslab.report.figures import TraceFigures

            self.figures = TraceFigures()
        self.figures.add(record, trace)


def _streamed_figures(runner: Runner) -> _StreamedFigures | None:
    """When every sample of the opened run is still to do, figures that add up each sample's
    trace as it is written (its report then reads none back), else None (the report reads the
    earlier samples' traces)."""
    if len(runner.todo or []) < len(runner.tasks) * runner.config.repeats:
        return None
    streamed = _StreamedFigures()
    runner.trace_listener = streamed.add
    return streamed


def _current(report: Path, store: RunStore) -> bool:
    """Whether ``report`` exists and no record of the run was written after it (a resume
    with nothing left to do keeps it, rather than read every trace again)."""
    try:
        return not store.written_since(report.stat().st_mtime)
    except FileNotFoundError:
        return False


async def execute(
    runner: Runner,
    *,
    progress: bool | Progress = False,
    report: bool = True,
    label: str | None = None,
    tracking_parent: str | None = None,
) -> RunResult:
    """Open (or resume) the runner's directory and run the samples still to do, with a live
    progress bar on stderr when ``progress`` is True, or a line in ``progress`` when it is a
    display of several runs (:func:`maslab.harness.progress.run_lines`), named ``label`` (by
    default method · benchmark · model); then write the run's ``report.html`` when ``report``
    (unless it ran nothing and the page is newer than every record), log the run to its tracker
    if it has one (under the tracker's run ``tracking_parent``, a sweep's), and return the run
    as read back."""
    runner.open()
    figures = _streamed_figures(runner) if report else None
    try:
        if progress:
            from maslab.harness.progress import RunProgress

            total = len(runner.tasks) * runner.config.repeats
            label = label or run_label(runner.manifest)
            lines = None if progress is True else progress
            done = [r for r in runner.store.results() if r.status != "error"]  # errored: retried
            with RunProgress(label, total, done=done, lines=lines) as bar:
                runner.listener = bar.update
                await runner.run_pending()
        else:
            await runner.run_pending()
    finally:
        runner.store.close()  # run() closes it too; here whatever failed before it ran
    result = RunResult.read(runner.store)
    path = runner.store.dir / "report.html"
    if report and (runner.todo or not _current(path, runner.store)):
        from maslab.report import build_report, write_run_report

        if figures is None or figures.figures is None:  # resumed, or no sample run here
            build_report([runner.store.dir], path)
        else:
            write_run_report(result, figures.figures, path)
    if runner.config.log_to == "mlflow":
        from maslab.harness.tracking import log_run

        # off the loop: a sweep's other cells run on while MLflow writes
        await asyncio.to_thread(log_run, result, parent=tracking_parent)
    return result


async def aevaluate(
    method: str | Method | type[Method],
    benchmark: str,
    model: str | None = None,
    *,
    backend: Backend = "local",
    address: str | None = None,
    workers: int | None = None,
    shards: int | None = None,
    progress: bool | None = None,
    **options: Unpack[RunKeywords],
) -> RunResult:
    """Run ``method`` on ``benchmark`` as ``maslab run`` does, in a running event loop
    (``await maslab.aevaluate(...)`` in a notebook); :func:`evaluate` is the blocking form.

    ``method`` is a registered name, or a registered Method class or instance (whose settings
    ``config`` then overrides). The options are ``maslab run``'s
    (:class:`~maslab.harness.options.RunOptions`, checked by :func:`run_config`);
    the budgets are ``max_calls``, ``max_sample_tokens`` and ``max_sample_seconds``;
    ``optimize_on`` (and ``optimize_limit``) run the method's optimisation step first;
    ``shard="i/N"`` runs shard i of N (merge the shards with :func:`maslab.harness.shard.merge`).
    ``backend="ray"`` solves the samples on Ray workers (:mod:`maslab.harness.ray_backend`): a
    local Ray, or the cluster at ``address`` (or ``$RAY_ADDRESS``), with ``workers`` worker
    slots (one per CPU by default) and the samples dealt into ``shards`` shards. The run
    resumes when its directory holds finished samples, and ends with ``report.html`` written
    beside them. ``progress``: a live bar on stderr; by default only when stderr is a terminal
    (not in a notebook). Returns the run as a :class:`RunResult`.
    """
    if not model:
        log.warning(
            "no model given: using %s, a tiny offline demo model (expect near-zero accuracy); "
            "pass e.g. model='openai:gpt-4o-mini' for a real one",
            DEMO_MODEL,
        )
    cluster = ray_cluster(backend, address=address, workers=workers, shards=shards)
    runner = Runner(
        run_config(method, benchmark, model, **options),
        cluster=cluster,
    )
    if progress is None:
        progress = getattr(sys.stderr, "isatty", lambda: False)()
    if cluster is None:
        return await execute(runner, progress=progress)
    with cluster.running(runner.config):
        return await execute(runner, progress=progress)


def ray_cluster(
    backend: str,
    *,
    address: str | None = None,
    workers: int | None = None,
    shards: int | None = None,
    flags: Mapping[str, str] | None = None,
) -> RayCluster | None:
    """The cluster ``backend`` runs samples on (None for ``local``); a one-line
    :class:`ConfigError` for an unknown backend, or Ray's options without ``ray``."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}: one of {', '.join(BACKENDS)}")
    if backend == "local":
        given = {"address": address, "workers": workers, "shards": shards}
        if unused := [(flags or {}).get(k, k) for k, v in given.items() if v is not None]:
            raise ConfigError(f"{', '.join(unused)} only go with the ray backend")
        return None
    for name, value in (("workers", workers), ("shards", shards)):
        if value is not None and value < 1:
            raise ConfigError(f"{(flags or {}).get(name, name)} must be at least 1, got {value}")
    from maslab.harness.ray_backend import RayCluster

    return RayCluster(address, workers=workers, shards=shards)


P = ParamSpec("P")
T = TypeVar("T")


def _run_blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to the end and return its result, from plain code or from code an
    event loop is running (a notebook cell): there on a worker thread with its own loop, which
    an interrupt (the notebook's stop button) cancels before it is raised here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        with steady_heap():
            return asyncio.run(coroutine)
    running: concurrent.futures.Future[Callable[[], object]] = concurrent.futures.Future()

    async def main() -> T:
        cancel = asyncio.current_task().cancel  # type: ignore[union-attr]
        loop = asyncio.get_running_loop()
        running.set_result(lambda: loop.call_soon_threadsafe(cancel))
        return await coroutine

    # the caller's thread waits on the run: no object of its is made meanwhile
    with (
        concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="maslab") as worker,
        steady_heap(),
    ):
        outcome = worker.submit(asyncio.run, main())
        try:
            return outcome.result()
        except KeyboardInterrupt:
            with suppress(RuntimeError):  # the loop has closed already: nothing to cancel
                running.result()()
            raise  # once the worker has wound the run down (leaving the with block waits)


def _blocking(function: Callable[P, Coroutine[Any, Any, T]], name: str, doc: str) -> Callable[P, T]:
    """The blocking form of ``function``, with its parameters (see :func:`_run_blocking`)."""

    @functools.wraps(function)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> T:
        return _run_blocking(function(*args, **kwargs))

    blocking.__name__ = blocking.__qualname__ = name
    blocking.__doc__ = doc
    return blocking


evaluate = _blocking(
    aevaluate,
    "evaluate",
    """Run ``method`` on ``benchmark`` as ``maslab run`` does and return the
    :class:`RunResult`; the options are :func:`aevaluate`'s. It blocks until the run ends, in a
    script or in a notebook (where it runs on a worker thread; ``await maslab.aevaluate(...)``
    is the native form there).""",
)
