"""Reading finished runs: ``maslab report``, ``show``, ``compare`` and ``agreement``."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from rich.markup import escape

from maslab.cli.commands import about
from maslab.cli.console import console, number, output_file
from maslab.errors import ConfigError

SCORING_HELP = "the verdicts of this scoring (maslab score --label) instead of the run's own"


def cmd_report(args: argparse.Namespace) -> int:
    from maslab.report import build_report
    from maslab.store.run_store import existing_run

    for run in args.runs:
        existing_run(run)
    output_file(args.output)
    prices = _load_prices(args.prices) if args.prices else None
    path = build_report(args.runs, args.output, prices=prices, scoring=args.scoring)
    console.print(f"report written to {path}")
    return 0


def _load_prices(path: Path) -> dict[str, tuple[float, float]]:
    from pydantic import TypeAdapter

    from maslab.config_files import load_yaml

    table = load_yaml(path, TypeAdapter(dict[str, tuple[float, float]]))
    return dict(table)


def cmd_show(args: argparse.Namespace) -> int:
    from maslab.report.show import show_run, show_task
    from maslab.store.run_store import existing_run

    store = existing_run(args.run)
    if args.task_id is None:
        prices = _load_prices(args.prices) if args.prices else None
        show_run(store, console, prices, scoring=args.scoring)
    else:
        show_task(store, args.task_id, args.repeat, console, scoring=args.scoring)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from maslab.analysis.comparison import compare
    from maslab.analysis.run_result import RunResult
    from maslab.store.run_store import existing_run

    a, b = (RunResult.read(existing_run(run), args.scoring) for run in (args.run_a, args.run_b))
    comparison = compare(a, b, pair_by_id=args.pair_by_id)
    if comparison.warning:
        console.print(f"[yellow]{comparison.warning}[/]")
    for line in comparison.describe():
        console.print(escape(line))
    return 0


def cmd_agreement(args: argparse.Namespace) -> int:
    from maslab.analysis.agreement import compare_evaluators, format_agreement
    from maslab.bench.benchmark import get_benchmark
    from maslab.bench.evaluation import get_evaluator
    from maslab.harness.sweep import judge_options, unused_judge
    from maslab.store.run_store import existing_run

    store = existing_run(args.run)
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


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help=about("report"))
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("-o", "--output", type=Path, default=Path("report.html"))
    p.add_argument("--prices", type=Path, help="YAML: model spec -> [USD per 1M in, out]")
    p.add_argument("--scoring", metavar="LABEL", help=f"{SCORING_HELP}, in each run")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("show", help=about("show"))
    p.add_argument("run", type=Path)
    p.add_argument("task_id", nargs="?")
    p.add_argument("--repeat", type=number(int, 0), default=0)
    p.add_argument("--prices", type=Path, help="YAML: model spec -> [USD per 1M in, out]")
    p.add_argument("--scoring", metavar="LABEL", help=SCORING_HELP)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("compare", help=about("compare"))
    p.add_argument("run_a", type=Path)
    p.add_argument("run_b", type=Path)
    p.add_argument(
        "--pair-by-id", action="store_true", help="pair by task id even when the data differ"
    )
    p.add_argument("--scoring", metavar="LABEL", help=f"{SCORING_HELP}, in each run")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("agreement", help=about("agreement"))
    p.add_argument("run", type=Path)
    p.add_argument("evaluator_a")
    p.add_argument("evaluator_b")
    p.add_argument("--judge-model", help="model spec for an llm_judge evaluator")
    p.set_defaults(func=cmd_agreement)
