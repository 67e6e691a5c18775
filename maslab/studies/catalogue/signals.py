"""Signals: are the samples triage flags the ones worth reading?

A question of maslab's own, about its triage (:mod:`maslab.analysis.triage`): of the samples
each signal flags, what share does a reader (an LLM judge with a fixed rubric,
:mod:`maslab.analysis.reading`) mark as worth reading, against samples drawn at random?

Grid: LLM Debate, MAD and self-consistency (methods whose transcripts give the signals
something to read) × one benchmark (``--benchmark``, by default ``arith``).

After the runs, the reader (``--model-role reader=SPEC``, by default the study's first model)
reads, in each run, up to :data:`PER_SIGNAL` of the samples each signal flagged and
:data:`RANDOM` samples drawn at random from all of them (drawn by a generator keyed by the
study's seed and the run), one call each; its verdicts go to the study's ``readings.jsonl``, a
line as each is made, so a study stopped while reading resumes where it stopped.

Analysis, per model (its runs together): each signal's precision, the share of its flagged
samples read that the reader marks worth reading, with its interval (Wilson, over samples);
the same share among the random samples; and the lift, precision minus that baseline, with a
normal interval and whether it is detected.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel

from maslab.analysis.reading import read
from maslab.analysis.stats import wilson_interval
from maslab.core.context import Context
from maslab.store.run_store import RunStore
from maslab.studies.base import (
    Analysis,
    Cell,
    Row,
    Study,
    StudyOptions,
    StudyRuns,
    Table,
    register_study,
)
from maslab.studies.estimates import Z95, Estimate, sign_verdict
from maslab.studies.figures import PaperFigures
from maslab.studies.running import locked

if TYPE_CHECKING:
    from maslab.analysis.run_result import RunResult
    from maslab.llm.pool import ModelPool
    from maslab.store.records import ResultRecord, Trace

METHODS = ("llm_debate", "mad", "self_consistency")
READER_ROLE = "reader"
PER_SIGNAL = 20
"""Flagged samples read per signal and run, at most."""
RANDOM = 20
"""Samples drawn at random per run."""
READINGS = "readings.jsonl"
BASELINE = "random samples"


class ReadingRecord(BaseModel):
    """One line of ``readings.jsonl``: the reader's verdict on one sample of one run."""

    run: str
    task_id: str
    repeat: int
    reader: str
    worth: bool | None
    reason: str = ""
    calls: int = 0
    tokens: int = 0

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.run, self.task_id, self.repeat, self.reader)


def reader_of(options: StudyOptions) -> str:
    """The reader's model: ``--model-role reader=SPEC``, else the first model."""
    for role in options.model_roles:
        name, _, spec = role.partition("=")
        if name == READER_ROLE:
            return spec
    return options.models[0]


def chosen(run_key: str, records: list[ResultRecord], seed: int) -> tuple[dict[str, list], list]:
    """The samples to read in one run: by signal, up to :data:`PER_SIGNAL` of those it flagged;
    and :data:`RANDOM` of all, drawn at random. Both drawn by a generator keyed by the seed
    and the run, so the same samples are read on every resume."""
    rng = random.Random(f"{seed}|signals|{run_key}")
    flagged: dict[str, list] = {}
    for record in records:
        for name, value in record.signals.items():
            if value > 0:
                flagged.setdefault(name, []).append(record)
    picked = {name: rng.sample(found, min(PER_SIGNAL, len(found)))
              for name, found in sorted(flagged.items())}  # fmt: skip
    return picked, rng.sample(records, min(RANDOM, len(records)))


def read_verdicts(out: Path) -> dict[tuple[str, str, int, str], ReadingRecord]:
    path = out / READINGS
    if not path.exists():
        return {}
    found = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            made = ReadingRecord.model_validate(orjson.loads(line))
            found[made.key] = made
    return found


@register_study("signals")
class Signals(Study):
    title = "Are the samples triage flags worth reading?"
    source = "a question of maslab's own, about its triage signals"
    question = (
        "Of the samples each triage signal flags, what share does a reader mark as worth "
        "reading, against samples drawn at random?"
    )
    benchmark = "arith"
    methods = METHODS

    def sweep(self, options: StudyOptions, out: Path) -> dict[str, Any]:
        """The methods' runs; the reader's role is the study's, not theirs."""
        roles = tuple(r for r in options.model_roles if r.partition("=")[0] != READER_ROLE)
        return super().sweep(replace(options, model_roles=roles), out)

    async def after_runs(
        self, out: Path, runs: StudyRuns, options: StudyOptions, models: ModelPool
    ) -> None:
        reader = reader_of(options)
        done = read_verdicts(out)
        todo: list[tuple[str, RunResult, ResultRecord, Trace]] = []
        for (bench, method, model), run in sorted(runs.runs.items()):
            run_key = f"{bench}/{method}/{model}"
            by_signal, drawn = chosen(run_key, run.records, options.seed)
            wanted = {r.key: r for found in (*by_signal.values(), drawn) for r in found}
            unread = [r for key, r in sorted(wanted.items()) if (run_key, *key, reader) not in done]
            traces = RunStore(run.dir).traces_of(r.key for r in unread)  # one index per run
            paired = zip(unread, traces, strict=True)
            todo += [(run_key, run, record, trace) for record, (_, trace) in paired if trace]
        gate = asyncio.Semaphore(8)
        with locked(out), (out / READINGS).open("ab") as lines:

            async def one(run_key: str, run: RunResult, record: ResultRecord, trace: Trace) -> None:
                async with gate:
                    ctx = Context(reader, models=models, sample_id=record.task_id,
                                  repeat=record.repeat, seed=run.manifest.seed,
                                  sampling={"temperature": 0})  # fmt: skip
                    reading = await read(ctx, record, trace)
                usage = ctx.usage
                made = ReadingRecord(
                    run=run_key, task_id=record.task_id, repeat=record.repeat, reader=reader,
                    worth=reading.worth, reason=reading.reason, calls=usage.calls,
                    tokens=usage.used_tokens,
                )  # fmt: skip
                lines.write(orjson.dumps(made.model_dump()) + b"\n")  # one whole line each
                lines.flush()

            await asyncio.gather(*(one(*item) for item in todo))

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        verdicts = read_verdicts(runs.out)
        by_sample = {key[:3]: v for key, v in verdicts.items()}
        tables = [self._table(runs, model, by_sample) for model in runs.models]
        read_calls = sum(v.calls for v in verdicts.values())
        read_tokens = sum(v.tokens for v in verdicts.values())
        unreadable = sum(v.worth is None for v in verdicts.values())
        notes = (
            f"the reader: {len(verdicts)} samples read, {read_calls} calls, {read_tokens:,} "
            f"tokens (apart from the runs'); {unreadable} replies held no verdict (left out)",
        )
        return runs.analysis(tables, notes)

    def _table(
        self, runs: StudyRuns, model: str, verdicts: dict[tuple[str, str, int], ReadingRecord]
    ) -> Table:
        worth: dict[str, list[bool]] = {}
        for (bench, method, m), run in sorted(runs.runs.items()):
            if m != model:
                continue
            run_key = f"{bench}/{method}/{m}"
            by_signal, drawn = chosen(run_key, run.records, runs.options.seed)
            for name, found in (*by_signal.items(), (BASELINE, drawn)):
                for record in found:
                    seen = verdicts.get((run_key, *record.key))
                    if seen is not None and seen.worth is not None:
                        worth.setdefault(name, []).append(seen.worth)
        baseline = _share(worth.get(BASELINE, []))
        rows = []
        for name, found in sorted(worth.items(), key=lambda kv: kv[0] == BASELINE):
            share = _share(found)
            lift = Cell(note="—")
            if name != BASELINE and share is not None and baseline is not None:
                gap = _lift(share, baseline)
                lift = Cell(gap, verdict=sign_verdict(gap, 1.0))
            rows.append(Row(name, (
                Cell(note=str(len(found))),
                Cell(share) if share else Cell(note="none read"),
                lift,
            )))  # fmt: skip
        return Table(
            f"Worth reading, by signal, on {model}", ("read", "worth reading", "lift over random"),
            tuple(rows), what="share of the samples read, %; lift in percent points "
            "(its verdict: whether flagged samples are more often worth reading than random ones)",
        )  # fmt: skip


def _share(found: list[bool]) -> Estimate | None:
    if not found:
        return None
    low, high = wilson_interval(sum(found), len(found))
    return Estimate(sum(found) / len(found), low, high, len(found))


def _lift(share: Estimate, baseline: Estimate) -> Estimate:
    """``share`` − ``baseline``, its interval the normal one of two independent shares."""
    value = share.value - baseline.value
    half = Z95 * math.sqrt(
        share.value * (1 - share.value) / share.n
        + baseline.value * (1 - baseline.value) / baseline.n
    )
    return Estimate(value, max(-1.0, value - half), min(1.0, value + half), share.n + baseline.n)
