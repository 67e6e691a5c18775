"""The ``maslab`` command: run, sweep, report, show, compare, agreement, list, data, cache.

Every failure is one line on stderr. Exit status: 2 for a user mistake (a bad option, name,
file or value), 1 for samples that errored or a file system failure (disk full, permissions),
130 after Ctrl-C and 143 after SIGTERM (an interrupted run resumes when the same command is run
again), 141 when the reader of stdout goes away (``maslab list methods | head -1``).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import hashlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from maslab.errors import ConfigError, MaslabError
from maslab.llm.local import DEMO_MODEL
from maslab.paths import default_response_cache
from maslab.secrets import redact

if TYPE_CHECKING:
    from maslab.results import RunStore


class _Console(Console):
    """Redacts every string before it is rendered (wrapping or highlighting could split a key);
    a broken pipe reaches :func:`main` (rich's own handler exits with 1)."""

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(redact(text), **options)

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader of stdout went away")


console = _Console(soft_wrap=True)
DEMO_MAX_TOKENS = 256


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so the same cleanup runs."""


class RunStopped(Exception):
    """A run ended early by ``cause`` (a signal, a failed write); the message says what is
    saved."""

    def __init__(self, cause: KeyboardInterrupt | OSError, saved: str) -> None:
        super().__init__(saved)
        self.cause = cause


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

    from maslab.benchmark import get_benchmark
    from maslab.config_files import apply_overrides, validation_message
    from maslab.llm.registry import check_model
    from maslab.method import get_method
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
        args.max_tokens = DEMO_MAX_TOKENS if args.model == DEMO_MODEL else 2048
    method_cls = get_method(args.method)
    method_config = apply_overrides(
        method_cls.Config().model_dump(mode="json"), args.config, f"{args.method} --config"
    )
    method = method_cls(method_config)  # validate now: one-line error before any work
    evaluator = args.evaluator or get_benchmark(args.benchmark).evaluator
    evaluator_options = judge_options(evaluator, args.judge_model)
    if args.judge_model and not evaluator_options:
        raise unused_judge("--judge-model", [evaluator])
    for spec in filter(None, (args.model, args.judge_model, *method.config.agent_models())):
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
    console.print(f"sweep done: {len(runners)} runs under {sweep.out}")
    from maslab.report import build_report

    outs = [runner.config.out for runner in runners]
    report = build_report(outs, Path(sweep.out) / "report.html")
    console.print(f"report: {report}")
    return 1 if failures else 0


# -- report, show, compare, agreement ------------------------------------------------------------


def _run_dir(path: Path) -> RunStore:
    """The run in ``path``, or a one-line error saying why it is not one."""
    from maslab.results import RunStore

    if not path.exists():
        raise ConfigError(f"{path}: no such run directory")
    if not path.is_dir():
        raise ConfigError(f"{path}: not a run directory (it is a file)")
    store = RunStore(path)
    store.manifest()  # no manifest, or an unreadable one: a one-line error now
    return store


def _output_file(path: Path) -> None:
    """A one-line error now if ``path`` cannot be created as a file."""
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; name the file, e.g. {path / 'report.html'}")
    folder = next(p for p in path.absolute().parents if p.exists())
    if not folder.is_dir():
        raise ConfigError(f"{path}: {folder} is a file, not a directory")
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"{path}: {folder} is not writable")


def cmd_report(args: argparse.Namespace) -> int:
    from maslab.report import build_report

    for run in args.runs:
        _run_dir(run)
    _output_file(args.output)
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
    from maslab.show import show_run, show_task

    store = _run_dir(args.run)
    if args.task_id is None:
        show_run(store, console)
    else:
        show_task(store, args.task_id, args.repeat, console)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from maslab.stats import paired_comparison, summarize

    a, b = _run_dir(args.run_a), _run_dir(args.run_b)
    ma, mb = a.manifest(), b.manifest()
    differ = [k for k in _SAME_DATA if getattr(ma, k) != getattr(mb, k)]
    if differ and not args.pair_by_id:
        raise MaslabError(
            f"{a.dir} and {b.dir} ran on different data ({', '.join(differ)} differ), so a task "
            "id need not name the same question in both; pass --pair-by-id to pair them anyway"
        )
    records_a, records_b = a.results(), b.results()
    for store, records in ((a, records_a), (b, records_b)):
        if not records:
            raise ConfigError(f"{store.dir} has no results yet: nothing to compare")
    if not {r.task_id for r in records_a} & {r.task_id for r in records_b}:
        raise ConfigError(
            f"{a.dir} and {b.dir} share no task: the comparison pairs each task's results"
        )
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
    from maslab.sweep import judge_options, unused_judge

    store = _run_dir(args.run)
    options_a = judge_options(args.evaluator_a, args.judge_model)
    options_b = judge_options(args.evaluator_b, args.judge_model)
    if args.judge_model and not (options_a or options_b):
        raise unused_judge("--judge-model", [args.evaluator_a, args.evaluator_b])
    manifest = store.manifest()
    options = dict(getattr(manifest, "benchmark_options", {}) or {})
    tasks = {t.id: t for t in get_benchmark(manifest.benchmark)(**options).load(
        manifest.split, data=manifest.data)}  # fmt: skip
    pairs = [(tasks[r.task_id], r.answer or "") for r in store.results()
             if r.status != "error" and r.task_id in tasks]  # fmt: skip
    if not pairs:
        raise ConfigError(f"{store.dir} has no answers to score yet")

    async def compare() -> Any:
        a = get_evaluator(args.evaluator_a)(**options_a)
        b = get_evaluator(args.evaluator_b)(**options_b)
        try:
            return await compare_evaluators(pairs, a, b)
        finally:
            await a.aclose()
            await b.aclose()

    console.print(format_agreement(asyncio.run(compare()), args.evaluator_a, args.evaluator_b),
                  markup=False, highlight=False)  # fmt: skip
    return 0


# -- list, data, cache ---------------------------------------------------------------------------


def _summary(cls: type) -> str:
    """The first line of a class's own docstring (not inherited); plugins need not have one."""
    lines = (cls.__doc__ or "").strip().splitlines()
    return lines[0] if lines else "(no description)"


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "methods":
        from maslab.method import get_method, list_methods

        rows = [(n, _summary(get_method(n))) for n in list_methods()]
    elif args.what == "benchmarks":
        from maslab.benchmark import get_benchmark, list_benchmarks

        rows = []
        for name in list_benchmarks():
            cls = get_benchmark(name)
            rows.append((name, f"{cls.domain}; scored by {cls.evaluator}"))
    elif args.what == "evaluators":
        from maslab.evaluation import get_evaluator, list_evaluators

        rows = [(n, _summary(get_evaluator(n))) for n in list_evaluators()]
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

    name = args.benchmark
    if args.action != "import" and args.file is not None:
        raise ConfigError(
            f"maslab data {args.action} takes no FILE; to use {args.file}, "
            f"`maslab data import {name} {args.file}`"
        )
    if args.action == "fetch":
        path = benchmark.fetch(name, args.split)
    elif args.action == "import":
        if args.file is None:
            raise ConfigError(f"maslab data import needs a FILE: maslab data import {name} FILE")
        path = benchmark.import_file(name, args.file, args.split)
    else:
        path = benchmark.data_path(name, args.split)
        if not path.is_file():
            print(f"maslab: {_no_data_file(name, args.split, path)}", file=sys.stderr)
            return 1
    print(path)
    return 0


def _no_data_file(name: str, split: str, path: Path) -> str:
    """Why benchmark ``name`` has no cached file for ``split``, and how to add one."""
    from maslab.benchmark import get_benchmark

    bench = get_benchmark(name)()
    if split in bench.splits and bench.packaged_records(split) is not None:
        return f"{name} {split} data is built in, with no file: {bench.source(split)}"
    option = f" --split {split}" if split != "test" else ""
    ways = [f"`maslab data import {name} FILE{option}`"]
    if bench.hub is not None and split in bench.splits:
        ways.insert(0, f"`maslab data fetch {name}{option}`")
    return (
        f"{name} {split} data is not in the cache (it would be {path}); "
        f"add it with {' or '.join(ways)}"
    )


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


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, like every other maslab error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _number(
    kind: Callable[[str], float], low: float, high: float | None = None, *, above: bool = False
) -> Callable[[str], float]:
    """An argparse type: a ``kind`` number at least ``low`` (above it, with ``above``) and at
    most ``high``."""
    noun = "a whole number" if kind is int else "a number"
    if high is not None:
        rule = f"between {low:g} and {high:g}"
    else:
        rule = f"{'above' if above else 'at least'} {low:g}"

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}, got {text!r}") from None
        if not (value > low if above else value >= low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
        return value

    return parse


_COUNT = _number(int, 1)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--method", required=True)
    p.add_argument("--benchmark", required=True)
    p.add_argument("--model", help=f"model spec, e.g. openai:gpt-4o-mini (default {DEMO_MODEL})")
    p.add_argument("--endpoints", type=Path, help="endpoints YAML file")
    p.add_argument("--split", default="test")
    p.add_argument("--data", type=Path, help="local data file (JSON, JSONL, Parquet)")
    p.add_argument("--limit", type=_COUNT)
    p.add_argument(
        "--shuffle", action="store_true", help="shuffle tasks with --seed before --limit"
    )
    p.add_argument(
        "--repeats", "--epochs", type=_COUNT, default=1, help="independent attempts per task"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--concurrency", type=_COUNT, default=32, help="model calls in flight")
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="method config override, e.g. agents=5 or agents.0.model=openai:gpt-4o",
    )
    p.add_argument("--bench-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--temperature", type=_number(float, 0, 2), default=0.5, help="0 to 2")
    p.add_argument(
        "--max-tokens", type=_COUNT, help="per model call (default 2048; 256 for the demo model)"
    )
    p.add_argument("--evaluator")
    p.add_argument("--judge-model", help="model spec for the llm_judge evaluator")
    p.add_argument("--max-calls", type=_COUNT, help="per-sample budget")
    p.add_argument("--max-sample-tokens", type=_COUNT, help="per-sample budget")
    p.add_argument(
        "--max-sample-seconds", type=_number(float, 0, above=True), help="per-sample budget"
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="maslab", description=__doc__.splitlines()[0])
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
    p.add_argument("--repeat", type=_number(int, 0), default=0)
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
    p.add_argument("--judge-model", help="model spec for an llm_judge evaluator")
    p.set_defaults(func=cmd_agreement)

    p = sub.add_parser("list", help="list methods, benchmarks, evaluators or models")
    p.add_argument("what", choices=["methods", "benchmarks", "evaluators", "models"])
    p.add_argument("--endpoints", type=Path)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "data",
        help="fetch, import or locate benchmark data",
        description="fetch: download --split from the Hugging Face Hub into the cache "
        "(needs maslab[hf]). import: check FILE and copy it into the cache. path: print the "
        "cached file of --split; exits 1, saying why, when there is none.",
    )
    p.add_argument("action", choices=["fetch", "import", "path"])
    p.add_argument("benchmark")
    p.add_argument("file", nargs="?", type=Path, help="the data file to import")
    p.add_argument("--split", default="test")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("cache", help="response cache statistics or clearing")
    p.add_argument("action", choices=["stats", "clear"])
    p.add_argument("--cache", type=Path)
    p.set_defaults(func=cmd_cache)
    return parser


def _terminate(signum: int, frame: FrameType | None) -> NoReturn:
    raise Terminated


def _file_problem(exc: OSError) -> str:
    """One line for a failed file operation: the path and the reason."""
    where = f"{exc.filename}: " if exc.filename else ""
    hint = " (free some space first)" if exc.errno == errno.ENOSPC else ""
    return f"{where}{exc.strerror or exc}{hint}"


def _report_stop(exc: KeyboardInterrupt | OSError, saved: str = "") -> int:
    """Print why the command stopped (one line); return its exit status."""
    note = f"; {saved}" if saved else ""
    if isinstance(exc, OSError):
        print(f"maslab: error: {_file_problem(exc)}{note}", file=sys.stderr)
        return 1
    if isinstance(exc, Terminated):
        print(f"maslab: interrupted by SIGTERM{note}", file=sys.stderr)
        return 128 + signal.SIGTERM
    print(f"maslab: interrupted by Ctrl-C{note}", file=sys.stderr)
    return 128 + signal.SIGINT


def _quiet_stdout() -> None:
    """After a broken pipe: send what is left of stdout to /dev/null, so the flush at exit
    does not fail again (the recipe of Python's signal module documentation)."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # stdout is not a file (captured, replaced)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has printed
        return exc.code if isinstance(exc.code, int) else 2
    on_main_thread = threading.current_thread() is threading.main_thread()
    # only the main thread may handle signals
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main_thread else None
    try:
        status = args.func(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # the reader of stdout is gone (| head): stop quietly
        _quiet_stdout()
        return 141  # 128 + SIGPIPE, what a shell reports for a process the pipe ended
    except MaslabError as exc:
        message = " ".join(redact(str(exc)).split())  # one line, whatever the message held
        print(f"maslab: error: {message}", file=sys.stderr)
        return 2
    except RunStopped as exc:
        return _report_stop(exc.cause, str(exc))
    except (KeyboardInterrupt, OSError) as exc:
        return _report_stop(exc)
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
