"""Re-scoring a finished run (``maslab score``): its recorded answers scored again, by another
evaluator or the same with other options, with no call to the method; kept beside the original
scores, which stay as they are.

Each scoring has a label (by default the evaluator's name, with a short hash of its options
when they are not its defaults) and one :class:`~maslab.store.records.ScoringRecord` per sample
in the run's ``scorings.jsonl``, appended under the run's lock as each is made. The tasks are
the benchmark's as the run loaded them (its options, split and data), refused in one line when
that data changed since the run (its dataset hash). Errored samples have no answer: they are
skipped and counted. Scoring a label again scores only its samples not yet scored (those the
evaluator failed on among them). A judge's calls go through a context per sample keyed like the
sample's (the run's seed, task and repeat): each scoring line holds their spend, scoring spend,
never the method's.

:func:`scored_by` reads a run's records as a scoring scored them, which ``maslab show
--scoring``, ``compare --scoring``, ``report --scoring``, ``view --scoring``,
``maslab.load_run(..., scoring=...)`` and ``maslab.load_runs(..., scoring=...)`` show;
:func:`describe_scorings` says what each scoring of a run found, for ``show`` and the report.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from maslab.analysis.stats import summarize
from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import Evaluator, identity_options
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.pool import ModelPool
from maslab.llm.registry import options_identity
from maslab.sandbox import IsolationMissing, isolation_refusal, unsafe_no_sandbox
from maslab.store.records import (
    CACHED_KEYS,
    SPENT_KEYS,
    Key,
    Manifest,
    ResultRecord,
    ScoringRecord,
    config_defaults,
)
from maslab.store.run_store import RunStore

NO_MODEL = "scripted:echo"
"""The default model of a scoring context, which no call reaches: a judge asks its own model."""


def scored_options(evaluator: Evaluator) -> dict[str, object]:
    """The evaluator's checked options, defaults included, less its execution options: what a
    scoring records, as a run's manifest records its evaluator's."""
    return identity_options(evaluator.name, evaluator.config.model_dump(mode="json"))


def default_label(evaluator: Evaluator) -> str:
    """The evaluator's name, with the first 6 hex digits of a hash of its options when they
    are not its defaults (a judge model has none): ``exact``, ``llm_judge-3fa2b1``. A judge is
    hashed as a run's identity names it (a server of this machine on any port, the same)."""
    options = scored_options(evaluator)
    defaults = config_defaults(evaluator.Config)
    if all(key in defaults and defaults[key] == value for key, value in options.items()):
        return evaluator.name
    named = options_identity(options)
    digest = hashlib.sha256(orjson.dumps(named, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return f"{evaluator.name}-{digest[:6]}"


def run_tasks(manifest: Manifest, where: Path) -> dict[str, Task]:
    """The tasks of the run in ``where``, by id: its benchmark's split as the run loaded it (the
    benchmark's options, the split, the data file), in source order or shuffled by the run's
    seed; a one-line :class:`ConfigError` when neither has the run's dataset hash (the data
    changed since the run)."""
    benchmark = get_benchmark(manifest.benchmark)(**manifest.benchmark_options)
    tasks = benchmark.load(manifest.split, data=manifest.data)
    found = benchmark.dataset_hash(tasks)
    if found != manifest.dataset_hash:
        shuffled = benchmark.load(manifest.split, seed=manifest.seed, data=manifest.data)
        if benchmark.dataset_hash(shuffled) != manifest.dataset_hash:
            raise ConfigError(
                f"{where}: the data of {manifest.benchmark} {manifest.split} changed since the "
                f"run (dataset hash {found}, the run's {manifest.dataset_hash or 'unrecorded'}): "
                "its answers cannot be scored again against it"
            )
    return {task.id: task for task in tasks}


def answered(record: ResultRecord) -> bool:
    """Whether the sample has an answer to score (an errored one has none)."""
    return record.status != "error" and record.answer is not None


def applied(record: ResultRecord, scoring: ScoringRecord) -> ResultRecord:
    """``record`` as ``scoring`` scored it: its score and scoring spend; an error, as the run
    records an evaluator's failure, where the evaluator failed on the answer."""
    update: dict[str, object] = {"score": scoring.score, "scoring_usage": scoring.scoring_usage}
    if scoring.score is None:
        update.update(status="error", error=scoring.error)
    return record.model_copy(update=update)


def scored_by(store: RunStore, label: str, records: Sequence[ResultRecord]) -> list[ResultRecord]:
    """``records`` (of the run in ``store``) as its scoring ``label`` scored them; a one-line
    :class:`ConfigError` when the run has no such scoring, or it has not scored an answered
    sample (scored before the sample was, or cut short)."""
    scorings = {(s.task_id, s.repeat): s for s in store.scorings(label)}
    if not scorings:
        labels = sorted({s.label for s in store.scorings()})
        have = f"its scorings: {', '.join(labels)}" if labels else "none yet: maslab score"
        raise ConfigError(f"{store.dir} has no scoring {label!r} ({have})")
    if missing := [r for r in records if answered(r) and r.key not in scorings]:
        raise ConfigError(
            f"{store.dir}: scoring {label!r} has not scored {len(missing)} of the run's answered "
            f"samples (first {missing[0].task_id} repeat {missing[0].repeat}): run maslab score "
            f"with --label {label} again"
        )
    return [applied(r, scorings[r.key]) if r.key in scorings else r for r in records]


def scorings_by_sample(store: RunStore) -> dict[Key, list[ScoringRecord]]:
    """Each sample's scorings (the latest by each label), by (task, repeat)."""
    found: dict[Key, list[ScoringRecord]] = {}
    for made in store.scorings():
        found.setdefault((made.task_id, made.repeat), []).append(made)
    return found


def changed_verdicts(original: Sequence[ResultRecord], rescored: Sequence[ResultRecord]) -> int:
    """Samples whose verdict a scoring changed, of those it scored (``rescored`` being
    ``original`` as it scored them)."""
    return sum(
        a.correct != b.correct
        for a, b in zip(original, rescored, strict=True)
        if b.score is not None
    )


def describe_scoring(store: RunStore, label: str) -> str:
    """'scoring LABEL: EVALUATOR (its options), not the run's EVALUATOR', for a run shown with
    the verdicts of its scoring ``label``."""
    by = store.scorings(label)[0]
    options = ", ".join(f"{k}={v}" for k, v in by.evaluator_options.items())
    return (
        f"scoring {label}: {by.evaluator}" + (f" ({options})" if options else "")
        + f", not the run's {store.manifest().evaluator}"
    )  # fmt: skip


def describe_scorings(store: RunStore, records: Sequence[ResultRecord]) -> list[str]:
    """One line per scoring of the run in ``store``, ``records`` being its own verdicts:
    'scoring llm_judge-3fa2b1 (llm_judge): 70.0% [54.6%, 81.9%], 4 of 40 verdicts changed',
    or, for a scoring that has not scored every answered sample, how many it has."""
    lines = []
    by_label: dict[str, list[ScoringRecord]] = {}
    for scoring in store.scorings():
        by_label.setdefault(scoring.label, []).append(scoring)
    answers = sum(map(answered, records))
    for label, made in sorted(by_label.items()):
        about = f"scoring {label} ({made[0].evaluator})"
        try:
            rescored = scored_by(store, label, records)
        except ConfigError:  # it has not scored every answered sample yet
            keys = {r.key for r in records if answered(r)}
            scored = sum((s.task_id, s.repeat) in keys and s.score is not None for s in made)
            lines.append(f"{about}: {scored} of {answers} answered samples scored so far")
            continue
        lines.append(
            f"{about}: {summarize(rescored).describe_accuracy()}, "
            f"{changed_verdicts(records, rescored)} of {answers} verdicts changed"
        )
    return lines


@dataclass(frozen=True)
class Rescoring:
    """What :func:`rescore_run` did: the run's ``original`` records, the same ``rescored`` by
    the scoring ``label`` (evaluator ``evaluator``), the scorings ``made`` now and the errored
    samples ``skipped``."""

    label: str
    evaluator: str
    original: list[ResultRecord]
    rescored: list[ResultRecord]
    made: list[ScoringRecord]
    skipped: int

    @property
    def changed(self) -> int:
        """Samples whose verdict the scoring changed (of those it scored)."""
        return changed_verdicts(self.original, self.rescored)

    @property
    def failed(self) -> int:
        """Answered samples the evaluator failed on (tried again when the label is scored
        again)."""
        return sum(
            answered(a) and not answered(b)
            for a, b in zip(self.original, self.rescored, strict=True)
        )

    def describe(self, manifest: Manifest) -> list[str]:
        """What was scored, the accuracy before and after with their intervals, the verdicts
        changed, and the scoring spend of this invocation."""
        before, after = summarize(self.original), summarize(self.rescored)
        calls = sum(s.scoring_usage.get("calls", 0) for s in self.made)
        tokens = sum(s.scoring_usage.get(k, 0) for s in self.made for k in SPENT_KEYS + CACHED_KEYS)
        scored = len(self.original) - self.skipped
        return [
            f"{manifest.method} on {manifest.benchmark} with {manifest.model}: scoring "
            f"{self.label} ({self.evaluator}): {scored} answered samples, {len(self.made)} "
            f"scored now; {self.skipped} errored, skipped (no answer)"
            + (f"; the evaluator failed on {self.failed} (scored again next time)"
               if self.failed else ""),
            f"accuracy: {manifest.evaluator} {before.describe_accuracy()}, {self.label} "
            f"{after.describe_accuracy()}; {self.changed} of {scored} verdicts changed",
            f"scoring spend now: {int(calls)} judge calls, {int(tokens):,} tokens (apart from "
            "the run's)",
        ]  # fmt: skip


async def rescore_run(
    store: RunStore,
    evaluator: Evaluator,
    *,
    models: ModelPool,
    label: str | None = None,
    concurrency: int = 4,
    unsafe: bool = False,
) -> Rescoring:
    """Score the answers of the run in ``store`` again with ``evaluator`` (built on ``models``,
    the pool its judge's calls go through) under ``label`` (by default :func:`default_label`),
    ``concurrency`` samples at a time, each scoring appended to ``scorings.jsonl`` as it is
    made, under the run's lock (a run being written is refused). Only the answered samples the
    label has not scored yet are scored; ``unsafe`` lets an evaluator that runs the answer's
    code run it without isolation. A one-line :class:`ConfigError` for a label that holds
    another evaluator's scores or options, or data changed since the run."""
    manifest = store.manifest()
    options = scored_options(evaluator)
    label = default_label(evaluator) if label is None else label
    if not re.fullmatch(r"\S+", label):
        raise ConfigError(f"scoring label {label!r}: give a name without spaces")
    if evaluator.runs_model_code and not unsafe and (refusal := isolation_refusal()):
        raise ConfigError(refusal)
    tasks = run_tasks(manifest, store.dir)
    gate = asyncio.Semaphore(concurrency)
    with store.scoring() as append:
        records = store.results()
        earlier = store.scorings(label)
        if other := next((s for s in earlier if (s.evaluator, options_identity(s.evaluator_options))
                          != (evaluator.name, options_identity(options))), None):  # fmt: skip
            raise ConfigError(
                f"{store.dir}: scoring {label!r} holds scores by {other.evaluator} with "
                f"{other.evaluator_options}: name this one with another --label"
            )
        done = {(s.task_id, s.repeat) for s in earlier if s.score is not None}
        todo = [r for r in records if answered(r) and r.key not in done]
        for record in todo:
            evaluator.check_gold(tasks[record.task_id])

        async def one(record: ResultRecord) -> ScoringRecord:
            async with gate:
                ctx = Context(NO_MODEL, models=models, sample_id=record.task_id,
                              repeat=record.repeat, seed=manifest.seed)  # fmt: skip
                score, error = None, None
                try:
                    score = await evaluator.score(
                        tasks[record.task_id], record.answer or "", ctx=ctx
                    )
                except IsolationMissing:
                    raise
                except Exception as exc:  # a judge failure or an evaluator bug: this sample's
                    error = f"evaluator: {type(exc).__name__}: {exc}"
            made = ScoringRecord(
                label=label, task_id=record.task_id, repeat=record.repeat,
                evaluator=evaluator.name, evaluator_options=options, score=score, error=error,
                scoring_usage=ctx.ledger.totals(purpose="scoring").to_dict(),
            )  # fmt: skip
            append(made)
            return made

        with unsafe_no_sandbox(unsafe):
            made = await asyncio.gather(*map(one, todo))
    return Rescoring(
        label=label,
        evaluator=evaluator.name,
        original=records,
        rescored=scored_by(store, label, records) if any(map(answered, records)) else records,
        made=made,
        skipped=sum(not answered(r) for r in records),
    )
