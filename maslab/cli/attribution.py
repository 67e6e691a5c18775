"""``maslab attribute``: which agent made each failed sample fail, and at which step, named by an
LLM judge (see :mod:`maslab.analysis.attribution`); recorded beside each run, its scores
untouched."""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from maslab.analysis.strategies import STRATEGIES
from maslab.cli.commands import about
from maslab.cli.console import COUNT, console, plain_table

if TYPE_CHECKING:
    from maslab.store.records import AttributionRecord


async def _attribute_all(args: argparse.Namespace) -> list[tuple[str, list[AttributionRecord]]]:
    """Each run's method and its attributions by this strategy and judge, after attributing
    what was left; a line per run on the way."""
    from maslab.analysis.attribution import attribute_run, failed
    from maslab.llm.pool import ModelPool
    from maslab.store.run_store import existing_run

    models = ModelPool(endpoints=args.endpoints)
    found: list[tuple[str, list[AttributionRecord]]] = []
    try:
        for path in args.runs:
            store = existing_run(path)
            manifest = store.manifest()
            made = await attribute_run(store, args.judge_model, args.strategy, models=models,
                                       concurrency=args.concurrency)  # fmt: skip
            mine = [a for a in store.attributions()
                    if (a.strategy, a.judge) == (args.strategy, args.judge_model)]  # fmt: skip
            tokens = sum(a.prompt_tokens + a.completion_tokens for a in made)
            console.print(
                f"{manifest.method} on {manifest.benchmark} with {manifest.model}: "
                f"{len(failed(store.results()))} failed samples, {len(mine)} attributed; "
                f"now {len(made)}, {sum(a.calls for a in made)} judge calls, {tokens:,} tokens "
                "(analysis spend, apart from the run's)",
                markup=False,
                highlight=False,
            )
            found.append((manifest.method, mine))
    finally:
        await models.aclose()
    return found


def _table(found: list[tuple[str, list[AttributionRecord]]]) -> str:
    """Failures per method and role, most first, with their share of the method's."""
    from maslab.analysis.attribution import tally

    rows = []
    for method, attributions in found:
        counts: Counter[str] = tally(attributions, "role")
        total = sum(counts.values())
        rows += [
            (method, role, str(n), f"{n / total:.0%}")
            for role, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        ]
    return plain_table(("method", "role", "failures", "share"), rows, {"failures", "share"})


def cmd_attribute(args: argparse.Namespace) -> int:
    found = asyncio.run(_attribute_all(args))
    if any(attributions for _, attributions in found):
        console.print(_table(found), markup=False, highlight=False, end="")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "attribute",
        help=about("attribute"),
        description="For each failed sample of each run, an LLM judge names the responsible "
        "agent and the decisive step, with its reason (after Who&When, arXiv 2505.00212). The "
        "attributions go to the run's attributions.jsonl (its scores untouched), the judge's "
        "tokens counted as analysis spend; samples already attributed by the same strategy and "
        "judge are skipped. Judge calls per sample, n the transcript's messages: all_at_once 1, "
        "step_by_step up to n (it stops at the first step judged decisive), binary_search "
        "ceil(log2 n).",
    )
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--judge-model", required=True, help="model spec of the judge")
    p.add_argument("--strategy", choices=STRATEGIES, default="all_at_once",
                   help="how the judge reads the transcript (default all_at_once)")  # fmt: skip
    p.add_argument("--endpoints", type=Path, help="endpoints file for the judge's model")
    p.add_argument("--concurrency", type=COUNT, default=4,
                   help="samples attributed at once (default 4)")  # fmt: skip
    p.set_defaults(func=cmd_attribute)
