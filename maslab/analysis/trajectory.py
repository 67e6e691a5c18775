"""One sample's trajectory read from its trace: who answered what, round by round.

A trace (:class:`maslab.store.records.Trace`, written by :func:`maslab.harness.samples.trace`)
holds the transcript's ``messages`` and, since issue 15, ``answers``: the answer extracted from
each message the way the run's task type extracts (:func:`maslab.kit.aggregation.answer_key`),
None where there is none. Traces written before that lack ``answers``: :func:`has_answers`
tells, and every view below then reads as if no message had an answer.

The views count only the agents' own messages: those whose sender made a model call in the
trace (a tool result, test feedback or an environment event that a method posted is not an
agent's answer), every message when the trace records no calls. An aggregator's verdict (kind
``aggregate``) is the decision over the agents' answers, not one of them, so it is left out too.
A message without a round belongs to the round of the message before it (round 0 when it comes
first): a method that numbers no rounds is one round.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from maslab.store.records import Trace

__all__ = [
    "AGGREGATE", "Trace", "Turn", "agents", "answer_sequences", "final_answer", "final_answers",
    "has_answers", "message_answers", "round_answers", "turns", "vote_tally",
]  # fmt: skip

AGGREGATE = "aggregate"


@dataclass(frozen=True)
class Turn:
    """One agent message: its position in the transcript, sender, round, text and answer."""

    index: int
    agent: str
    round: int
    content: str
    answer: str | None


def has_answers(trace: Trace | None) -> bool:
    """Whether ``trace`` holds the extracted answer of each message."""
    return trace is not None and trace.answers is not None


def message_answers(trace: Trace) -> list[str | None]:
    """The extracted answer of each message (all None for traces without them)."""
    answers = trace.answers
    if answers is None or len(answers) != len(trace.messages):
        return [None] * len(trace.messages)
    return list(answers)


def agents(trace: Trace) -> set[str] | None:
    """The senders that made a model call; None when the trace records no calls (then every
    sender counts as an agent)."""
    callers = {c.agent for c in trace.calls if c.agent}
    return callers or None


def turns(trace: Trace) -> list[Turn]:
    """The agents' messages in transcript order, each with its round resolved."""
    speakers = agents(trace)
    found: list[Turn] = []
    current = 0
    for i, (m, answer) in enumerate(zip(trace.messages, message_answers(trace), strict=True)):
        if m.round is not None:
            current = m.round
        if m.kind == AGGREGATE or (speakers is not None and m.sender not in speakers):
            continue
        found.append(Turn(i, m.sender, current, m.content, answer))
    return found


def round_answers(trace: Trace) -> dict[int, dict[str, str | None]]:
    """Round -> agent -> its last extracted answer in that round (None if it gave none), the
    rounds in ascending order, the agents in the order they first spoke in the round."""
    rounds: dict[int, dict[str, str | None]] = {}
    for turn in sorted(turns(trace), key=lambda t: t.round):  # stable: transcript order kept
        said = rounds.setdefault(turn.round, {})
        if turn.answer is not None or turn.agent not in said:
            said[turn.agent] = turn.answer
    return rounds


def answer_sequences(trace: Trace) -> dict[str, list[str]]:
    """Agent -> its answer in each round it gave one, in round order."""
    sequences: dict[str, list[str]] = {}
    for said in round_answers(trace).values():
        for agent, answer in said.items():
            if answer is not None:
                sequences.setdefault(agent, []).append(answer)
    return sequences


def final_answers(trace: Trace) -> dict[str, str]:
    """Agent -> its answer in the last round in which any agent gave one ({} if none did)."""
    for said in reversed(round_answers(trace).values()):
        answered = {agent: answer for agent, answer in said.items() if answer is not None}
        if answered:
            return answered
    return {}


def final_answer(trace: Trace, answer: str | None) -> str | None:
    """The extracted form of the sample's final ``answer``: that of the last message whose text
    it is (an agent's response a vote chose, an aggregator's verdict), else the first most
    common of :func:`final_answers` (what a majority vote picks)."""
    if answer is not None:
        answers = message_answers(trace)
        for m, key in zip(reversed(trace.messages), reversed(answers), strict=True):
            if key is not None and m.content == answer:
                return key
    tally = vote_tally(final_answers(trace).values())
    return tally[0][0] if tally else None


def vote_tally(answers: Iterable[str | None]) -> list[tuple[str, int]]:
    """Each distinct answer with how many hold it, most first (ties in order of first
    appearance); None abstains."""
    counts: dict[str, int] = {}
    for answer in answers:
        if answer is not None:
            counts[answer] = counts.get(answer, 0) + 1
    return sorted(counts.items(), key=lambda item: -item[1])  # sorted is stable
