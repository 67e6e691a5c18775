"""What a run's traces add up to, read in one streaming pass for the report's run-level
pictures: each agent's share of the tokens, per-round agreement and accuracy, the distinct
topologies the samples ran on, and the triage signals of records stored without them.

Only the running totals are kept (and at most :data:`MAX_TOPOLOGIES` topologies), besides an
old record's signals (the few numbers a newer record stores itself), so no trace is held.
Answers are the agents' as :mod:`maslab.analysis.trajectory` reads them from a trace's ``answers``
(one
extracted answer per message); traces without it add nothing to the rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from maslab.analysis.trajectory import final_answer, round_answers, vote_tally
from maslab.analysis.triage import sample_signals
from maslab.core.answers import AnswerType, normalize_answer
from maslab.store.records import Key, ResultRecord, Trace
from maslab.store.run_store import RunStore

MAX_TOPOLOGIES = 6
"""The most distinct topologies a run's section draws; a sample on another one draws its own."""

_GOLD_TYPES: tuple[AnswerType, ...] = ("number", "math", "choice", "text")


@dataclass
class AgentShare:
    """One agent's model calls in a run and the tokens they used (prompt and completion,
    spent or replayed from the cache)."""

    calls: int = 0
    tokens: int = 0


@dataclass
class RoundFigures:
    """One round over a run's samples: ``samples`` had an answering agent in it, ``correct``
    of them a right majority answer; ``panels`` had two or more answering agents, ``agree`` of
    them all with the same answer."""

    samples: int = 0
    correct: int = 0
    panels: int = 0
    agree: int = 0


@dataclass
class TraceFigures:
    """A run's traces in aggregate (see the module docstring)."""

    agents: dict[str, AgentShare] = field(default_factory=dict)
    rounds: dict[int, RoundFigures] = field(default_factory=dict)
    topologies: dict[bytes, int] = field(default_factory=dict)
    """A topology (as its JSON) -> how many samples ran on it; the first few distinct only."""
    signals: dict[Key, dict[str, float]] = field(default_factory=dict)
    """The triage signals of the records stored without them (recorded before signals were),
    computed from their traces as ``maslab triage`` computes them."""

    @property
    def round_based(self) -> bool:
        """Whether the samples' answers span two or more rounds."""
        return len(self.rounds) > 1

    def add(self, record: ResultRecord, trace: Trace | None) -> None:
        """Count in ``record`` and its trace (None: it has none)."""
        if not record.signals:
            self.signals[record.key] = sample_signals(record, trace)
        if trace is None:
            return
        for call in trace.calls:
            if call.purpose != "method":
                continue  # an evaluator's judge is no agent of the method
            share = self.agents.setdefault(str(call.agent), AgentShare())
            share.calls += 1
            share.tokens += call.tokens
        if trace.topology is not None:
            spec = trace.topology.as_json()
            if spec in self.topologies or len(self.topologies) < MAX_TOPOLOGIES:
                self.topologies[spec] = self.topologies.get(spec, 0) + 1
        if trace.answers is not None:
            self._add_rounds(record, trace)

    def _add_rounds(self, record: ResultRecord, trace: Trace) -> None:
        final = final_answer(trace, record.answer)
        gold = _gold_keys(record.gold)
        for number, agents in round_answers(trace).items():
            answers = list(agents.values())
            figures = self.rounds.setdefault(number, RoundFigures())
            figures.samples += 1
            tally = vote_tally(answers)
            if tally and _right(tally[0][0], final, record, gold):
                figures.correct += 1
            if len(answers) > 1:
                figures.panels += 1
                figures.agree += int(None not in answers and len(set(answers)) == 1)


def trace_figures(store: RunStore, records: Sequence[ResultRecord]) -> TraceFigures:
    """The figures of ``records``' traces, read one at a time in the order they lie on disk
    (then those of the records without a trace)."""
    figures = TraceFigures()
    index = store.index()
    by_key = {r.key: r for r in records}
    keys = sorted((key for key in by_key if key in index), key=index.__getitem__)
    for key, trace in store.traces_of(keys, index):
        figures.add(by_key[key], trace)
    for record in records:
        if record.key not in index:
            figures.add(record, None)
    return figures


def _gold_keys(gold: str | None) -> set[str]:
    """The gold answer normalised as each answer type would normalise it."""
    return set() if gold is None else {normalize_answer(gold, t) for t in _GOLD_TYPES}


def _right(answer: str, final: str | None, record: ResultRecord, gold: set[str]) -> bool:
    """Whether ``answer`` is right: as the sample was scored when it is the sample's own
    ``final`` answer; wrong when that final answer was scored right and this differs; else
    when it equals the gold answer normalised (so evaluators' finer equivalences, such as
    math-verify's, count only through the sample's own verdict)."""
    if final is not None:
        if answer == final:
            return record.correct
        if record.correct:
            return False
    return answer in gold
