"""Plan debate: planners propose plans for each turn, debate them, a judge picks one, and an
executor carries its steps out with the functions.

Papers: the debate is Du et al., "Improving Factuality and Reasoning in Language Models through
Multiagent Debate" (arXiv 2305.14325): several agents answer, then over rounds each reads the
others' answers and revises its own. Plan-then-execute is Octo-planner (Chen et al.,
"Octo-planner: On-device Language Model for Planner-Action Agents", arXiv 2406.18082): a
planner splits the request into steps, an action agent carries them out one by one. Debating the
plan before executing it is our combination (see Deviations).

Algorithm, at each turn of the episode (:meth:`maslab.core.context.Context.episode`), with the
turn's functions F, P = ``planners``, R = ``rounds``, N = ``max_steps``:

1. The P planners each write a :class:`~maslab.kit.plans.Plan` of 1..N steps from the turn's
   message and F (names and descriptions), concurrently.
2. R debate rounds: each planner reads the others' latest plans, in planner order (whatever the
   order they were written in), and writes its plan again (revised or kept), concurrently.
3. The judge reads the request, F and the P final plans and picks one (a :class:`Choice`, the
   plan's number). A reply without a valid number picks the first plan (``judge_fallback`` in
   the turn's metadata).
4. The executor works the chosen plan's steps in order, one :func:`maslab.kit.acting.act` per
   step (at most ``step_replies`` replies each: it reads its calls' results and may call
   again). Its history runs through every step and turn.

Every agent keeps its history through the episode, so F is listed to a planner or the judge
at the first turn and again only when it changes. On a task whose tools are only declared (no
environment) the first calls the executor makes are the answer, as JSON (``[]``: none), and the
steps after them, and the later turns, are not taken. A turn without functions (a task without
tools) is one executor reply: no plans, no debate, no judge.

LLM calls per turn: P + P·R + 1 + Σ_i r_i, with n ≤ N the chosen plan's steps and
1 ≤ r_i ≤ ``step_replies`` the replies of step i; so ≤ P + P·R + 1 + n·``step_replies``, and with
the default ``step_replies`` = 1 exactly P + P·R + 1 + n (defaults P = 2, R = 1: 5 + n).
Declared tools only: P + P·R + 1 + the replies of the steps up to the first that calls. A turn
without functions: 1. An episode: the sum over its turns.

Budget stop: on an environment the calls made so far are the answer; on declared tools nothing
was called yet (``[]``).

Deviations:
- Du et al. debate final answers and aggregate them (by the agents' convergence); here the
  debate is over plans and a judge picks one, which an executor then carries out: the
  combination with Octo-planner's plan-then-execute is ours.
- Octo-planner's planner is fine-tuned and has internalised F; here F's names and descriptions
  are in the planners' and the judge's prompts, and the plan is a JSON list of steps.
- Defensive parsing: a plan longer than N steps is cut to N; a first plan that cannot be parsed
  becomes the single step "Carry out the whole request.", and a revision that cannot be parsed
  keeps the planner's plan before it (both recorded in the metadata).
- A turn with no new message (one that only adds functions) is planned from our own line saying
  that more functions are available. The prompts are ours.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from itertools import permutations
from typing import Any, ClassVar

from pydantic import Field

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.episode import calls_json
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.acting import Function, act
from maslab.kit.plans import (
    WHOLE_REQUEST,
    Plan,
    functions_part,
    listed,
    step_prompt,
    steps_of,
)
from maslab.kit.structured import Reply, ask

PLANNER, JUDGE, EXECUTOR = "planner", "judge", "executor"
PLANNER_SYSTEM = (
    "You plan how to carry out a user's request with the functions you are shown, together "
    "with other planners. Another agent carries the plan out, one step at a time."
)
JUDGE_SYSTEM = (
    "You read several plans for carrying out a user's request with functions and pick the one "
    "most likely to carry it out fully and correctly, calling only functions that exist."
)
EXECUTOR_SYSTEM = (
    "You carry out a plan, one step at a time, by calling the functions you are offered. Read "
    "each result (an error too) before going on, and call no function you were not offered."
)


class Choice(Reply):
    """The judge's JSON reply: the number of the plan it picks."""

    plan: int = Field(description="the number of the chosen plan")


def planner_names(count: int) -> list[str]:
    return [f"{PLANNER}_{i}" for i in range(1, count + 1)]


def plan_prompt(request: str, functions: str, max_steps: int) -> str:
    """A planner's first prompt at a turn; ``functions``: the list of functions
    (:func:`~maslab.kit.plans.functions_part`), empty when it has read this list already."""
    return (
        f"{functions}Request:\n{request}\n\n"
        f"Plan how to carry out the request in 1 to {max_steps} steps. Each step is a short "
        "instruction that names the function to call and its inputs; a step may use the results "
        "of earlier steps."
    )


def revise_prompt(others: Sequence[tuple[str, Sequence[str]]]) -> str:
    """A debate round's prompt: the other planners' latest plans, in planner order."""
    shown = "\n\n".join(f"Plan of {name}:\n{listed(steps)}" for name, steps in others)
    return (
        f"The other planners' plans:\n\n{shown}\n\nUsing these as additional advice, check your "
        "plan against them and give your plan again: revised where theirs show a mistake or a "
        "missing step, unchanged otherwise."
    )


def judge_prompt(request: str, functions: str, plans: Sequence[list[str]]) -> str:
    shown = "\n\n".join(f"Plan {i}:\n{listed(steps)}" for i, steps in enumerate(plans, 1))
    return (
        f"{functions}Request:\n{request}\n\n{shown}\n\n"
        f"Pick the plan (1 to {len(plans)}) that best carries out the request."
    )


@register_method("plan_debate")
class PlanDebate(Method):
    """Per turn: planners propose plans and debate them, a judge picks one, an executor carries
    its steps out with the functions (multiagent debate over an Octo-planner plan)."""

    roles = (PLANNER, JUDGE, EXECUTOR)
    paper = (
        "Du et al., arXiv 2305.14325 (multiagent debate) + Octo-planner, arXiv 2406.18082 "
        "(plan then execute); the combination is ours"
    )
    category = "debate over a plan, then execution (planners + judge + executor)"
    calls: ClassVar[str] = (
        "per turn P + P·R + 1 + Σ step replies ≤ P + P·R + 1 + n·step_replies (P planners, R "
        "rounds, n ≤ max_steps chosen steps; defaults: exactly 5 + n); declared tools only: "
        "P + P·R + 1 + the steps' replies up to the first that calls; no tools: 1 per turn"
    )

    class Config(MethodConfig):
        planners: int = Field(2, ge=1, description="Planners (P), each proposing a plan.")
        rounds: int = Field(
            1, ge=0, description="Debate rounds (R): each planner revises after the others'."
        )
        max_steps: int = Field(5, ge=1, description="Steps a plan has at most (N).")
        step_replies: int = Field(
            1, ge=1, description="The executor's replies per step at most (its tool loop)."
        )

    config: Config

    def structure(self) -> Topology:
        """Planners all-to-all (when they debate), every planner to the judge, the judge to the
        executor."""
        names = planner_names(self.config.planners)
        debate = list(permutations(names, 2)) if self.config.rounds else []
        return Topology.from_edges(
            [*debate, *((name, JUDGE) for name in names), (JUDGE, EXECUTOR)], name="plan_debate"
        )

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        planners = [
            ctx.agent(name, role=PLANNER, system=PLANNER_SYSTEM)
            for name in planner_names(cfg.planners)
        ]
        judge = ctx.agent(JUDGE, system=JUDGE_SYSTEM)
        executor = ctx.agent(EXECUTOR, system=EXECUTOR_SYSTEM)
        declared = ctx.environment is None and bool(task.tools)
        if declared:  # a budget stop before the executor calls: no calls
            ctx.propose("[]")
        turns: list[dict[str, Any]] = []
        answer = ""
        async for turn in ctx.episode(task):
            request = turn.request
            if not turn.functions:  # nothing to plan with: one reply
                acted = await act(executor, request, (), max_steps=1, round=turn.index)
                answer = acted.message.content
                turns.append({"plans": [], "steps": []})
                continue
            record: dict[str, Any] = {}
            turns.append(record)
            plan = await self.debate(planners, judge, request, turn.functions, turn.index, record)
            done: list[dict[str, Any]] = []
            record["steps"] = done
            for i in range(1, len(plan) + 1):
                acted = await act(
                    executor,
                    step_prompt(request, plan, i),
                    turn.functions,
                    max_steps=cfg.step_replies,
                    round=turn.index,
                    kind="step",
                )
                made = [{"name": c.name, "arguments": c.arguments} for c in acted.calls]
                done.append({"step": plan[i - 1], "calls": made})
                answer = acted.message.content
                if declared and acted.calls:  # the first calls are the answer
                    answer = calls_json((c.name, c.arguments) for c in acted.calls)
                    return Solution(answer=answer, metadata={"turns": turns})
        return Solution(answer="[]" if declared else answer, metadata={"turns": turns})

    async def debate(
        self,
        planners: Sequence[Agent],
        judge: Agent,
        request: str,
        functions: Sequence[Function],
        index: int,
        record: dict[str, Any],
    ) -> list[str]:
        """Plans, debate rounds and the judge's pick: the chosen plan's steps. ``record`` gets
        every round's plans, the fallbacks and the choice."""
        cfg = self.config

        async def first(agent: Agent) -> list[str] | None:
            prompt = plan_prompt(request, functions_part(agent, functions), cfg.max_steps)
            _, plan = await ask(agent, prompt, Plan, round=index, kind="plan")
            return steps_of(plan)[: cfg.max_steps] or None

        async def revise(agent: Agent, latest: Sequence[list[str]]) -> list[str] | None:
            others = [(p.name, steps) for p, steps in zip(planners, latest, strict=True)]
            shown = [(name, steps) for name, steps in others if name != agent.name]
            _, plan = await ask(agent, revise_prompt(shown), Plan, round=index, kind="revision")
            return steps_of(plan)[: cfg.max_steps] or None

        written = await asyncio.gather(*(first(p) for p in planners))
        fallbacks = [[steps is None for steps in written]]
        plans = [steps or [WHOLE_REQUEST] for steps in written]
        history = [plans]
        for _ in range(cfg.rounds):
            revised = await asyncio.gather(*(revise(p, plans) for p in planners))
            fallbacks.append([steps is None for steps in revised])
            plans = [new or old for new, old in zip(revised, plans, strict=True)]
            history.append(plans)
        _, choice = await ask(
            judge,
            judge_prompt(request, functions_part(judge, functions), plans),
            Choice,
            round=index,
            kind="choice",
        )
        valid = choice is not None and 1 <= choice.plan <= len(plans)
        chosen = choice.plan - 1 if valid and choice is not None else 0
        record.update(plans=history, plan_fallbacks=fallbacks, chosen=chosen,
                      judge_fallback=not valid)  # fmt: skip
        return plans[chosen]
