"""Triage signals: cheap, structured attributes of one sample that point at the transcripts worth
reading (after "Signals: Trajectory Sampling and Triage for Agentic Interactions").

Each is computed from the sample's result record and trace alone (no model call) and stored in
the record's ``signals`` (name -> value) when the sample finishes: 0 means it did not fire, a
value above 0 that it did (a count, or a magnitude). The views of the trace are those of
:mod:`maslab.analysis.trajectory`: the agents' own messages, an aggregator's verdict left out.

- ``final_disagreement``: the agents that answered in the last round in which any agent answered
  gave different answers; the value is the number of distinct answers minus one.
- ``answer_flips``: an agent's answer changed from one round it answered in to the next; the
  value counts the changes over all agents.
- ``repetition``: an agent sent a message near-identical to one of its own earlier messages:
  the Jaccard similarity of the two messages' word 3-grams (lower-cased words; the whole text
  for messages under three words) is at least :data:`NEAR_IDENTICAL`; the value counts such
  messages.
- ``minority_consensus``: the sample's final answer
(:func:`maslab.analysis.trajectory.final_answer`) is
  held by fewer than half of the agents' answers in that last round (value 1).
- ``unparsed``: the evaluator found no answer in a sample that did not error (value 1).
- ``strict_flexible_disagree``: the evaluator's strict verdict (the answer in the instructed
  form only: :attr:`Score.strict <maslab.bench.evaluation.Score.strict>`) differs from its
  score, the flexible one (value 1): mostly a right answer not given in the asked form, or a
  hedge whose last number happens to be right; none where the evaluator records no strict
  verdict.
- ``budget_stop``: the sample's budget ended it (status ``budget``; value 1).
- ``retries``: requests the retry layer sent again (a 429, a 5xx, a timeout): over the trace's
  calls, their ``attempts`` beyond the first (traces from before attempts were recorded count
  none).
- ``failed_calls``: model calls that failed for good (``error`` set in the trace's calls: what
  the retry layer could not recover, so a method or a resume had to go on without it).
- ``truncated``: replies cut at ``max_tokens`` (``finish_reason`` "length" in the trace's calls,
  scoring included: :func:`truncated_calls`, the record's ``truncated_calls``); traces from
  before finish reasons were recorded count none.
- ``errors``: the sample errored (status ``error``; value 1).
- ``tool_failures``: tool results that are errors: messages of kind ``observation`` (how methods
  post what a tool returned) reading ``error: ...`` (:func:`maslab.kit.tools.run_tool`'s failures)
  or a sandbox status other than ``status: ok`` (a program that failed or timed out).
- ``program_calls_refused``: requests of the sample's sandboxed programs that
  :mod:`maslab.kit.bridge` refused (broke its rules, or abused the channel): the trace's
  ``program_calls_refused``.
- ``program_calls_failed``: calls of those programs that the model failed (the program got an
  error reply and went on; those in the ledger count in ``failed_calls`` too): the trace's
  ``program_calls_failed``. Like ``retries``, both count none in traces from before they were
  recorded.
- ``tool_errors``: calls on the sample's environment that errored (the trace's ``tools`` with
  ``error`` set: refused, or failed).
- ``unknown_function``: of those, the calls the environment refused as unknown: their result
  begins ``error: unknown function`` (:data:`UNKNOWN_FUNCTION`; the context's ``error:`` and
  the environment's message, as BFCL's gives it). The functions offered at each turn are not
  in the trace, so the environment's word is what tells an unknown function from a bad call.
- ``repeated_call``: an agent called the same function with the same arguments again within a
  turn and got the same result as before (nothing it did in between changed what the call
  gives); the value counts such calls.

- ``changed_after_solved``: calls that moved the environment's state away from the expected
  one after a turn had reached it (a solved turn undone), as the evaluator counted them while
  replaying the calls (``bfcl_state``: its ``details``' :data:`CHANGED_AFTER_SOLVED
  <maslab.bench.evaluation.CHANGED_AFTER_SOLVED>`); none where the evaluator does not count
  them (no environment, or scores from before it did).

The three signals before it read the trace's ``tools`` (none without an environment, and in
traces from before they were recorded).

``final_disagreement``, ``answer_flips`` and ``minority_consensus`` read the answers extracted
from the messages; traces recorded before those were stored cannot give them, and
:func:`signals` leaves them out rather than report 0.

The run-level ``token_outlier`` is computed when a run is ranked, not stored: the robust
z-score of a sample's x = ln(1 + tokens used) against the run's, 0.6745·(x − median)/MAD
(Iglewicz and Hoaglin), or 0.7979·(x − median)/mean absolute deviation when the MAD is 0. It
fires when that exceeds :data:`OUTLIER_Z` and the sample also used more than twice the median
sample's tokens (so a run whose samples barely vary flags none for a small excess); the value is
the z-score.

:func:`rank` orders samples by how many distinct signals fired (values of different signals are
counts and magnitudes of different kinds, so they are not added), then by task id and repeat.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from maslab.analysis import trajectory
from maslab.analysis.trajectory import Turn
from maslab.bench.evaluation import CHANGED_AFTER_SOLVED
from maslab.errors import ConfigError
from maslab.store.records import ResultRecord, Trace, TraceMessage, TraceTool

SIGNALS: dict[str, str] = {
    "final_disagreement": "agents answering in the last round gave different answers",
    "answer_flips": "an agent changed its answer between rounds",
    "repetition": "an agent sent a message near-identical to an earlier one of its own",
    "minority_consensus": "the final answer is held by fewer than half of the agents",
    "unparsed": "the evaluator found no answer",
    "strict_flexible_disagree": "the strict verdict (instructed form only) differs from the score",
    "budget_stop": "the sample's budget ended it",
    "retries": "requests the retry layer sent again",
    "failed_calls": "model calls that failed for good",
    "truncated": "replies cut at max_tokens",
    "errors": "the sample errored",
    "tool_failures": "tool results that are errors",
    "program_calls_refused": "requests of the sample's programs that the bridge refused",
    "program_calls_failed": "calls of the sample's programs that the model failed",
    "tool_errors": "calls on the sample's environment that errored",
    "unknown_function": "calls the environment refused as an unknown function",
    "repeated_call": "a call made again within a turn with the same arguments and result",
    CHANGED_AFTER_SOLVED: "a call undid a turn already solved (moved the state away from it)",
    "token_outlier": "far more tokens than the run's typical sample (robust z of log tokens)",
}
ANSWER_SIGNALS = ("final_disagreement", "answer_flips", "minority_consensus")
"""The signals that need the trace's extracted answers."""
NEAR_IDENTICAL = 0.9
OUTLIER_Z = 3.5

_WORD = re.compile(r"\w+")
_SHINGLE = 3
_TOOL_FAILURE = re.compile(r"error:|status: (?!ok\n|ok$)")  # run_tool's, the sandbox's
UNKNOWN_FUNCTION = "error: unknown function"
"""How the result of a call the environment refused as unknown begins (any case)."""


def signals(record: ResultRecord, trace: Trace | None) -> dict[str, float]:
    """Every per-sample signal that ``record`` and ``trace`` (None: no trace) can give, as
    name -> value in :data:`SIGNALS` order; those they cannot give are absent."""
    details = record.score.details if record.score is not None else {}
    strict = record.score.strict if record.score is not None else None
    found = {
        "unparsed": float(record.unparsed),
        "strict_flexible_disagree": float(strict is not None and strict.correct != record.correct),
        "budget_stop": float(record.status == "budget"),
        "errors": float(record.status == "error"),
        CHANGED_AFTER_SOLVED: float(details.get(CHANGED_AFTER_SOLVED, 0)),
    }
    if trace is not None:
        found["retries"] = float(sum(c.attempts - 1 for c in trace.calls))
        found["failed_calls"] = float(sum(c.error is not None for c in trace.calls))
        found["truncated"] = float(truncated_calls(trace))
        found["tool_failures"] = float(sum(map(_tool_failed, trace.messages)))
        found["repetition"] = float(_repetitions(trajectory.turns(trace)))
        found["program_calls_refused"] = float(trace.program_calls_refused)
        found["program_calls_failed"] = float(trace.program_calls_failed)
        found["tool_errors"] = float(sum(t.error for t in trace.tools))
        found["unknown_function"] = float(sum(map(_unknown_function, trace.tools)))
        found["repeated_call"] = float(_repeated_calls(trace.tools))
    if trace is not None and trajectory.has_answers(trace):
        finals = list(trajectory.final_answers(trace).values())
        final = trajectory.final_answer(trace, record.answer)
        found["final_disagreement"] = float(max(len(set(finals)) - 1, 0))
        found["answer_flips"] = float(_flips(trajectory.answer_sequences(trace).values()))
        found["minority_consensus"] = float(
            final is not None and 2 * finals.count(final) < len(finals)
        )
    return {name: found[name] for name in SIGNALS if name in found}


def truncated_calls(trace: Trace) -> int:
    """The trace's calls whose reply was cut at ``max_tokens`` (``finish_reason`` "length")."""
    return sum(c.finish_reason == "length" for c in trace.calls)


def _tool_failed(message: TraceMessage) -> bool:
    return message.kind == "observation" and _TOOL_FAILURE.match(message.content) is not None


def _unknown_function(tool: TraceTool) -> bool:
    return tool.error and tool.result[: len(UNKNOWN_FUNCTION)].lower() == UNKNOWN_FUNCTION


def _repeated_calls(tools: Iterable[TraceTool]) -> int:
    """Calls whose turn, agent, function, arguments and result are those of an earlier call."""
    seen: set[tuple[int, str | None, str, str, str]] = set()
    repeated = 0
    for t in tools:
        key = (t.turn, t.agent, t.name, json.dumps(t.arguments, sort_keys=True), t.result)
        repeated += key in seen
        seen.add(key)
    return repeated


def _flips(sequences: Iterable[Sequence[str]]) -> int:
    return sum(a != b for answers in sequences for a, b in itertools.pairwise(answers))


def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    if len(words) < _SHINGLE:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(zip(*(words[i:] for i in range(_SHINGLE)), strict=False))


def _near_identical(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> bool:
    """Whether two messages' shingle sets have a Jaccard similarity of :data:`NEAR_IDENTICAL`
    (never when one set is that much smaller than the other, so most pairs take no set work)."""
    small, large = sorted((len(a), len(b)))
    if not small or small < NEAR_IDENTICAL * large:
        return False
    return len(a & b) >= NEAR_IDENTICAL * len(a | b)


def _repetitions(turns: Iterable[Turn]) -> int:
    """Messages near-identical to an earlier message of the same agent (an agent's first
    message is compared with nothing, so a one-turn agent takes no set work)."""
    earlier: dict[str, list[str]] = {}
    shingles: dict[str, frozenset[tuple[str, ...]]] = {}

    def of(text: str) -> frozenset[tuple[str, ...]]:
        if text not in shingles:
            shingles[text] = _shingles(text)
        return shingles[text]

    repeated = 0
    for turn in turns:
        seen = earlier.setdefault(turn.agent, [])
        repeated += bool(seen) and any(_near_identical(of(turn.content), of(t)) for t in seen)
        seen.append(turn.content)
    return repeated


def sample_signals(record: ResultRecord, trace: Trace | None) -> dict[str, float]:
    """The signals stored with ``record``, or, for a record from before they were stored,
    those computed from it and ``trace``."""
    return dict(record.signals) if record.signals else signals(record, trace)


def token_outliers(tokens: Sequence[float]) -> list[float]:
    """Each sample's ``token_outlier`` value among ``tokens`` (the run's): its robust z-score
    where it fires, else 0."""
    logs = [math.log1p(t) for t in tokens]
    if len(logs) < 2:
        return [0.0] * len(logs)
    median = statistics.median(logs)
    deviations = [abs(x - median) for x in logs]
    if mad := statistics.median(deviations):
        scale = mad / 0.6745
    elif mean := statistics.fmean(deviations):
        scale = mean / 0.7979
    else:
        return [0.0] * len(logs)
    z = [(x - median) / scale for x in logs]
    return [
        round(v, 2) if v > OUTLIER_Z and x - median > math.log(2) else 0.0
        for x, v in zip(logs, z, strict=True)
    ]


@dataclass(frozen=True)
class Flagged:
    """One sample and its signals, the run-level ``token_outlier`` included."""

    record: ResultRecord
    signals: dict[str, float] = field(default_factory=dict)

    @cached_property  # ordering a run asks each sample's score many times
    def fired(self) -> dict[str, float]:
        return {name: value for name, value in self.signals.items() if value > 0}

    @property
    def score(self) -> int:
        """How many distinct signals fired."""
        return len(self.fired)

    @property
    def not_computable(self) -> list[str]:
        return [name for name in SIGNALS if name not in self.signals]


def assess(samples: Iterable[tuple[ResultRecord, Trace | None]]) -> list[Flagged]:
    """Every sample (a record and its trace, None if it needs none or has none) with its
    signals; ``token_outlier`` compares its tokens with all of ``samples``."""
    samples = list(samples)
    outliers = token_outliers([record.tokens_used for record, _ in samples])
    return [
        Flagged(record, {**sample_signals(record, trace), "token_outlier": z})
        for (record, trace), z in zip(samples, outliers, strict=True)
    ]


def order(
    flagged: Iterable[Flagged], signal: str | None = None, top: int | None = None
) -> list[Flagged]:
    """The samples on which ``signal`` (None: any signal) fired, the most flagged first: by
    score, or by ``signal``'s value; ties by task id and repeat. ``top`` keeps the first ones."""
    if signal is not None and signal not in SIGNALS:
        raise ConfigError(f"unknown signal {signal!r}; the signals are {', '.join(SIGNALS)}")

    def weight(f: Flagged) -> float:
        return f.score if signal is None else f.signals.get(signal, 0.0)

    chosen = sorted((f for f in flagged if weight(f) > 0), key=lambda f: (-weight(f), f.record.key))
    return chosen if top is None else chosen[:top]


def rank(
    samples: Iterable[tuple[ResultRecord, Trace | None]],
    signal: str | None = None,
    top: int | None = None,
) -> list[Flagged]:
    """:func:`order` over :func:`assess` of ``samples``."""
    return order(assess(samples), signal, top)
