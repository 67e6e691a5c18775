"""The ``maslab`` command: run, sweep, report, show, compare, agreement, list, data, cache.

User mistakes end with one line on stderr and exit status 2; an interrupted run exits 130 and
resumes when the same command is run again.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from maslab.errors import MaslabError
from maslab.llm.local import DEMO_MODEL
from maslab.paths import default_response_cache
from maslab.secrets import redact

if TYPE_CHECKING:
    from maslab.results import RunStore


class RedactingConsole(Console):
    """Redacts every string before it is rendered (wrapping or highlighting could split a key)."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(redact(text), **options)


console = RedactingConsole(soft_wrap=True)
DEMO_MAX_TOKENS = 256


# -- run ---------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60]


def default_out(config: dict[str, Any]) -> Path:
    """A stable directory per run identity, so re-running a command resumes it."""
    keys = ("method", "method_config", "benchmark", "benchmark_options", "split", "model",
            "sampling", "seed", "evaluator", "data", "shuffle", "max_calls", "max_tokens",
            "max_seconds")  # fmt: skip
    digest = hashlib.sha256(
        orjson.dumps({k: config.get(k) for k in keys}, option=orjson.OPT_SORT_KEYS, default=str)
    ).hexdigest()[:8]
    name = f"{_slug(config['method'])}__{_slug(config['model'])}__{digest}"
    return Path("runs") / _slug(config["benchmark"]) / name


def _run_config(args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    from maslab.config_files import apply_overrides, validation_message
    from maslab.method import get_method
    from maslab.runner import RunConfig

    if not args.model:
        args.model = DEMO_MODEL
        console.print(
            f"[yellow]no --model: using {DEMO_MODEL}, a tiny offline demo model (expect near-zero "
            "accuracy); use a real one with --model openai:<name> (OPENAI_API_KEY), "
            "--model 'openai:<name>@http://host:port/v1', or --endpoints FILE[/]"
        )
    if args.max_tokens is None:  # the demo model is slow and rambles: keep its answers short
        args.max_tokens = DEMO_MAX_TOKENS if args.model == DEMO_MODEL else 2048
    method_cls = get_method(args.method)
    method_config = apply_overrides(
        method_cls.Config().model_dump(mode="json"), args.config, f"{args.method} --config"
    )
    method_cls(method_config)  # validate now: one-line error before any work
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
        "endpoints": str(args.endpoints) if args.endpoints else None,
        "sampling": sampling,
        "repeats": args.repeats,
        "seed": args.seed,
        "concurrency": args.concurrency,
        "evaluator": args.evaluator,
        "evaluator_options": {"judge": args.judge_model} if args.judge_model else {},
        "max_calls": args.max_calls,
        "max_tokens": args.max_sample_tokens,
        "max_seconds": args.max_sample_seconds,
        "cache": None if args.no_cache else str(args.cache or default_response_cache()),
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
    if quiet:
        records = asyncio.run(runner.run())
    else:
        with RunProgress(label, total, done=runner.store.results()) as progress:
            runner.listener = progress.update
            records = asyncio.run(runner.run())
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

    config = _run_config(args)
    records = execute(Runner(config), quiet=args.quiet)
    _write_report(config.out)
    return 1 if any(r.status == "error" for r in records) else 0


# -- sweep -------------------------------------------------------------------------------------


def cmd_sweep(args: argparse.Namespace) -> int:
    from maslab.runner import Runner
    from maslab.sweep import load_sweep

    sweep = load_sweep(args.file)
    runners = [Runner(config) for config in sweep.configs()]  # every cell valid before any runs
    failures = 0
    for runner in runners:
        records = execute(runner, quiet=args.quiet)
        failures += any(r.status == "error" for r in records)
    console.print(f"sweep done: {len(sweep.configs())} runs under {sweep.out}")
    from maslab.report import build_report

    report = build_report([c.out for c in sweep.configs()], Path(sweep.out) / "report.html")
    console.print(f"report: {report}")
    return 1 if failures else 0


# -- report, show, compare, agreement ------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    from maslab.report import build_report

    prices = _load_prices(args.prices) if args.prices else None
    path = build_report(args.runs, args.output, prices=prices)
    console.print(f"report written to {path}")
    return 0


def _load_prices(path: Path) -> dict[str, tuple[float, float]]:
    from pydantic import TypeAdapter

    from maslab.config_files import load_yaml

    table = load_yaml(path, TypeAdapter(dict[str, tuple[float, float]]))
    return dict(table)


def cmd_show(args: argparse.Namespace) -> int:
    from maslab.results import RunStore
    from maslab.show import show_run, show_task

    store = RunStore(args.run)
    if args.task_id is None:
        show_run(store, console)
    else:
        show_task(store, args.task_id, args.repeat, console)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from maslab.results import RunStore
    from maslab.stats import paired_comparison, summarize

    a, b = RunStore(args.run_a), RunStore(args.run_b)
    ma, mb = a.manifest(), b.manifest()
    differ = [k for k in _SAME_DATA if getattr(ma, k) != getattr(mb, k)]
    if differ and not args.pair_by_id:
        raise MaslabError(
            f"{a.dir} and {b.dir} ran on different data ({', '.join(differ)} differ), so a task "
            "id need not name the same question in both; pass --pair-by-id to pair them anyway"
        )
    records_a, records_b = a.results(), b.results()
    p = paired_comparison(records_a, records_b)
    lo, hi = p.ci
    if differ:
        console.print(f"[yellow]paired by task id although {', '.join(differ)} differ[/]")
    console.print(
        f"{p.n} paired tasks ({p.repeats_a} and {p.repeats_b} repeats): A {p.accuracy_a:.1%}, "
        f"B {p.accuracy_b:.1%}, B − A = {p.difference:+.1%} [{lo:+.1%}, {hi:+.1%}]; "
        f"A better on {p.a_only_correct} tasks, B better on {p.b_only_correct}; "
        f"{'McNemar' if p.test == 'mcnemar' else 'paired permutation test'} p = {p.p_value:.4g}"
        + (f" ({p.only_a} tasks only in A, {p.only_b} only in B)" if p.only_a or p.only_b else "")
    )
    spreads = [s.repeat_spread for s in (summarize(records_a), summarize(records_b))]
    widest = max((high - low for low, high, _ in filter(None, spreads)), default=None)
    if widest is not None and abs(p.difference) <= widest:
        console.print(
            f"the difference lies inside the run-to-run noise: single-repeat pass@1 varies by up "
            f"to {widest:.1%} between repeats of one run, so a comparison on one repeat could "
            "not tell a difference this large from chance"
        )
    return 0


# what must match for two runs' task ids to name the same questions
_SAME_DATA = ("benchmark", "split", "dataset_hash", "benchmark_options")


def cmd_agreement(args: argparse.Namespace) -> int:
    from maslab.agreement import compare_evaluators, format_agreement
    from maslab.benchmark import get_benchmark
    from maslab.evaluation import get_evaluator
    from maslab.results import RunStore

    store = RunStore(args.run)
    manifest = store.manifest()
    options = dict(getattr(manifest, "benchmark_options", {}) or {})
    tasks = {t.id: t for t in get_benchmark(manifest.benchmark)(**options).load(
        manifest.split, data=manifest.data)}  # fmt: skip
    pairs = [(tasks[r.task_id], r.answer or "") for r in store.results()
             if r.status != "error" and r.task_id in tasks]  # fmt: skip
    judge = {"judge": args.judge_model} if args.judge_model else {}

    async def compare() -> Any:
        a = get_evaluator(args.evaluator_a)(**(judge if args.evaluator_a == "llm_judge" else {}))
        b = get_evaluator(args.evaluator_b)(**(judge if args.evaluator_b == "llm_judge" else {}))
        try:
            return await compare_evaluators(pairs, a, b)
        finally:
            await a.aclose()
            await b.aclose()

    console.print(format_agreement(asyncio.run(compare()), args.evaluator_a, args.evaluator_b),
                  markup=False, highlight=False)  # fmt: skip
    return 0


# -- list, data, cache ---------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "methods":
        from maslab.method import get_method, list_methods

        rows = [(n, (get_method(n).__doc__ or "").strip().splitlines()[0]) for n in list_methods()]
    elif args.what == "benchmarks":
        from maslab.benchmark import get_benchmark, list_benchmarks

        rows = []
        for name in list_benchmarks():
            cls = get_benchmark(name)
            rows.append((name, f"{cls.domain}; scored by {cls.evaluator}"))
    elif args.what == "evaluators":
        from maslab.evaluation import get_evaluator, list_evaluators

        rows = [
            (n, (get_evaluator(n).__doc__ or "").strip().splitlines()[0]) for n in list_evaluators()
        ]
    else:
        from maslab.llm.endpoints import load_endpoints
        from maslab.llm.registry import providers

        rows = [(f"{p}:<name>", "provider") for p in providers()]
        if args.endpoints:
            rows += [
                (f"openai:{alias}", "endpoints file") for alias in load_endpoints(args.endpoints)
            ]
    table = Table(show_header=False, box=None)
    for name, text in rows:
        table.add_row(f"[bold]{name}[/]", text)
    console.print(table)
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from maslab import benchmark

    if args.action == "fetch":
        path = benchmark.fetch(args.benchmark, args.split)
    elif args.action == "import":
        if args.file is None:
            raise MaslabError("maslab data import needs a FILE")
        path = benchmark.import_file(args.benchmark, args.file, args.split)
    else:
        path = benchmark.data_path(args.benchmark, args.split)
    print(path)
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from maslab.llm.cache import ResponseCache

    cache = ResponseCache(args.cache or default_response_cache())
    if args.action == "clear":
        console.print(f"removed {cache.clear()} cached responses from {cache.path}")
    else:
        stats = cache.stats()
        console.print(f"{cache.path}: {stats['entries']} responses, {stats['bytes']:,} bytes")
    return 0


# -- parser ------------------------------------------------------------------------------------


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", required=True)
    p.add_argument("--benchmark", required=True)
    p.add_argument("--model", help=f"model spec, e.g. openai:gpt-4o-mini (default {DEMO_MODEL})")
    p.add_argument("--endpoints", type=Path, help="endpoints YAML file")
    p.add_argument("--split", default="test")
    p.add_argument("--data", type=Path, help="local data file (JSON, JSONL, Parquet)")
    p.add_argument("--limit", type=int)
    p.add_argument(
        "--shuffle", action="store_true", help="shuffle tasks with --seed before --limit"
    )
    p.add_argument(
        "--repeats", "--epochs", type=int, default=1, help="independent attempts per task"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=32, help="model calls in flight")
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="method config override, e.g. agents=5 or agents.0.model=openai:gpt-4o",
    )
    p.add_argument("--bench-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--temperature", type=float, default=0.5)
    p.add_argument(
        "--max-tokens", type=int, help="per model call (default 2048; 256 for the demo model)"
    )
    p.add_argument("--evaluator")
    p.add_argument("--judge-model", help="model spec for the llm_judge evaluator")
    p.add_argument("--max-calls", type=int, help="per-sample budget")
    p.add_argument("--max-sample-tokens", type=int, help="per-sample budget")
    p.add_argument("--max-sample-seconds", type=float, help="per-sample budget")
    p.add_argument("--cache", type=Path, help="response cache file")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--out", type=Path, help="run directory (default: runs/<benchmark>/...)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="maslab", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a method on a benchmark (resumable)")
    _run_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sweep", help="run a grid of methods x benchmarks x models from YAML")
    p.add_argument("file", type=Path)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("report", help="one self-contained HTML report of run directories")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("-o", "--output", type=Path, default=Path("report.html"))
    p.add_argument("--prices", type=Path, help="YAML: model spec -> [USD per 1M in, out]")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("show", help="a run's results, or one task's transcript")
    p.add_argument("run", type=Path)
    p.add_argument("task_id", nargs="?")
    p.add_argument("--repeat", type=int, default=0)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("compare", help="paired comparison of two runs on the same tasks")
    p.add_argument("run_a", type=Path)
    p.add_argument("run_b", type=Path)
    p.add_argument(
        "--pair-by-id", action="store_true", help="pair by task id even when the data differ"
    )
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("agreement", help="score one run with two evaluators and compare them")
    p.add_argument("run", type=Path)
    p.add_argument("evaluator_a")
    p.add_argument("evaluator_b")
    p.add_argument("--judge-model")
    p.set_defaults(func=cmd_agreement)

    p = sub.add_parser("list", help="list methods, benchmarks, evaluators or models")
    p.add_argument("what", choices=["methods", "benchmarks", "evaluators", "models"])
    p.add_argument("--endpoints", type=Path)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("data", help="fetch, import or locate benchmark data")
    p.add_argument("action", choices=["fetch", "import", "path"])
    p.add_argument("benchmark")
    p.add_argument("file", nargs="?", type=Path)
    p.add_argument("--split", default="test")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("cache", help="response cache statistics or clearing")
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument("--cache", type=Path)
    p.set_defaults(func=cmd_cache)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except MaslabError as exc:
        print(f"maslab: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("maslab: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
