"""Octo-planner: a planner splits each request into steps, an action agent carries them out with
the functions, step by step.

Chen, Li, Guo, Shen. "Octo-planner: On-device Language Model for Planner-Action Agents".
arXiv:2406.18082 (2024).

Algorithm, at each turn of the episode (:meth:`maslab.core.context.Context.episode`), with the
turn's functions F (at most N = ``max_steps`` steps; chain planner -> action):

1. The planner reads the turn's message and F (names and descriptions; listed at the first
   turn and again only when F changes) and writes a plan of 1..N steps in natural language (a
   :class:`~maslab.kit.plans.Plan`). It keeps its history through the episode.
2. For step i = 1..n, the action agent works the step in one tool loop
   (:func:`maslab.kit.acting.act`, at most ``step_replies`` replies): it calls functions of F,
   the calls run in order through the sample's tool door and their results come back. Its
   history runs through every step and turn, so a step reads the results of the earlier ones.
   The step's observation is the result of its last call.
3. The turn ends after the last step. On an environment the answer is what was called, turn by
   turn; on a task whose tools are only declared (no environment) it is the first calls the
   action agent makes, as JSON (``[]``: none), and the steps after them are not taken; on an
   ordinary task F is the configured toy functions and the answer is the last observation.

LLM calls: per turn 1 + Σ_i r_i, with 1 ≤ r_i ≤ ``step_replies`` the replies of step i, so
≤ 1 + n·``step_replies`` (n ≤ N); with the default ``step_replies`` = 1, exactly 1 + n (the
paper's). Declared tools only: 1 + the steps up to the first that makes calls (≤ 1 + n). An
episode of T turns: the sum over its turns.

Budget stop: the latest observation (the answer, had the plan ended at that step); on an
environment the calls made so far.

Deviations:
- The paper's planner is fine-tuned and has internalised F; here F's names and descriptions
  are in its prompt (the approximation methods.md suggests). The plan is a JSON list of steps
  instead of steps joined by ``<nexa_split>``.
- One action agent with a history through the episode (the paper passes on the last
  observation only); a step may make several calls in a reply, and ``step_replies`` > 1 lets it
  read results and call again within the step.
- Defensive parsing (not in the paper): a plan longer than N steps is cut to N and one that
  cannot be parsed becomes the single step "Carry out the whole request." (both recorded in the
  metadata); a step without a call observes an error, an unknown function or bad arguments an
  error result, and the chain goes on.
- On an ordinary task F is configurable (``functions``: names registered in
  :mod:`maslab.kit.tools`; default add, subtract, multiply, divide, compare and sandboxed
  python); the action agent's calls are offered as declared functions and the method runs them
  (:func:`maslab.kit.tools.run_tool`), one reply per step whatever ``step_replies`` says.
- A turn with no new message (one that only adds functions) is planned from our own line
  saying that more functions are available.
- Prompts are our own.

Native features: the plan is requested with its JSON schema where the planner's model has
structured output; the functions are offered as native tools where the action agent's model
has them (:mod:`maslab.kit.acting`). Calls and parsing are the same on both paths.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.episode import ToolOutcome, calls_json
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.acting import Acted, Call, act
from maslab.kit.plans import WHOLE_REQUEST, Plan, functions_part, step_prompt, steps_of
from maslab.kit.structured import ask
from maslab.kit.tools import Tool, ToolCall, ToolNames, get_tools, run_tool
from maslab.llm.types import ChatMessage

NO_CALL = "error: no function call found in the reply"
PLANNER, ACTION = "planner", "action"


def plan_prompt(request: str, functions: str, max_steps: int) -> str:
    """The planner's prompt; ``functions``: the list of functions (:func:`functions_part`),
    empty when it has read this list already."""
    return (
        f"{functions}Request:\n{request}\n\n"
        f"Plan how to carry out the request with the functions in 1 to {max_steps} steps. Each "
        "step is done with one call of one function and may use the results of earlier steps; "
        "write it as a short instruction that names the function and its inputs. The result of "
        "the last step is the answer."
    )


class Toys:
    """An ordinary task's functions: the configured tools, which the method runs itself (there
    is no environment), answering the action agent's calls in its history."""

    def __init__(self, names: Sequence[str]) -> None:
        self.tools: list[Tool] = get_tools(names)
        self.specs = tuple(tool.spec()["function"] for tool in self.tools)

    async def run(self, agent: Agent, acted: Acted) -> tuple[Call, ...]:
        results = [
            await run_tool(self.tools, ToolCall(name=c.name, arguments=c.arguments))
            for c in acted.calls
        ]
        wire = acted.message.metadata.get("tool_calls")
        if wire:  # native calls: each result answers its call
            answers: list[ChatMessage] = [
                {"role": "tool", "tool_call_id": c.id, "name": c.name, "content": result}
                for c, result in zip(wire, results, strict=True)
            ]
            agent.remember(*answers)
        else:
            shown = "\n".join(
                f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)}) -> {result}"
                for c, result in zip(acted.calls, results, strict=True)
            )
            agent.remember({"role": "user", "content": f"Results of your calls:\n{shown}"})
        return tuple(
            Call(c.name, c.arguments, ToolOutcome(r, r.startswith("error:")))
            for c, r in zip(acted.calls, results, strict=True)
        )


def observation(calls: Sequence[Call]) -> str:
    """A step's observation: its last call's result (declared calls: the calls as JSON)."""
    if not calls:
        return NO_CALL
    last = calls[-1].outcome
    return last.result if last is not None else calls_json((c.name, c.arguments) for c in calls)


@register_method("planner_executor")
class PlannerExecutor(Method):
    """Per turn: plan 1..5 steps from the functions' docs, then an action agent carries them out
    in order with the functions (1 + n calls per turn)."""

    roles = (PLANNER, ACTION)
    paper = "Octo-planner, arXiv 2406.18082"
    category = "planner-conductor hierarchy"
    calls: ClassVar[str] = (
        "per turn 1 + Σ step replies ≤ 1 + n·step_replies (n ≤ 5 planned steps; default "
        "step_replies 1: exactly 1 + n); declared tools only: 1 + the steps up to the first "
        "that calls"
    )

    class Config(MethodConfig):
        functions: ToolNames = Field(
            default_factory=lambda: ["add", "subtract", "multiply", "divide", "compare", "python"],
            min_length=1,
            description="An ordinary task's functions (registered tools).",
        )
        max_steps: int = Field(5, ge=1, description="Steps a plan has at most (N).")
        step_replies: int = Field(
            1, ge=1, description="The action agent's replies per step at most (its tool loop)."
        )

    config: Config

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = Topology.chain([PLANNER, ACTION])
        planner, action = ctx.agent(PLANNER), ctx.agent(ACTION)
        declared = ctx.environment is None and bool(task.tools)
        toys = None if ctx.environment is not None or task.tools else Toys(cfg.functions)
        turns: list[dict[str, Any]] = []
        answer = ""
        async for turn in ctx.episode(task):
            request = turn.request
            functions = toys.specs if toys is not None else turn.functions
            prompt = plan_prompt(request, functions_part(planner, functions), cfg.max_steps)
            _, plan = await ask(planner, prompt, Plan, round=turn.index, kind="plan")
            written = steps_of(plan)
            steps = written[: cfg.max_steps] or [WHOLE_REQUEST]
            done: list[dict[str, Any]] = []
            truncated = len(written) > cfg.max_steps
            turns.append({"plan": steps, "planned_steps": len(written), "truncated": truncated,
                          "fallback": not written, "steps": done})  # fmt: skip
            for i in range(1, len(steps) + 1):
                acted = await act(
                    action,
                    step_prompt(request, steps, i),
                    functions,
                    max_steps=1 if toys is not None else cfg.step_replies,
                    round=turn.index,
                    kind="action",
                )
                calls = await toys.run(action, acted) if toys is not None else acted.calls
                seen = observation(calls)
                made = [{"name": c.name, "arguments": c.arguments} for c in calls]
                ctx.post("executor", seen, round=turn.index, kind="observation",
                         metadata={"step": steps[i - 1], "calls": made})  # fmt: skip
                done.append({"step": steps[i - 1], "calls": made, "observation": seen})
                ctx.propose(seen, turn=turn.index, step=i)
                answer = seen
                if declared and calls:  # the first calls are the answer
                    return Solution(answer=calls_json((c.name, c.arguments) for c in calls),
                                    metadata={"turns": turns})  # fmt: skip
        return Solution(answer="[]" if declared else answer, metadata={"turns": turns})
