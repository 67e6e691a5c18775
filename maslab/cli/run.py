"""``maslab run``: validate everything, run with a progress bar, print the summary, write the
report; and ``maslab merge``, which combines the shards of a run (``--shard``)."""

from __future__ import annotations

import argparse
import asyncio
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from maslab.cli.commands import about
from maslab.cli.console import COUNT, RunStopped, console, import_option
from maslab.cli.run_flags import FLAGS as RUN_FLAGS
from maslab.cli.run_flags import add_run_flags, run_keywords
from maslab.defaults import DEMO_MODEL
from maslab.harness.heap import steady_heap

if TYPE_CHECKING:
    from maslab.analysis.run_result import RunResult
    from maslab.harness.ray_backend import RayCluster
    from maslab.harness.runner import RunConfig, Runner


# the options as error messages spell them: the run's, and Ray's
FLAGS = {**RUN_FLAGS, "address": "--address", "workers": "--workers", "shards": "--shards"}


def run_config(args: argparse.Namespace) -> RunConfig:
    """The validated config of ``maslab run``'s options (see :func:`maslab.api.run_config`)."""
    from maslab.api import run_config

    if not args.model:
        console.print(
            f"[yellow]no --model: using {DEMO_MODEL}, a tiny offline demo model (expect near-zero "
            "accuracy); use a real one with --model openai:<name> (OPENAI_API_KEY), "
            "--model 'openai:<name>@http://host:port/v1', or --endpoints FILE[/]"
        )
    return run_config(args.method, args.benchmark, args.model, flags=FLAGS, **run_keywords(args))


def execute(runner: Runner, *, quiet: bool = False, report: bool = False) -> RunResult:
    """Run one validated :class:`Runner` (see :func:`maslab.api.execute`) with a progress
    bar unless ``quiet``, on a :func:`steady_heap` (and on its cluster's workers, if it has
    one); print its summary; return the run."""
    from maslab import api as harness

    cluster = runner.cluster.running(runner.config) if runner.cluster else nullcontext()
    try:
        with steady_heap(), cluster:
            result = asyncio.run(harness.execute(runner, progress=not quiet, report=report))
    except (KeyboardInterrupt, OSError) as exc:  # main() reports the cause and what was saved
        saved = len(runner.store.results())
        raise RunStopped(
            exc,
            f"{saved} sample{'s' * (saved != 1)} saved in {runner.store.dir}; "
            "run the same command again to resume",
        ) from exc
    print_summary(result)
    if report:
        console.print(f"  report:  {result.report}")
    return result


def headline(result: RunResult, label: str | None = None) -> str:
    """The summary's first line: the run (``label``, by default method · benchmark · model)
    and its accuracy and sample counts."""
    from maslab.analysis.run_result import run_label

    s = result.summary
    return (
        f"[bold]{escape(label or run_label(result.manifest))}[/]: accuracy "
        f"{s.describe_accuracy()} over {s.design} ({s.correct} of {s.n} samples correct, "
        f"{s.unparsed} unparsed, {s.errors} errors, {s.budget_stopped} stopped by budget)"
    )


def print_summary(result: RunResult, label: str | None = None) -> None:
    """The run's summary: :func:`headline`, the strict accuracy and replies cut at
    ``max_tokens`` (if any), then spend, errors and binding caps."""
    s = result.summary
    console.print(headline(result, label))
    if strict := s.describe_strict():
        console.print(f"  {strict}")
    if truncation := s.describe_truncation():
        console.print(f"  [yellow]{truncation}[/]")
    if by_model := s.describe_models():
        console.print(f"  per sample by model: {escape(by_model)}")
    if repeats := s.describe_repeats():
        console.print(f"  repeats: {repeats}")
    if errors := s.describe_errors():
        console.print(f"  errors: {escape(errors)}")
    if optimization := s.describe_optimization():
        console.print(f"  {escape(optimization)}")
    for warning in result.manifest.describe_sandbox():
        console.print(f"  [red]{escape(warning)}[/]")
    for cap in result.manifest.describe_caps():
        console.print(f"  [yellow]{escape(cap)}[/]")
    console.print(
        f"  per sample: {s.mean_tokens:,.0f} tokens used ({s.mean_spent_tokens:,.0f} newly spent, "
        f"{s.mean_cached_tokens:,.0f} replayed from cache), {s.mean_calls:.1f} calls, "
        f"{s.describe_model_time()}"
        + (f"; scoring {s.mean_scoring_tokens:,.0f} tokens" if s.mean_scoring_tokens else "")
    )
    estimated = f" ({s.estimated_calls} calls estimated)" if s.estimated_calls else ""
    console.print(
        f"  served: {s.total_served_tokens:,} tokens in all{estimated}, scoring, superseded "
        "attempts and optimisation included"
    )
    console.print(f"  results: {result.dir}")


def cmd_run(args: argparse.Namespace) -> int:
    from maslab.harness.runner import Runner

    observe(args)
    result = execute(Runner(run_config(args), cluster=cluster(args)), quiet=args.quiet, report=True)
    return 1 if result.summary.errors else 0


def observe(args: argparse.Namespace) -> None:
    """Export spans if ``--otel`` asks (see :mod:`maslab.telemetry`)."""
    if args.otel:
        from maslab import telemetry

        telemetry.enable()


def run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", required=True,
                   help="the method to run (maslab list methods names them)")  # fmt: skip
    p.add_argument("--benchmark", required=True,
                   help="the benchmark to score it on (maslab list benchmarks)")  # fmt: skip
    p.add_argument("--model", help=f"model spec, e.g. openai:gpt-4o-mini (default {DEMO_MODEL})")
    add_run_flags(p)
    backend_options(p, what="the run's samples")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def backend_options(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--backend`` and Ray's options, for ``run`` and ``sweep``."""
    from maslab.api import BACKENDS

    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help=f"where {what} are solved: in this process (local), or on Ray workers (ray, "
        "pip install 'maslab[ray]'); this process writes the results either way",
    )
    p.add_argument(
        "--address",
        metavar="ADDR",
        help="the Ray cluster to join (auto, ray://HEAD:10001); default $RAY_ADDRESS, else a "
        "local Ray",
    )
    p.add_argument("--workers", type=COUNT, help="Ray workers, one CPU each (default: one per CPU)")
    p.add_argument(
        "--otel",
        action="store_true",
        help="export OpenTelemetry spans of the runs, samples and model and tool calls over "
        "OTLP/HTTP to the collector the OTEL_EXPORTER_OTLP_* variables name (local backend; "
        "pip install 'maslab[otel]')",
    )
    p.add_argument(
        "--shards",
        type=COUNT,
        help="deal each run's samples into N shards for the workers (default: one per worker, "
        "or more so that none holds over 128 samples)",
    )


def cluster(args: argparse.Namespace) -> RayCluster | None:
    """The Ray cluster ``--backend`` asks for, or None (see :func:`maslab.api.ray_cluster`)."""
    from maslab.api import ray_cluster

    return ray_cluster(
        args.backend, address=args.address, workers=args.workers, shards=args.shards, flags=FLAGS
    )


def cmd_merge(args: argparse.Namespace) -> int:
    from maslab.harness.shard import merge
    from maslab.report import build_report
    from maslab.store.run_store import RunStore

    out = merge(args.shards, args.out, partial=args.partial)
    console.print(f"merged {len(args.shards)} shards into {out}")
    if missing := RunStore(out).manifest().missing_shards:
        console.print(
            f"[yellow]partial: shard{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} "
            "missing; the merged run holds the other shards' tasks only[/]"
        )
    console.print(f"report: {build_report([out], Path(out) / 'report.html')}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help=about("run"))
    run_options(p)
    import_option(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("merge", help=about("merge"))
    p.add_argument("shards", nargs="+", type=Path, metavar="SHARD_DIR")
    p.add_argument("--out", type=Path, required=True, help="the merged run directory")
    p.add_argument(
        "--partial", action="store_true", help="merge the shards given even if some are missing"
    )
    p.set_defaults(func=cmd_merge)
