"""Many runs as tables: :func:`load_runs` reads run directories (paths, or a glob) into a
:class:`Runs`, whose ``runs_df()``, ``samples_df()`` and ``messages_df()`` give one row per run,
per sample and per transcript message (pandas DataFrames), each with the columns that say which
run it is of (:data:`~maslab.analysis.run_result.RUN_COLUMNS`)."""

from __future__ import annotations

import glob
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from maslab.analysis import trajectory
from maslab.analysis.run_result import RUN_COLUMNS, RunResult, data_frame, run_columns
from maslab.analysis.triage import SIGNALS, assess
from maslab.bench.evaluation import Score
from maslab.errors import ConfigError
from maslab.store.run_store import ResultRecord, RunStore, existing_run

if TYPE_CHECKING:
    import pandas as pd

RUNS_COLUMNS = (
    *(name for name in RUN_COLUMNS if name != "directory"),
    "repeats", "n", "accuracy", "ci_low", "ci_high", "tokens_per_sample", "calls_per_sample",
    "errors", "budget_stops", "directory",
)  # fmt: skip
MESSAGE_COLUMNS = (
    *RUN_COLUMNS,
    "task_id", "repeat", "index", "sender", "role", "round", "kind", "content", "extracted",
)  # fmt: skip
_GLOB = frozenset("*?[")


def _cell(value: Any) -> Any:
    """A table cell: a scalar as it is, anything else as JSON text."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return orjson.dumps(value).decode()


def record_row(record: ResultRecord, signals: dict[str, float]) -> dict[str, Any]:
    """Every field of ``record`` flattened: the score's as ``score_<field>`` (None without a
    score), the usage keys as columns (the scoring usage's as ``scoring_<key>``), what is no
    scalar as JSON text; then the solution's metadata as ``meta_<key>`` and every triage signal
    as ``signal_<name>``, its value in ``signals`` (None where it could not be computed)."""
    row: dict[str, Any] = {}
    for name in ResultRecord.model_fields:
        value = getattr(record, name)
        if name == "score":
            row.update(
                {f"score_{key}": _cell(getattr(value, key, None)) for key in Score.model_fields}
            )
        elif name == "usage":
            row.update(value)
        elif name == "scoring_usage":
            row.update({f"scoring_{key}": amount for key, amount in value.items()})
        elif name not in ("metadata", "signals"):
            row[name] = _cell(value)
    row.update({f"meta_{key}": _cell(value) for key, value in record.metadata.items()})
    row.update({f"signal_{name}": signals.get(name) for name in SIGNALS})
    return row


@dataclass(frozen=True)
class Runs:
    """Runs read back (:func:`load_runs`), in order: iterate it for each :class:`RunResult`."""

    runs: tuple[RunResult, ...]

    def __iter__(self) -> Iterator[RunResult]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, index: int) -> RunResult:
        return self.runs[index]

    def to_records(self) -> list[dict[str, Any]]:
        """Each run's :meth:`RunResult.to_records` in turn: what ``maslab export`` writes."""
        return [row for run in self.runs for row in run.to_records()]

    def runs_df(self) -> pd.DataFrame:
        """One row per run: its columns, planned repeats, samples done, accuracy and its
        interval (None when the evaluator measures rather than grades), tokens and calls per
        sample, errored and budget-stopped samples, and its directory last."""
        rows = []
        for run in self.runs:
            s = run.summary
            accuracy, (low, high) = (s.accuracy, s.ci) if s.graded else (None, (None, None))
            row = run_columns(run.manifest, run.dir, run.scoring)
            row.update(
                repeats=run.manifest.repeats,
                n=s.n,
                accuracy=accuracy,
                ci_low=low,
                ci_high=high,
                tokens_per_sample=s.mean_tokens,
                calls_per_sample=s.mean_calls,
                errors=s.errors,
                budget_stops=s.budget_stopped,
                directory=row.pop("directory"),
            )
            rows.append(row)
        return data_frame(rows, list(RUNS_COLUMNS), "runs_df()")

    def samples_df(self) -> pd.DataFrame:
        """One row per sample: its run's columns, then :func:`record_row`; a run's signals as
        stored with its records, ``token_outlier`` among the run's samples (those of records
        from before signals were stored: the ones the record alone gives)."""
        rows = []
        for run in self.runs:
            columns = run_columns(run.manifest, run.dir, run.scoring)
            for flagged in assess((record, None) for record in run.records):
                rows.append({**columns, **record_row(flagged.record, flagged.signals)})
        return data_frame(rows, None, "samples_df()")

    def messages_df(self) -> pd.DataFrame:
        """One row per message of each sample's transcript, read from the traces: its run's
        columns, the sample, the message's index in the transcript, sender and the sender's
        role, round, kind, content and the answer extracted from it (None where none was, or
        the trace does not hold the extracted answers)."""
        rows = []
        for run in self.runs:
            columns = run_columns(run.manifest, run.dir, run.scoring)
            traces = RunStore(run.dir).traces_of(record.key for record in run.records)
            for (task_id, repeat), trace in traces:
                if trace is None:
                    continue
                answers = trajectory.message_answers(trace)
                for index, (message, extracted) in enumerate(
                    zip(trace.messages, answers, strict=True)
                ):
                    rows.append({
                        **columns, "task_id": task_id, "repeat": repeat, "index": index,
                        "sender": message.sender, "role": trace.roles.get(message.sender),
                        "round": message.round, "kind": message.kind, "content": message.content,
                        "extracted": extracted,
                    })  # fmt: skip
        return data_frame(rows, list(MESSAGE_COLUMNS), "messages_df()")


def load_runs(paths: str | Path | Iterable[str | Path], scoring: str | None = None) -> Runs:
    """The runs in ``paths``: a run directory, a glob string (``"runs/gsm8k/*"``; its matches
    sorted), or several of either, in the order given, each run once; with ``scoring`` (a label
    of ``maslab score``), each run's records as that scoring scored them. A one-line
    :class:`ConfigError` naming every path that is no run directory, a glob that matches
    nothing, or a run without that scoring."""
    given = [paths] if isinstance(paths, str | Path) else list(paths)
    found: list[Path] = []
    for item in given:
        if isinstance(item, str) and _GLOB & set(item):
            if not (matches := sorted(glob.glob(item, recursive=True))):
                raise ConfigError(f"no run directory matches {item}")
            found.extend(map(Path, matches))
        else:
            found.append(Path(item))
    if not found:
        raise ConfigError("no run directory given")
    stores, problems = [], []
    for path in dict.fromkeys(found):
        try:
            stores.append(existing_run(path))
        except ConfigError as exc:
            problems.append(str(exc))
    if problems:
        raise ConfigError(f"not runs: {'; '.join(problems)}")
    return Runs(tuple(RunResult.read(store, scoring) for store in stores))
