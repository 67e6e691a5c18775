"""The runs a viewer shows: each run's manifest, records and summary in memory, read again
only when its ``results.jsonl`` changes; its traces stay on disk, one read per transcript
shown (through the trace index); a search's results are kept until the traces change."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from maslab.analysis.rescoring import scored_by, scorings_by_sample
from maslab.analysis.stats import Summary, summarize
from maslab.errors import ConfigError
from maslab.report import run_labels
from maslab.store import trace_index
from maslab.store.records import (
    RESULTS,
    SCORINGS,
    TRACES,
    Key,
    Manifest,
    ResultRecord,
    ScoringRecord,
    Trace,
)
from maslab.store.run_store import RunStore, existing_run
from maslab.viewer.search import Snippet

SEARCHES_KEPT = 16  # per run: paging through a search's results does not scan again


def signals_of(record: ResultRecord) -> dict[str, float]:
    """The record's triage signals that fired (value > 0); records written before signals
    existed have none."""
    return {name: v for name, v in record.signals.items() if v > 0}


def _stamp(path: Path) -> tuple[int, int]:
    """(size, modification time) of ``path``; (-1, -1) when it does not exist."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return (-1, -1)
    return (info.st_size, info.st_mtime_ns)


@dataclass
class Run:
    """One run directory as the viewer holds it; ``number`` is its place on the command line,
    ``label`` its name among the runs shown (:func:`name_runs`; its path until then)."""

    number: int
    path: str
    store: RunStore
    manifest: Manifest
    label: str = ""
    scoring: str | None = None
    """The scoring (``maslab score``) whose verdicts ``records`` carry; None: the run's own."""
    verdicts: dict[Key, list[ScoringRecord]] = field(default_factory=dict)
    """Each sample's scorings."""
    records: list[ResultRecord] = field(default_factory=list)
    summary: Summary = field(default_factory=lambda: summarize([]))
    signals: set[str] = field(default_factory=set)
    """The names of the signals that fired on some record."""
    _by_key: dict[Key, ResultRecord] = field(default_factory=dict)
    _results_stamp: tuple[int, ...] = (-2, -2)
    _index: dict[Key, trace_index.Entry] | None = None
    _traces_stamp: tuple[int, int] = (-2, -2)
    _searches: OrderedDict[str, dict[Key, Snippet]] = field(default_factory=OrderedDict)

    @classmethod
    def open(cls, number: int, path: str | Path, scoring: str | None = None) -> Run:
        """The run in ``path`` with its records read, as its scoring ``scoring`` scored them if
        one is named; a one-line ConfigError if it is no run, or has no such scoring."""
        store = existing_run(path)
        run = cls(number, str(path), store, store.manifest(), str(path), scoring)
        run.refresh()
        return run

    def refresh(self) -> None:
        """Read the records again if ``results.jsonl`` or ``scorings.jsonl`` changed (a run
        still going, a scoring made meanwhile). Shown with a scoring that has not scored the
        run's new samples yet, the run stays as it was (a one-line ConfigError the first
        time)."""
        stamp = (*_stamp(self.store.dir / RESULTS), *_stamp(self.store.dir / SCORINGS))
        if stamp == self._results_stamp:
            return
        records, superseded = self.store.records()
        if self.scoring is not None:
            try:
                records = scored_by(self.store, self.scoring, records)
            except ConfigError:
                if not self.records:
                    raise
                return
        records.sort(key=lambda r: r.key)
        self.verdicts = scorings_by_sample(self.store)
        optimization = self.store.optimizations()
        self.records = records
        self.summary = summarize(records, superseded=superseded, optimization=optimization)
        self._by_key = {r.key: r for r in records}
        self.signals = {name for r in records for name in signals_of(r)}
        self._results_stamp = stamp

    def record(self, key: Key) -> ResultRecord | None:
        return self._by_key.get(key)

    def _fresh_traces(self) -> None:
        """Forget the index and the searches once ``traces.jsonl`` has changed."""
        stamp = _stamp(self.store.dir / TRACES)
        if stamp != self._traces_stamp:
            self._index, self._traces_stamp = None, stamp
            self._searches.clear()

    def trace(self, key: Key) -> Trace | None:
        """``key``'s latest trace, read alone through the trace index; None if it has none."""
        self._fresh_traces()
        if self._index is None:
            self._index = self.store.index()
        [(_, trace)] = self.store.traces_of([key], self._index)
        return trace

    def searched(self, query: str) -> dict[Key, Snippet] | None:
        """The keys found for ``query`` by a recent search, if the traces are unchanged since."""
        self._fresh_traces()
        if (found := self._searches.get(query)) is not None:
            self._searches.move_to_end(query)
        return found

    def remember(self, query: str, found: dict[Key, Snippet]) -> None:
        """Keep what a search for ``query`` found (the last :data:`SEARCHES_KEPT` queries)."""
        self._searches[query] = found
        while len(self._searches) > SEARCHES_KEPT:
            self._searches.popitem(last=False)

    @property
    def traces_path(self) -> Path:
        return self.store.dir / TRACES


def name_runs(runs: Sequence[Run]) -> None:
    """Label each run by its method, its model and the settings in which it differs from the
    runs that share those (:func:`maslab.report.run_labels`)."""
    labels = run_labels([run.manifest for run in runs], [run.store.dir for run in runs], model=True)
    for run, label in zip(runs, labels, strict=True):
        run.label = label
