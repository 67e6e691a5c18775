"""``maslab run``: validate everything, run with a progress bar, print the summary, write the
report."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from rich.markup import escape

from maslab import defaults
from maslab.cli.console import COUNT, RunStopped, console, import_option, number
from maslab.defaults import DEMO_MAX_TOKENS, DEMO_MODEL
from maslab.errors import ConfigError, MaslabError
from maslab.paths import default_response_cache

if TYPE_CHECKING:
    from maslab.results import RunStore


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60]


def default_out(config: dict[str, Any]) -> Path:
    """A stable directory per run identity, so re-running a command resumes it."""
    keys = ("method", "method_config", "benchmark", "benchmark_options", "split", "model",
            "sampling", "seed", "evaluator", "data", "shuffle", "max_calls", "max_tokens",
            "max_seconds")  # fmt: skip
    identity = {k: config.get(k) for k in keys}
    if config.get("model_roles"):  # only when set: runs without keep their directories
        identity["model_roles"] = config["model_roles"]
    digest = hashlib.sha256(
        orjson.dumps(identity, option=orjson.OPT_SORT_KEYS, default=str)
    ).hexdigest()[:8]
    name = f"{_slug(config['method'])}__{_slug(config['model'])}__{digest}"
    return Path("runs") / _slug(config["benchmark"]) / name


def run_config(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from maslab.benchmark import get_benchmark
    from maslab.config_files import apply_overrides, validation_message
    from maslab.llm.registry import check_model
    from maslab.method import get_method
    from maslab.roles import parse_model_roles, role_models
    from maslab.runner import RunConfig
    from maslab.sweep import judge_options, unused_judge

    if not args.model:
        args.model = DEMO_MODEL
        console.print(
            f"[yellow]no --model: using {DEMO_MODEL}, a tiny offline demo model (expect near-zero "
            "accuracy); use a real one with --model openai:<name> (OPENAI_API_KEY), "
            "--model 'openai:<name>@http://host:port/v1', or --endpoints FILE[/]"
        )
    if args.max_tokens is None:  # the demo model is slow and rambles: keep its answers short
        args.max_tokens = DEMO_MAX_TOKENS if args.model == DEMO_MODEL else defaults.MAX_TOKENS
    method_cls = get_method(args.method)
    method_config = apply_overrides(
        method_cls.Config().model_dump(mode="json"), args.config, f"{args.method} --config"
    )
    method = method_cls(method_config)  # validate now: one-line error before any work
    model_roles = method.check_model_roles(parse_model_roles(args.model_role))
    evaluator = args.evaluator or get_benchmark(args.benchmark).evaluator
    evaluator_options = judge_options(evaluator, args.judge_model)
    if args.judge_model and not evaluator_options:
        raise unused_judge("--judge-model", [evaluator])
    for spec in filter(None, (args.model, args.judge_model, *role_models(model_roles))):
        check_model(spec, args.endpoints)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a file; name a run directory")
    sampling: dict[str, Any] = {"temperature": args.temperature, "max_tokens": args.max_tokens}
    fields: dict[str, Any] = {
        "method": args.method,
        "method_config": method_config,
        "benchmark": args.benchmark,
        "benchmark_options": apply_overrides({}, args.bench_option, "--bench-option"),
        "split": args.split,
        "limit": args.limit,
        "shuffle": args.shuffle,
        "data": str(args.data) if args.data else None,
        "model": args.model,
        "model_roles": model_roles,
        "endpoints": str(args.endpoints) if args.endpoints else None,
        "sampling": sampling,
        "repeats": args.repeats,
        "seed": args.seed,
        "concurrency": args.concurrency,
        "evaluator": args.evaluator,
        "evaluator_options": evaluator_options,
        "max_calls": args.max_calls,
        "max_tokens": args.max_sample_tokens,
        "max_seconds": args.max_sample_seconds,
        "cache": None if args.no_cache else str(args.cache or default_response_cache()),
        "strict_sandbox": args.strict_sandbox,
    }
    fields["out"] = str(args.out or default_out(fields))
    try:
        return RunConfig.model_validate(fields)
    except ValidationError as exc:
        raise MaslabError(validation_message(exc, "run")) from None


def execute(runner: Any, *, quiet: bool = False) -> list[Any]:
    """Run one validated :class:`Runner` with a progress bar; print its summary; return its
    records."""
    from maslab.progress import RunProgress

    config = runner.config
    runner.open()
    total = len(runner.tasks) * config.repeats
    label = f"{config.method} · {config.benchmark} · {config.model}"
    try:
        if quiet:
            records = asyncio.run(runner.run())
        else:
            with RunProgress(label, total, done=runner.store.results()) as progress:
                runner.listener = progress.update
                records = asyncio.run(runner.run())
    except (KeyboardInterrupt, OSError) as exc:  # main() reports the cause and what was saved
        saved = len(runner.store.results())
        raise RunStopped(
            exc,
            f"{saved} sample{'s' * (saved != 1)} saved in {runner.store.dir}; "
            "run the same command again to resume",
        ) from exc
    _print_summary(label, records, runner.store)
    return records


def _write_report(out: str | Path) -> None:
    from maslab.report import build_report

    path = build_report([out], Path(out) / "report.html")
    console.print(f"  report:  {path}")


def _print_summary(label: str, records: Sequence[Any], store: RunStore) -> None:
    from maslab.stats import summarize

    s = summarize(records, superseded=store.superseded())
    lo, hi = s.ci
    console.print(
        f"[bold]{label}[/]: accuracy {s.accuracy:.1%} [{lo:.1%}, {hi:.1%}] over {s.design} "
        f"({s.correct} of {s.n} samples correct, {s.unparsed} unparsed, "
        f"{s.errors} errors, {s.budget_stopped} stopped by budget)"
    )
    if by_model := s.describe_models():
        console.print(f"  per sample by model: {escape(by_model)}")
    if repeats := s.describe_repeats():
        console.print(f"  repeats: {repeats}")
    if errors := s.describe_errors():
        console.print(f"  errors: {escape(errors)}")
    console.print(
        f"  per sample: {s.mean_tokens:,.0f} tokens used ({s.mean_spent_tokens:,.0f} newly spent, "
        f"{s.mean_cached_tokens:,.0f} replayed from cache), {s.mean_calls:.1f} calls, "
        f"{s.mean_latency_s:.2f} s of model time"
        + (f"; scoring {s.mean_scoring_tokens:,.0f} tokens" if s.mean_scoring_tokens else "")
    )
    estimated = f" ({s.estimated_calls} calls estimated)" if s.estimated_calls else ""
    console.print(
        f"  served: {s.total_served_tokens:,} tokens in all{estimated}, scoring and superseded "
        "attempts included"
    )
    console.print(f"  results: {store.dir}")


def cmd_run(args: argparse.Namespace) -> int:
    from maslab.runner import Runner

    config = run_config(args)
    records = execute(Runner(config), quiet=args.quiet)
    _write_report(config.out)
    return 1 if any(r.status == "error" for r in records) else 0


def run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", required=True)
    p.add_argument("--benchmark", required=True)
    p.add_argument("--model", help=f"model spec, e.g. openai:gpt-4o-mini (default {DEMO_MODEL})")
    p.add_argument("--endpoints", type=Path, help="endpoints YAML file")
    p.add_argument("--split", default=defaults.SPLIT)
    p.add_argument("--data", type=Path, help="local data file (JSON, JSONL, Parquet)")
    p.add_argument("--limit", type=COUNT)
    p.add_argument(
        "--shuffle", action="store_true", help="shuffle tasks with --seed before --limit"
    )
    p.add_argument(
        "--repeats",
        "--epochs",
        type=COUNT,
        default=defaults.REPEATS,
        help="independent attempts per task",
    )
    p.add_argument("--seed", type=int, default=defaults.SEED)
    p.add_argument(
        "--concurrency", type=COUNT, default=defaults.CONCURRENCY, help="model calls in flight"
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="method config override, e.g. agents=5",
    )
    p.add_argument(
        "--model-role",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="put a role or an agent of the method on another model, e.g. judge=openai:gpt-4o "
        "(NAME.temperature=T sets its temperature); `maslab list methods` shows the roles",
    )
    p.add_argument("--bench-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--temperature", type=number(float, 0, 2), default=defaults.TEMPERATURE, help="0 to 2"
    )
    p.add_argument(
        "--max-tokens",
        type=COUNT,
        help=f"per model call (default {defaults.MAX_TOKENS}; {DEMO_MAX_TOKENS} for the demo)",
    )
    p.add_argument("--evaluator")
    p.add_argument("--judge-model", help="model spec for the llm_judge evaluator")
    p.add_argument("--max-calls", type=COUNT, help="per-sample budget")
    p.add_argument("--max-sample-tokens", type=COUNT, help="per-sample budget")
    p.add_argument(
        "--max-sample-seconds", type=number(float, 0, above=True), help="per-sample budget"
    )
    p.add_argument(
        "--strict-sandbox",
        action="store_true",
        help="refuse to start unless model-written code runs fully isolated (own filesystem, "
        "/proc and network, unprivileged, process cap)",
    )
    p.add_argument("--cache", type=Path, help="response cache file")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--out", type=Path, help="run directory (default: runs/<benchmark>/...)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a method on a benchmark (resumable)")
    run_options(p)
    import_option(p)
    p.set_defaults(func=cmd_run)
