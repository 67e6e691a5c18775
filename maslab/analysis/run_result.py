"""A run read back from its directory: its manifest, records and summary, and one flat table
row per sample (what ``to_pandas()`` and ``maslab export`` give), each beginning with the
columns that say which run it is of."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from maslab.errors import ConfigError
from maslab.store.run_store import (
    CACHED_KEYS,
    SPENT_KEYS,
    Manifest,
    ResultRecord,
    RunStore,
    existing_run,
)

if TYPE_CHECKING:
    import pandas as pd

    from maslab.analysis.comparison import Comparison
    from maslab.analysis.stats import Summary

# the columns that say which run a row is of (every table of runs begins with them but
# ``Runs.runs_df()``, whose directory comes last), with the type of their values
RUN_COLUMNS: dict[str, type] = {
    "method": str,
    "benchmark": str,
    "model": str,
    "split": str,
    "seed": int,
    "scoring": str,
    "directory": str,
}
# the flat table's columns, in order, with the type of their non-empty values
SAMPLE_COLUMNS: dict[str, type] = {
    **RUN_COLUMNS,
    "task_id": str,
    "repeat": int,
    "status": str,
    "correct": bool,
    "unparsed": bool,
    "score": float,
    "extracted": str,
    "answer": str,
    "gold": str,
    "explanation": str,
    "error": str,
    "calls": int,
    "cached_calls": int,
    "failed_calls": int,
    "estimated_calls": int,
    "prompt_tokens": int,
    "completion_tokens": int,
    "cached_prompt_tokens": int,
    "cached_completion_tokens": int,
    "tokens": int,
    "latency_s": float,
    "queued_s": float,
    "elapsed_s": float,
    "scoring_calls": int,
    "scoring_tokens": int,
}
_TOKENS = SPENT_KEYS + CACHED_KEYS
_COUNTS = ("calls", "cached_calls", "failed_calls", "estimated_calls", *_TOKENS)


def run_label(manifest: Manifest) -> str:
    """'llm_debate · arith · openai:gpt-4o-mini'."""
    return f"{manifest.method} · {manifest.benchmark} · {manifest.model}"


def run_columns(manifest: Manifest, directory: Path, scoring: str | None = None) -> dict[str, Any]:
    """The values of :data:`RUN_COLUMNS` for the run in ``directory``, its verdicts those of
    the scoring ``scoring`` (None: the run's own)."""
    return {
        "method": manifest.method,
        "benchmark": manifest.benchmark,
        "model": manifest.model,
        "split": manifest.split,
        "seed": manifest.seed,
        "scoring": scoring,
        "directory": str(directory),
    }


def data_frame(rows: list[dict[str, Any]], columns: list[str] | None, what: str) -> pd.DataFrame:
    """``rows`` as a pandas DataFrame with ``columns`` (None: every key, in the order first
    seen); without pandas, a one-line :class:`ConfigError` saying that ``what`` needs it."""
    try:
        import pandas as pd
    except ImportError:
        raise ConfigError(f"{what} needs pandas: pip install pandas") from None
    return pd.DataFrame(rows, columns=columns)


def sample_rows(
    manifest: Manifest, records: list[ResultRecord], directory: Path, scoring: str | None = None
) -> list[dict[str, Any]]:
    """One flat row per record of the run in ``directory``, with the columns of
    :data:`SAMPLE_COLUMNS` (None where a record has no value: no score for an errored sample,
    no error for a finished one); ``scoring`` names the scoring whose verdicts ``records``
    carry (None: the run's own).

    ``tokens`` are the tokens the method used (spent plus replayed from the cache),
    ``latency_s`` the time its calls took (``queued_s`` of it queued at the server, where the
    server said) and ``elapsed_s`` the sample's wall time; the scoring columns
    count an LLM judge's calls, which are not the method's cost.
    """
    run = run_columns(manifest, directory, scoring)
    rows = []
    for r in records:
        score = r.score
        rows.append(
            {
                **run,
                "task_id": r.task_id,
                "repeat": r.repeat,
                "status": r.status,
                "correct": r.correct,
                "unparsed": r.unparsed,
                "score": score.value if score else None,
                "extracted": score.extracted if score else None,
                "answer": r.answer,
                "gold": r.gold,
                "explanation": score.explanation if score else None,
                "error": r.error,
                **{key: int(r.usage.get(key, 0)) for key in _COUNTS},
                "tokens": r.tokens_used,
                "latency_s": float(r.usage.get("latency_s", 0.0)),
                "queued_s": float(r.usage.get("queued_s", 0.0)),
                "elapsed_s": r.elapsed_s,
                "scoring_calls": int(r.scoring_usage.get("calls", 0)),
                "scoring_tokens": int(sum(r.scoring_usage.get(k, 0) for k in _TOKENS)),
            }
        )
    return rows


@dataclass(frozen=True, repr=False)
class RunResult:
    """A run directory as read: ``manifest``, ``records`` (one per planned task and repeat
    finished so far) and their ``summary``. :func:`maslab.evaluate` returns one;
    :func:`load_run` reads one back."""

    dir: Path
    manifest: Manifest
    records: list[ResultRecord]
    superseded: list[ResultRecord]
    optimization: list[ResultRecord] = field(default_factory=list)
    """The attempts at the optimisation step (``--optimize-on``), its cost apart."""
    scoring: str | None = None
    """The label of the scoring (``maslab score``) the records carry; None: the run's own."""

    @classmethod
    def read(cls, store: RunStore, scoring: str | None = None) -> RunResult:
        """The run in ``store``; with ``scoring``, its records as that scoring scored them (see
        :func:`maslab.analysis.rescoring.scored_by`)."""
        records, superseded = store.records()
        if scoring is not None:
            from maslab.analysis.rescoring import scored_by

            records = scored_by(store, scoring, records)
        manifest, optimization = store.manifest(), store.optimizations()
        return cls(store.dir, manifest, records, superseded, optimization, scoring)

    @cached_property
    def summary(self) -> Summary:
        """Accuracy with its interval, errors, cost per sample (see :class:`Summary`)."""
        from maslab.analysis.stats import summarize

        return summarize(self.records, superseded=self.superseded, optimization=self.optimization)

    @property
    def accuracy(self) -> float:
        return self.summary.accuracy

    @property
    def planned(self) -> int:
        """How many samples (tasks × repeats) the run asked for."""
        m = self.manifest
        return (len(m.task_ids) if m.task_ids is not None else m.tasks) * m.repeats

    @property
    def report(self) -> Path | None:
        """The run's ``report.html``, if one was written."""
        path = self.dir / "report.html"
        return path if path.is_file() else None

    def compare(self, other: RunResult, *, pair_by_id: bool = False) -> Comparison:
        """``other`` (B) against this run (A), paired by task (see
        :func:`maslab.analysis.comparison.compare`)."""
        from maslab.analysis.comparison import compare

        return compare(self, other, pair_by_id=pair_by_id)

    def to_records(self) -> list[dict[str, Any]]:
        """One flat dict per sample (see :func:`sample_rows`)."""
        return sample_rows(self.manifest, self.records, self.dir, self.scoring)

    def to_pandas(self) -> pd.DataFrame:
        """One row per sample, the columns of :data:`SAMPLE_COLUMNS`; needs pandas."""
        return data_frame(self.to_records(), list(SAMPLE_COLUMNS), "to_pandas()")

    def _figures(self) -> list[tuple[str, str]]:
        s = self.summary
        return [
            ("accuracy", f"{s.describe_accuracy()} over {s.design}"),
            ("samples", f"{s.n} of {self.planned} done: {s.correct} correct, "
                        f"{s.unparsed} unparsed, {s.errors} errors"),
            ("per sample", f"{s.mean_tokens:,.0f} tokens, {s.mean_calls:.1f} calls"),
            *(
                [("optimisation", opt.removeprefix("optimisation: "))]
                if (opt := s.describe_optimization())
                else []
            ),
            *([("scoring", self.scoring)] if self.scoring else []),
            ("dir", str(self.dir)),
        ]  # fmt: skip

    def __repr__(self) -> str:
        figures = "; ".join(f"{name} {text}" for name, text in self._figures())
        return f"<RunResult {run_label(self.manifest)}: {figures}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{name}</th><td style='text-align:left'>"
            f"{html.escape(text)}</td></tr>"
            for name, text in self._figures()
        )
        return f"<b>{html.escape(run_label(self.manifest))}</b><table>{rows}</table>"


def load_run(path: str | Path, scoring: str | None = None) -> RunResult:
    """Read a run directory (finished, or cut short) back, its records as scored by the run or,
    given its label, by a scoring of ``maslab score``; a one-line :class:`ConfigError` when
    ``path`` is not a run, or has no such scoring."""
    return RunResult.read(existing_run(path), scoring)
