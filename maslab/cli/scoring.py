"""``maslab score``: a finished run's answers scored again, by another evaluator or the same with
other options, kept beside its original scores (see :mod:`maslab.analysis.rescoring`)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from maslab.cli.commands import about
from maslab.cli.console import COUNT, console

if TYPE_CHECKING:
    from maslab.analysis.rescoring import Rescoring
    from maslab.bench.evaluation import Evaluator
    from maslab.llm.pool import ModelPool
    from maslab.store.run_store import RunStore

OPTION = "--evaluator-option"


def evaluator_of(args: argparse.Namespace, models: ModelPool) -> Evaluator:
    """The evaluator ``--evaluator`` names, with its ``--evaluator-option`` options and any
    ``--judge-model``, checked as ``maslab run`` checks them and built on ``models``."""
    from maslab.bench.evaluation import get_evaluator
    from maslab.harness.configure import scoring_options
    from maslab.harness.samples import build_evaluator

    options = scoring_options(args.evaluator, args.evaluator_options, args.judge_model,
                              judge_flag="--judge-model", option_flag=OPTION)  # fmt: skip
    return build_evaluator(get_evaluator(args.evaluator), options, models)


async def _score(args: argparse.Namespace, store: RunStore) -> Rescoring:
    from maslab.analysis.rescoring import rescore_run
    from maslab.llm.pool import ModelPool

    models = ModelPool(endpoints=args.endpoints)
    try:
        evaluator = evaluator_of(args, models)
        try:
            return await rescore_run(
                store, evaluator, models=models, label=args.label,
                concurrency=args.concurrency, unsafe=args.unsafe_no_sandbox,
            )  # fmt: skip
        finally:
            await evaluator.aclose()
    finally:
        await models.aclose()


def cmd_score(args: argparse.Namespace) -> int:
    from maslab.store.run_store import existing_run

    store = existing_run(args.run)
    rescoring = asyncio.run(_score(args, store))
    for line in rescoring.describe(store.manifest()):
        console.print(line, markup=False, highlight=False)
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "score",
        help=about("score"),
        description="Score the recorded answers of a run again with another evaluator (or the "
        "same with other options), with no call to the method. The scores go to the run's "
        "scorings.jsonl under a label (its original scores untouched); a judge's calls are "
        "counted as scoring spend. Errored samples have no answer and are skipped; samples the "
        "label has scored already are not scored again. show --scoring LABEL and compare "
        "--scoring LABEL read a scoring instead of the original.",
    )
    p.add_argument("run", type=Path)
    p.add_argument("--evaluator", required=True, metavar="NAME",
                   help="the scoring protocol: a registered name, or module:fn")  # fmt: skip
    p.add_argument("--evaluator-option", dest="evaluator_options", action="append",
                   metavar="KEY=VALUE", help="an option of the evaluator (repeatable)")  # fmt: skip
    p.add_argument("--judge-model", metavar="SPEC", help="the model spec of the judge (llm_judge)")
    p.add_argument(
        "--endpoints", type=Path, metavar="FILE", help="endpoints file for the judge's model"
    )
    p.add_argument("--label", help="the scoring's name (default: the evaluator's, with a short "
                   "hash of its options when they are not its defaults)")  # fmt: skip
    p.add_argument("--concurrency", type=COUNT, default=4, metavar="N",
                   help="samples scored at once (default 4)")  # fmt: skip
    p.add_argument("--unsafe-no-sandbox", action="store_true",
                   help="let an evaluator run the answers' code without isolation")  # fmt: skip
    p.set_defaults(func=cmd_score)
