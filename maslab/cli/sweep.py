"""``maslab sweep``: check every cell of a sweep file, run those that can run, then list the
cells that could not and why."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from maslab.cli.console import COUNT, console, import_option
from maslab.cli.run import execute
from maslab.errors import ConfigError, MaslabError

if TYPE_CHECKING:
    from maslab.runner import Runner
    from maslab.sweep import Cell

Failure = tuple["Cell", str, str]  # the cell, when it failed, why


def cmd_sweep(args: argparse.Namespace) -> int:
    """Exit 0 when every cell ran cleanly, 1 when some failed (the table says which and why),
    2 for a mistake in the file or the options, or when no cell could start."""
    from maslab.report import build_report
    from maslab.runner import Runner
    from maslab.sweep import load_sweep, select

    sweep = load_sweep(args.file, models=args.model)
    cells = select(sweep.cells(limit=args.limit), args.only)
    ready: list[tuple[Cell, Runner]] = []
    failed: list[Failure] = []
    for cell in cells:  # every cell is checked (data, keys, golds) before any runs
        try:
            ready.append((cell, Runner(cell.config)))
        except MaslabError as exc:
            console.print(f"[yellow]set aside {escape(str(cell))}: {escape(str(exc))}[/]")
            failed.append((cell, "before running", str(exc)))
    if not ready:
        _print_failures(failed)
        raise ConfigError(f"no cell of {args.file} could start; the table above says why")
    finished = []
    for cell, runner in ready:
        try:
            result = execute(runner, quiet=args.quiet)
        except MaslabError as exc:  # e.g. an endpoint that cannot be reached
            failed.append((cell, "while running", str(exc)))
            continue
        finished.append(cell.config.out)
        if errors := result.summary.describe_errors(limit=1):
            failed.append((cell, "samples errored", errors))
    console.print(f"sweep done: {len(finished)} of {len(cells)} runs finished under {sweep.out}")
    if finished:
        console.print(f"report: {build_report(finished, Path(sweep.out) / 'report.html')}")
    if failed:
        _print_failures(failed)
    return 1 if failed else 0


def _print_failures(failed: list[Failure]) -> None:
    """One line per failed cell, in columns (a line stays whole, for grep and copying)."""
    console.print(f"[bold red]{len(failed)} cell{'s' * (len(failed) != 1)} failed:[/]")
    cells = [str(cell) for cell, _, _ in failed]
    width = max(map(len, cells))
    for cell, (_, when, why) in zip(cells, failed, strict=True):
        console.print(f"  {escape(cell.ljust(width))}  {when.ljust(15)}  {escape(why)}")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a grid of methods x benchmarks x models from YAML",
        description="Every cell is checked before any runs; a cell that cannot run (missing "
        "data or API key, an unreachable endpoint) is set aside with its reason and the rest "
        "run. Exit 1 when some cell failed, 2 for a mistake in the file or when no cell "
        "could start.",
    )
    p.add_argument("file", type=Path)
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="SPEC",
        help="run on this model instead of the file's models; repeatable",
    )
    p.add_argument("--limit", type=COUNT, help="at most N tasks per cell")
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=GLOB,...",
        help="run only the cells that match: comma-separated KEY=GLOB terms, all of which must "
        "match, KEY one of method (name or label), benchmark, model; repeated --only options "
        "add cells, e.g. --only method=llm_debate,benchmark=arith --only 'model=openai:*'",
    )
    p.add_argument("--quiet", action="store_true")
    import_option(p)
    p.set_defaults(func=cmd_sweep)
