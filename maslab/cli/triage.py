"""``maslab triage``: a run's samples ranked by their triage signals (see
:mod:`maslab.analysis.triage`),
the transcripts worth reading first."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from maslab.analysis.triage import SIGNALS, Flagged, assess, order
from maslab.cli.commands import about
from maslab.cli.console import COUNT, console, plain_table
from maslab.errors import one_line
from maslab.store.run_store import existing_run

_HEADERS = ("task", "rep", "status", "ok", "signals", "fired")
_RIGHT = {"rep", "signals"}
DEFAULT_TOP = 20


def cmd_triage(args: argparse.Namespace) -> int:
    store = existing_run(args.run)
    manifest = store.manifest()
    records = sorted(store.results(), key=lambda r: r.key)
    # records from before signals were stored: computed from their traces, read only for them
    traces = dict(store.traces_of([r.key for r in records if not r.signals]))
    flagged = assess((r, traces.get(r.key)) for r in records)
    chosen = order(flagged, args.signal)
    ranked = chosen[: args.top]
    which = "any signal" if args.signal is None else args.signal
    console.print(
        f"{manifest.method} on {manifest.benchmark} with {manifest.model}: {len(records)} "
        f"samples, {len(chosen)} where {which} fired"
        + (f", the first {len(ranked)}" if len(chosen) > len(ranked) else ""),
        markup=False,
        highlight=False,
    )
    missing = Counter(name for f in flagged for name in f.not_computable)
    for count, names in _grouped(missing).items():
        console.print(
            f"not computable on {count} of {len(records)} samples (recorded before maslab "
            f"stored what they need): {', '.join(names)}",
            markup=False,
            highlight=False,
        )
    if ranked:
        console.print(_rows(ranked), markup=False, highlight=False, end="")
    return 0


def _grouped(missing: Counter[str]) -> dict[int, list[str]]:
    """Sample count -> the signals not computable on that many samples, in SIGNALS order."""
    groups: dict[int, list[str]] = {}
    for name in SIGNALS:
        if missing[name]:
            groups.setdefault(missing[name], []).append(name)
    return groups


def _value(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.1f}"


def _cells(f: Flagged) -> tuple[str, ...]:
    r = f.record
    fired = " · ".join(f"{name} {_value(value)}" for name, value in f.fired.items())
    return (one_line(r.task_id), str(r.repeat), r.status, "✓" if r.correct else "✗",
            str(f.score), fired)  # fmt: skip


def _rows(ranked: Sequence[Flagged]) -> str:
    """One aligned line per sample under a header (plain columns, as ``maslab show`` prints)."""
    return plain_table(_HEADERS, map(_cells, ranked), _RIGHT)


def add_commands(sub: argparse._SubParsersAction) -> None:
    listed = "\n".join(f"  {name:<20} {about}" for name, about in SIGNALS.items())
    p = sub.add_parser(
        "triage",
        help=about("triage"),
        description="Rank a run's samples by how many triage signals fired (or by one signal's "
        f"value), ties by task and repeat.\n\nsignals:\n{listed}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", type=Path)
    p.add_argument("--signal", choices=list(SIGNALS), metavar="NAME",
                   help="only the samples where this signal fired, by its value")  # fmt: skip
    p.add_argument("--top", type=COUNT, default=DEFAULT_TOP,
                   help=f"show the first N samples (default {DEFAULT_TOP})")  # fmt: skip
    p.set_defaults(func=cmd_triage)
