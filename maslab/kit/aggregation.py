"""Turning several agents' answers into one: majority vote over extracted answers, or an LLM."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from maslab.core.answers import Vote, majority_vote, normalize_answer
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.task import Solution, Task


@dataclass(frozen=True)
class Decision:
    """The chosen response and how the vote went."""

    response: str
    vote: Vote
    extracted: tuple[str | None, ...]


def answer_key(task: Task, text: str) -> str | None:
    """The normalised answer extracted from ``text`` (what votes compare), or None if none."""
    answer = task.answer_in(text)
    return None if answer is None else normalize_answer(answer, task.answer_type)


def majority_decision(task: Task, responses: Sequence[str]) -> Decision:
    """Vote over the answers extracted from ``responses``; return the first winning response.

    When no response has an extractable answer, the first response stands (it is still scored,
    and scores as unparsed if the evaluator cannot read it either).
    """
    if not responses:
        raise ValueError("majority_decision needs at least one response")
    extracted = tuple(task.answer_in(response) for response in responses)
    vote = majority_vote(extracted, task.answer_type)
    if vote.winner is None:
        return Decision(responses[0], vote, extracted)
    target = normalize_answer(vote.winner, task.answer_type)
    for response, answer in zip(responses, extracted, strict=True):
        if answer is not None and normalize_answer(answer, task.answer_type) == target:
            return Decision(response, vote, extracted)
    raise AssertionError("the winner comes from one of the responses")


def propose_vote(ctx: Context, task: Task, responses: Sequence[str], **metadata: Any) -> Decision:
    """Vote over ``responses`` (:func:`majority_decision`) and propose the winning response as
    the best answer so far (what a budget stop scores), with ``metadata`` and the vote counts."""
    decision = majority_decision(task, responses)
    ctx.propose(decision.response, **metadata, votes=decision.vote.counts)
    return decision


async def llm_aggregate(
    ctx: Context, task: Task, responses: Sequence[str], *, round: int | None = None
) -> Message:
    """One extra call: an aggregator reads every response and states the final answer."""
    blocks = "\n\n".join(f"--- Response {i} ---\n{r.strip()}" for i, r in enumerate(responses, 1))
    prompt = (
        f"{task.prompt()}\n\nSeveral agents answered this question independently:\n\n{blocks}\n\n"
        "Weigh their reasoning, decide which answer is right, and state that single final "
        "answer in the required format."
    )
    return await ctx.agent("aggregator").reply(prompt, round=round, kind="aggregate")


async def decide(
    ctx: Context, task: Task, responses: Sequence[str], how: str, *, round: int | None = None
) -> Solution:
    """The final solution from several responses: ``"majority"`` vote or one ``"llm"`` call.

    Args:
        ctx: The sample's context (the ``llm`` aggregator's call goes through it).
        task: The task (its answer type decides how answers are extracted and compared).
        responses: The agents' responses, in agent order (ties go to the earliest).
        how: ``"majority"`` or ``"llm"``.
        round: The aggregator's round, for ``"llm"``.
    """
    if how == "llm":
        verdict = await llm_aggregate(ctx, task, responses, round=round)
        return Solution(answer=verdict.content, metadata={"aggregate": "llm"})
    decision = majority_decision(task, responses)
    return Solution(
        answer=decision.response,
        metadata={
            "aggregate": "majority",
            "extracted": list(decision.extracted),
            "votes": decision.vote.counts,
        },
    )
