"""``maslab study``: a seed paper's experiment on the user's model (see :mod:`maslab.studies`):
``list`` the studies, ``plan`` what one would cost, ``run`` it (resumable; a second model adds
a column), ``report`` on what a study directory holds."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from maslab import defaults
from maslab.cli.commands import about
from maslab.cli.console import COUNT, console, import_option, plain_table
from maslab.cli.run import backend_options
from maslab.cli.sweep import print_failures, run_sweep

if TYPE_CHECKING:
    from maslab.studies.base import Study, StudyOptions, StudyRuns, Table
    from maslab.studies.figures import PaperFigures
    from maslab.studies.running import StudyRecord


def table_lines(table: Table) -> list[str]:
    """The table as aligned plain text: a title line, then one line per row and column."""
    from maslab.studies.report import cell_text

    rows = [
        (row.label, column, cell_text(cell, table.percent))
        for row in table.rows
        for column, cell in zip(table.columns, row.cells, strict=True)
    ]
    against = f" (against {table.against})" if table.against else ""
    head = f"{table.title}: {table.what}{against}"
    return [head, *plain_table(("", "", "ours [95% CI] · paper · verdict"), rows).splitlines()]


def cmd_list(args: argparse.Namespace) -> int:
    from maslab.studies.base import get_study, list_studies

    rows = []
    for name in list_studies():
        study = get_study(name)
        rows.append((name, study.title, study.source))
    console.print(plain_table(("study", "what", "source"), rows), end="", markup=False,
                  highlight=False)  # fmt: skip
    return 0


def _options(args: argparse.Namespace) -> tuple[Study, StudyOptions, Path]:
    from maslab.studies.base import StudyOptions, get_study
    from maslab.studies.running import default_dir

    study = get_study(args.name)()
    if args.benchmark is not None and study.benchmark is None:
        from maslab.errors import ConfigError

        raise ConfigError(f"--benchmark: {args.name} fixes its benchmarks (it runs its paper's)")
    options = StudyOptions(
        models=tuple(args.model), limit=args.limit, repeats=args.repeats or study.default_repeats,
        model_roles=tuple(args.model_role), seed=args.seed, benchmark=args.benchmark,
        endpoints=str(args.endpoints) if args.endpoints else None,
    )  # fmt: skip
    return study, options, args.out or default_dir(args.name)


def cmd_plan(args: argparse.Namespace) -> int:
    """Print each benchmark's tasks, each method's calls per task, and the calls in all."""
    from maslab.studies.planning import plan
    from maslab.studies.running import study_sweep

    study, options, out = _options(args)
    found = plan(study_sweep(study, options, out).cells())
    rows = [(b.label, "—" if b.tasks is None else str(b.tasks), b.problem or "ready")
            for b in found.benchmarks]  # fmt: skip
    console.print(plain_table(("benchmark", "tasks", ""), rows, right={"tasks"}), end="",
                  markup=False, highlight=False)  # fmt: skip
    counts = [
        (m.label, "?" if m.calls_per_task is None else f"{m.calls_per_task:g}",
         m.measured_on or m.problem, m.formula)
        for m in found.methods
    ]  # fmt: skip
    console.print(plain_table(("method", "calls/task", "measured on", "the method's count"),
                              counts, right={"calls/task"}), end="", markup=False,
                  highlight=False)  # fmt: skip
    missing = found.runs - found.runnable
    per_task = found.calls_per_task
    console.print(
        f"{study.name}: {found.runs} runs ({len(options.models)} model"
        f"{'s' * (len(options.models) != 1)}), about {found.calls:,.0f} model calls in the "
        f"{found.runnable} runs that can start"
        + (f"; {missing} cannot yet (the tables say why)" if missing else "")
        + (f"; a task costs {per_task:g} calls across the methods, per model and repeat"
           if per_task is not None else "")
        + ". Calls per task are measured on one task with a scripted model: methods that stop "
        "early when their agents agree may take fewer on a real model, or more.",
        markup=False, highlight=False,
    )  # fmt: skip
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run the study's cells for the models given, then write and print its report."""
    from maslab.harness.sweep import select
    from maslab.studies.running import collect, record_models, study_sweep

    study, options, out = _options(args)
    figures = _figures(study, args.against)  # a wrong --against is said before anything runs
    cells = select(study_sweep(study, options, out).cells(), args.only)
    record_models(out, args.name, options)
    finished, failed = run_sweep(cells, args, args.max_cells, f"study {args.name}")
    console.print(f"study {args.name}: {len(finished)} of {len(cells)} runs finished under {out}")
    _, record, runs = collect(out)
    asyncio.run(_after_runs(study, out, options, runs))
    _report(out, study, record, runs, figures, args.against)
    if failed:
        print_failures(failed)
    return 1 if failed else 0


async def _after_runs(study: Study, out: Path, options: StudyOptions, runs: StudyRuns) -> None:
    from maslab.llm.pool import ModelPool
    from maslab.paths import default_response_cache

    models = ModelPool(endpoints=options.endpoints, cache=default_response_cache())
    try:
        await study.after_runs(out, runs, options, models)
    finally:
        await models.aclose()


def cmd_report(args: argparse.Namespace) -> int:
    from maslab.studies.running import collect

    study, record, runs = collect(args.dir)
    _report(args.dir, study, record, runs, _figures(study, args.against), args.against)
    return 0


def _figures(study: Study, against: str | None) -> PaperFigures | None:
    """The study's paper figures; a one-line ConfigError for an ``against`` that names none of
    the paper's models."""
    figures = study.paper_figures()
    if against is not None and figures is not None and against not in figures.models():
        from maslab.errors import ConfigError

        raise ConfigError(
            f"--against {against}: the paper's models are {', '.join(figures.models())}"
        )
    return figures


def _report(
    out: Path,
    study: Study,
    record: StudyRecord,
    runs: StudyRuns,
    figures: PaperFigures | None,
    against: str | None,
) -> None:
    """Print the study's analysis and write its page."""
    from maslab.studies.report import describe_cost, write_page

    analysis = study.analyse(runs, figures, against)
    for table in analysis.tables:
        for line in table_lines(table):
            console.print(escape(line), highlight=False)
    for note in analysis.notes:
        console.print(escape(note), highlight=False)
    console.print(f"cost: {describe_cost(analysis)}", highlight=False)
    if runs.missing:
        console.print(f"{len(runs.missing)} cells not run yet", highlight=False)
    console.print(f"report: {write_page(out, study, record, analysis, runs.missing)}")


AGAINST = "the paper's model to compare with (default: the study's)"
REPEATS = (1, 2, 3, 5, 10)
PLANNED = ", ".join(map(str, REPEATS))


def cmd_plan_power(args: argparse.Namespace) -> int:
    """Tasks a paired comparison needs, at several repeat counts (see maslab.analysis.power)."""
    from maslab.analysis.power import Variance, tasks_needed
    from maslab.analysis.run_result import load_run
    from maslab.errors import ConfigError

    if args.pilot is not None:
        pilot = load_run(args.pilot)
        try:
            variance = Variance.of(pilot.records)
        except ValueError as exc:
            raise ConfigError(f"--pilot {args.pilot}: {exc}") from None
        source = (
            f"the pilot {args.pilot} ({variance.tasks} tasks, accuracy {variance.accuracy:.1%}): "
            f"between-task variance {variance.between:.4f}, within-task {variance.within:.4f}"
        )
    elif args.baseline is not None:
        variance = Variance.assumed(args.baseline, args.effect)
        source = (
            f"no pilot: every task at the baseline's rate, {args.baseline:.1%} (a pilot run "
            "with repeats, --pilot RUN, splits the variance between and within tasks)"
        )
    else:
        raise ConfigError("give --baseline P (an accuracy) or --pilot RUN (a run with repeats)")
    try:
        needed = [tasks_needed(variance, args.effect, k, alpha=args.alpha, power=args.power)
                  for k in (args.repeats or REPEATS)]  # fmt: skip
    except ValueError as exc:
        raise ConfigError(f"--effect {args.effect}: {exc}") from None
    rows: list[tuple[str, ...]] = [
        (str(r.repeats), f"{r.tasks_shared:,}", f"{r.tasks_unrelated:,}") for r in needed
    ]
    heads: tuple[str, ...] = ("repeats", "tasks if the methods find the same tasks hard",
             "tasks if their difficulties are unrelated")  # fmt: skip
    if not variance.tasks:  # assumed: no difficulty to share, the two bounds are one
        rows, heads = [row[:2] for row in rows], ("repeats", "tasks")
    console.print(
        f"to detect a difference of {args.effect:+.1%} with power {args.power:.0%} at "
        f"α = {args.alpha:g} (two-sided, paired by task); variance from {source}",
        markup=False, highlight=False,
    )  # fmt: skip
    console.print(
        plain_table(heads, rows, right={"repeats"}),
        end="", markup=False, highlight=False,
    )  # fmt: skip
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "study",
        help=about("study"),
        description="A study runs a paper's grid of methods and benchmarks on your model "
        "(resumable, as a sweep), analyses it as the paper did and reports our figures with "
        "95%% intervals beside the paper's, with a verdict each.",
    )
    studies = p.add_subparsers(dest="study_command", required=True)
    studies.add_parser("list", help="the studies").set_defaults(func=cmd_list)
    for name, func, text in (
        ("plan", cmd_plan, "what a study would run and roughly how many calls, before it runs"),
        ("run", cmd_run, "run a study on a model (again: resume; another model: a column more)"),
    ):
        q = studies.add_parser(name, help=text)
        q.add_argument("name", help="the study (maslab study list)")
        q.add_argument("--model", action="append", required=True, metavar="SPEC",
                       help="the model to run it on; repeatable")  # fmt: skip
        q.add_argument("--limit", type=COUNT, help="at most N tasks per benchmark")
        q.add_argument("--repeats", type=COUNT, help="attempts at each task (default: the study's)")
        q.add_argument("--seed", type=int, default=defaults.SEED, help="the runs' seed")
        q.add_argument("--benchmark", help="the benchmark of a study that runs on one")
        q.add_argument("--endpoints", type=Path, help="endpoints file for the models' aliases")
        q.add_argument("--model-role", action="append", default=[], metavar="NAME=SPEC",
                       help="a role or agent on another model")  # fmt: skip
        q.add_argument("--out", type=Path, help="the study's directory (default: "
                       "runs/studies/NAME)")  # fmt: skip
        q.set_defaults(func=func)
        if name == "run":
            q.add_argument("--max-cells", type=COUNT, default=defaults.MAX_CELLS, metavar="K",
                           help="runs at once")  # fmt: skip
            q.add_argument("--against", metavar="MODEL", help=AGAINST)
            q.add_argument("--quiet", action="store_true", help="one line per finished run")
            q.add_argument("--only", action="append", default=[], metavar="KEY=GLOB,...",
                           help="run only the cells that match, as maslab sweep --only (the "
                           "others stay to run)")  # fmt: skip
            backend_options(q, what="the runs' samples")
            import_option(q)
    p = sub.add_parser(
        "plan-power",
        help=about("plan-power"),
        description="The tasks a paired comparison of two methods needs to detect a difference "
        "(--effect) with the given power, at several repeat counts: from a baseline accuracy "
        "alone, or from a pilot run with repeats, whose variance splits between tasks (which "
        "repeats cannot shrink) and within them.",
    )
    p.add_argument("--effect", type=float, required=True, metavar="D",
                   help="the difference in accuracy to detect, e.g. 0.05")  # fmt: skip
    p.add_argument("--baseline", type=float, metavar="P", help="the baseline's accuracy")
    p.add_argument("--pilot", type=Path, metavar="RUN", help="a run with repeats of the baseline")
    p.add_argument("--power", type=float, default=0.8, help="default 0.8")
    p.add_argument("--alpha", type=float, default=0.05, help="the test's level (default 0.05)")
    p.add_argument("--repeats", type=COUNT, action="append", metavar="K",
                   help=f"repeat counts to plan for (default {PLANNED})")  # fmt: skip
    p.set_defaults(func=cmd_plan_power)

    q = studies.add_parser("report", help="the report of a study directory, as it stands")
    q.add_argument("dir", type=Path, help="the study's directory")
    q.add_argument("--against", metavar="MODEL", help=AGAINST)
    q.set_defaults(func=cmd_report)
