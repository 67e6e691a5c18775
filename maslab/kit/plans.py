"""Plans of function calls, for the methods where a planner writes steps and another agent
carries them out: the plan as a structured reply, the functions as a planner reads them, and an
executor's prompt for each step.

An agent that keeps its history through an episode reads the list of functions once, at the
first turn (and again when the list changes, as when a turn adds functions): :func:`functions_part`
asks :meth:`Agent.has_read <maslab.core.agents.Agent.has_read>`, so a long episode's prompts do
not carry the list once per turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from maslab.core.agents import Agent
from maslab.kit.acting import Function
from maslab.kit.structured import Reply


class Plan(Reply):
    """A planner's JSON reply: the steps, in order."""

    steps: list[Annotated[str, Field(description="a step")]]


WHOLE_REQUEST = "Carry out the whole request."
"""The one step of a plan that could not be read (the executor's prompt gives the request)."""


def steps_of(plan: Plan | None) -> list[str]:
    """A parsed plan's non-empty steps (``[]``: no plan, or no steps)."""
    return [s.strip() for s in plan.steps if s.strip()] if plan is not None else []


def catalogue(functions: Sequence[Function]) -> str:
    """The functions as a planner reads them: name and description, one per line."""
    return "\n".join(f"- {f['name']}: {f.get('description', '')}" for f in functions)


def functions_part(agent: Agent, functions: Sequence[Function]) -> str:
    """The prompt's list of functions for ``agent``, ending in a blank line; ``""`` when its
    history already holds this list (or there are none)."""
    part = f"Functions:\n{catalogue(functions)}\n\n"
    return "" if not functions or agent.has_read(part) else part


def listed(steps: Sequence[str]) -> str:
    """Steps as a numbered list."""
    return "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))


def step_prompt(request: str, plan: Sequence[str], index: int) -> str:
    """An executor's prompt for step ``index`` (1-based) of ``plan``; the first also gives the
    request and the whole plan."""
    step = f"Step {index} of {len(plan)}: {plan[index - 1]}"
    if index > 1:
        return f"{step}\n\nCarry out this step with the functions, using the earlier results."
    return (
        f"Request:\n{request}\n\nPlan:\n{listed(plan)}\n\n{step}\n\nCarry out this step with "
        "the functions, taking its inputs from the request and the earlier results."
    )
