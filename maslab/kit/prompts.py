"""Prompt pieces more than one method asks with: the step-by-step trigger, the turn that shows an
agent the other agents' answers, and the turn that asks for a refinement from feedback.

Responses are cached by prompt: a change of wording here changes the prompts, and misses the
cache, of every method that uses the piece.
"""

from __future__ import annotations

from collections.abc import Sequence

from maslab.core.messages import Message
from maslab.core.task import Task


def cot_prompt(task: Task) -> str:
    """The task prompt plus the step-by-step instruction (zero-shot chain of thought)."""
    return (
        f"{task.prompt()}\n\nWork through the problem step by step, showing your reasoning, "
        "and only then state your final answer."
    )


def debate_prompt(task: Task, others: Sequence[Message]) -> str:
    """A debate turn: the other agents' answers as evidence, then the question again; a lone
    agent is asked to re-check its own previous answer instead."""
    if not others:
        return (
            "Go over your previous answer again and look for mistakes in the reasoning. "
            f"Then give your final answer to the question once more:\n\n{task.prompt()}"
        )
    shown = "\n\n".join(f"--- Answer from another agent ---\n{m.content.strip()}" for m in others)
    return (
        f"Other agents answered the same question:\n\n{shown}\n\n"
        "Use their reasoning as additional evidence: check it against your own, then give an "
        f"updated answer to the original question:\n\n{task.prompt()}"
    )


def refine_prompt(task: Task, attempts: Sequence[tuple[str, str]]) -> str:
    """A refinement turn: every earlier ``(answer, feedback on it)``, oldest first, then the
    request for an improved complete answer."""
    history = "\n\n".join(
        f"--- Attempt {i} ---\n{answer.strip()}\n\n--- Feedback on attempt {i} ---\n{fb.strip()}"
        for i, (answer, fb) in enumerate(attempts, 1)
    )
    return (
        f"Question:\n{task.prompt()}\n\nEarlier attempts at this question, each followed by "
        f"feedback on it:\n\n{history}\n\n"
        "Using the feedback, write an improved, complete answer to the question: fix every "
        "problem it points out, keep what was right, and reason step by step before stating "
        "your final answer."
    )
