"""Reading finished runs: ``maslab report``, ``show``, ``compare`` and ``agreement``."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from maslab.cli.console import console, number, output_file
from maslab.errors import ConfigError, MaslabError
from maslab.store.run_store import existing_run


def cmd_report(args: argparse.Namespace) -> int:
    from maslab.report import build_report

    for run in args.runs:
        existing_run(run)
    output_file(args.output)
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
    from maslab.report.show import show_run, show_task

    store = existing_run(args.run)
    if args.task_id is None:
        show_run(store, console, _load_prices(args.prices) if args.prices else None)
    else:
        show_task(store, args.task_id, args.repeat, console)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from maslab.analysis.stats import paired_comparison, summarize

    a, b = existing_run(args.run_a), existing_run(args.run_b)
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
    from maslab.analysis.agreement import compare_evaluators, format_agreement
    from maslab.bench.benchmark import get_benchmark
    from maslab.bench.evaluation import get_evaluator
    from maslab.harness.sweep import judge_options, unused_judge

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
    p = sub.add_parser("report", help="one self-contained HTML report of run directories")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("-o", "--output", type=Path, default=Path("report.html"))
    p.add_argument("--prices", type=Path, help="YAML: model spec -> [USD per 1M in, out]")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("show", help="a run's results, or one task's transcript")
    p.add_argument("run", type=Path)
    p.add_argument("task_id", nargs="?")
    p.add_argument("--repeat", type=number(int, 0), default=0)
    p.add_argument("--prices", type=Path, help="YAML: model spec -> [USD per 1M in, out]")
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
