"""What the sample list shows: the filters in a page's query string, and the samples they select."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any
from urllib.parse import urlencode

from maslab.report.triage import OUTCOMES, outcome
from maslab.store.run_store import Key, ResultRecord
from maslab.viewer.runs import Run, signals_of

PAGE_SIZE = 50


def whole_number(text: str) -> int | None:
    """``text`` as a whole number of ASCII digits, or None."""
    return int(text) if text.isascii() and text.isdigit() else None


@dataclass(frozen=True)
class Filters:
    """The sample list's filters; None or empty means any. ``page`` counts from 1."""

    run: int | None = None
    method: str | None = None
    outcome: str | None = None
    signal: str | None = None
    q: str = ""
    page: int = 1

    @classmethod
    def parse(cls, params: Mapping[str, str], runs: int) -> Filters:
        """The filters in a query string; a value that names nothing is ignored."""
        run = whole_number(params.get("run", ""))
        kind = params.get("outcome")
        return cls(
            run=run if run is not None and run < runs else None,
            method=params.get("method") or None,
            outcome=kind if kind in OUTCOMES else None,
            signal=params.get("signal") or None,
            q=params.get("q", "").strip(),
            page=max(1, whole_number(params.get("page", "")) or 1),
        )

    def query(self, **changes: Any) -> str:
        """The query string of these filters with ``changes``, defaults left out."""
        changed = replace(self, **changes)
        defaults = Filters()
        return urlencode({
            f.name: getattr(changed, f.name)
            for f in fields(self)
            if getattr(changed, f.name) != getattr(defaults, f.name)
        })  # fmt: skip

    def runs(self, runs: Sequence[Run]) -> list[Run]:
        """The runs these filters keep."""
        return [
            run
            for run in runs
            if self.run in (None, run.number) and self.method in (None, run.manifest.method)
        ]


def select(
    runs: Sequence[Run], filters: Filters, found: Mapping[int, Container[Key]] | None = None
) -> list[tuple[Run, ResultRecord]]:
    """The samples ``filters`` keep, in run then (task, repeat) order, or by the chosen
    signal's value, highest first; ``found`` (run number -> keys) is what the search found."""
    rows = [
        (run, record)
        for run in filters.runs(runs)
        for record in run.records
        if filters.outcome in (None, outcome(record))
        and (filters.signal is None or filters.signal in signals_of(record))
        and (found is None or record.key in found[run.number])
    ]
    if (signal := filters.signal) is not None:
        rows.sort(key=lambda row: -signals_of(row[1])[signal])
    return rows
