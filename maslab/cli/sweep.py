"""``maslab sweep``: check every cell of a sweep file, run those that can run (up to
``max_cells`` at once, under one call cap and one pool of endpoints), then list the cells
that could not and why."""

from __future__ import annotations

import argparse
import asyncio
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

from maslab import defaults
from maslab.cli.commands import about
from maslab.cli.console import COUNT, RunStopped, console, import_option
from maslab.cli.run import (
    backend_options,
    cluster,
    headline,
    observe,
    print_summary,
)
from maslab.errors import ConfigError, MaslabError
from maslab.harness.heap import steady_heap

if TYPE_CHECKING:
    from rich.progress import Progress

    from maslab.analysis.run_result import RunResult
    from maslab.harness.runner import Runner, SharedResources
    from maslab.harness.sweep import Cell

Failure = tuple["Cell", str, str]  # the cell, when it failed, why
Outcome = tuple["Cell", "RunResult | None", str]  # the cell, its run, why it failed (or "")


def cmd_sweep(args: argparse.Namespace) -> int:
    """Exit 0 when every cell ran cleanly, 1 when some failed (the table says which and why),
    2 for a mistake in the file or the options, or when no cell could start."""
    from maslab.harness.sweep import load_sweep, select
    from maslab.report import build_report

    sweep = load_sweep(args.file, models=args.model)
    for key in ("concurrency", "log_to"):  # the command line's over the file's
        if getattr(args, key) is not None:
            sweep = sweep.model_copy(update={key: getattr(args, key)})
    cells = select(sweep.cells(limit=args.limit), args.only)
    finished, failed = run_sweep(cells, args, args.max_cells or sweep.max_cells, str(args.file))
    console.print(f"sweep done: {len(finished)} of {len(cells)} runs finished under {sweep.out}")
    if finished:
        console.print(f"report: {build_report(finished, Path(sweep.out) / 'report.html')}")
    if failed:
        print_failures(failed)
    return 1 if failed else 0


def run_sweep(
    cells: list[Cell], args: argparse.Namespace, max_cells: int, what: str
) -> tuple[list[Path], list[Failure]]:
    """Check every cell, then run those that can (``max_cells`` at once; on Ray all at once),
    on the backend ``args`` name (its backend options and ``--quiet``); the finished runs'
    directories, and the cells that failed with when and why. A one-line ConfigError, after
    the table of why, when no cell of ``what`` could start."""
    from maslab.harness.runner import Runner, SharedResources

    observe(args)
    shared = SharedResources.for_config(cells[0].config)  # the cells differ in nothing it holds
    workers = cluster(args)
    ready: list[tuple[Cell, Runner]] = []
    failed: list[Failure] = []
    for cell in cells:  # every cell is checked (data, keys, golds) before any runs
        try:
            ready.append((cell, Runner(cell.config, shared=shared, cluster=workers)))
        except MaslabError as exc:
            console.print(f"[yellow]set aside {escape(str(cell))} (why: the table at the end)[/]")
            failed.append((cell, "before running", str(exc)))
    if not ready:
        print_failures(failed)
        raise ConfigError(f"no cell of {what} could start; the table above says why")
    finished: list[Path] = []
    parent = None
    if any(cell.config.log_to == "mlflow" for cell, _ in ready):
        from maslab.harness.tracking import start_parent

        parent = start_parent(what)
    # on Ray every cell runs at once: its shards queue for the workers in the file's order
    with workers.running(cells[0].config) if workers else nullcontext():
        outcomes = _run_cells(
            ready, shared, len(ready) if workers else max_cells, quiet=args.quiet, parent=parent
        )
    for cell, result, why in outcomes:
        if result is None:  # e.g. an endpoint that cannot be reached
            failed.append((cell, "while running", why))
            continue
        finished.append(result.dir)
        if errors := result.summary.describe_errors(limit=1):
            failed.append((cell, "samples errored", errors))
    if parent is not None:
        from maslab.harness.tracking import end_parent

        end_parent(parent, failed=bool(failed))
    return finished, failed


def _run_cells(
    ready: list[tuple[Cell, Runner]],
    shared: SharedResources,
    max_cells: int,
    *,
    quiet: bool,
    parent: str | None,
) -> list[Outcome]:
    """Run the cells, ``max_cells`` at once, in one event loop; each cell's summary is printed
    as it finishes (its first line only when ``quiet``). Ctrl-C stops them all, each saving
    what it finished. Runs on a :func:`steady_heap`, as ``maslab run`` does."""
    try:
        with steady_heap():
            return asyncio.run(_cells(ready, shared, max_cells, quiet=quiet, parent=parent))
    except (KeyboardInterrupt, OSError) as exc:  # main() reports the cause and what was saved
        opened = [runner for _, runner in ready if runner.todo is not None]
        saved = sum(len(runner.store.results()) for runner in opened)
        raise RunStopped(
            exc,
            f"{saved} sample{'s' * (saved != 1)} saved in {len(opened)} "
            f"run{'s' * (len(opened) != 1)}; run the same command again to resume",
        ) from exc


async def _cells(
    ready: list[tuple[Cell, Runner]],
    shared: SharedResources,
    max_cells: int,
    *,
    quiet: bool,
    parent: str | None,
) -> list[Outcome]:
    from maslab.harness.progress import run_lines
    from maslab.harness.runner import all_or_first_failure

    slots = asyncio.Semaphore(max_cells)  # cells start in the file's order as slots free up
    lines = None if quiet else run_lines()
    outcomes: dict[int, Outcome] = {}

    async def cell_run(i: int, cell: Cell, runner: Runner) -> None:
        async with slots:
            outcomes[i] = await _cell(cell, runner, lines, parent)

    try:
        with lines or nullcontext():
            await all_or_first_failure(
                cell_run(i, cell, runner) for i, (cell, runner) in enumerate(ready)
            )
    finally:
        await shared.aclose()
    return [outcomes[i] for i in range(len(ready))]


async def _cell(cell: Cell, runner: Runner, lines: Progress | None, parent: str | None) -> Outcome:
    """Run one cell (a line in ``lines``, unless None) and print its summary; a cell that
    fails (an endpoint that cannot be reached, a directory holding another run) is an
    outcome, not a stop."""
    from maslab import api as harness

    try:
        result = await harness.execute(
            runner,
            progress=lines or False,
            report=False,
            label=str(cell),
            tracking_parent=parent,
        )
    except MaslabError as exc:
        console.print(f"[yellow]{escape(str(cell))} failed: {escape(str(exc))}[/]")
        return cell, None, str(exc)
    if lines is None:  # --quiet: one line a cell
        console.print(headline(result, str(cell)))
    else:
        print_summary(result, str(cell))
    return cell, result, ""


def print_failures(failed: list[Failure]) -> None:
    """One line per failed cell, in columns (a line stays whole, for grep and copying)."""
    console.print(f"[bold red]{len(failed)} cell{'s' * (len(failed) != 1)} failed:[/]")
    cells = [str(cell) for cell, _, _ in failed]
    width = max(map(len, cells))
    for cell, (_, when, why) in zip(cells, failed, strict=True):
        console.print(f"  {escape(cell.ljust(width))}  {when.ljust(15)}  {escape(why)}")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help=about("sweep"),
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
        "--log-to",
        choices=("mlflow",),
        help="log the sweep to an experiment tracker (over the file's log_to:): a parent run, "
        "its cells' runs under it; MLFLOW_TRACKING_URI names the server",
    )
    p.add_argument(
        "--concurrency",
        type=COUNT,
        metavar="N",
        help="model calls in flight across all running cells together (default: the file's "
        f"concurrency:, else {defaults.CONCURRENCY})",
    )
    p.add_argument(
        "--max-cells",
        type=COUNT,
        metavar="K",
        help="cells run at once, sharing --concurrency and every endpoint's max_concurrency "
        f"(default: the file's max_cells:, else {defaults.MAX_CELLS}: while one cell waits on "
        "its last samples or rounds, the others use the calls it leaves; 1 runs the cells "
        "one after another)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="KEY=GLOB,...",
        help="run only the cells that match: comma-separated KEY=GLOB terms, all of which must "
        "match, KEY one of method (name or label), benchmark, model; repeated --only options "
        "add cells, e.g. --only method=llm_debate,benchmark=arith --only 'model=openai:*'",
    )
    backend_options(p, what="the cells' samples")
    p.add_argument(
        "--quiet", action="store_true", help="no progress lines; one line per finished cell"
    )
    import_option(p)
    p.set_defaults(func=cmd_sweep)
