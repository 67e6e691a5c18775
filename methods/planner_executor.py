"""Octo-planner: a planner splits the task into steps, an action agent calls one function per step.

Chen, Li, Guo, Shen. "Octo-planner: On-device Language Model for Planner-Action Agents".
arXiv:2406.18082 (2024).

Algorithm (function set F, at most N = 5 steps; chain planner -> action_1 -> ... -> action_n):

1. The planner reads the task and F and writes a plan of 1..N steps in natural language.
2. For step i = 1..n, a fresh action agent reads the step and the observations so far and
   writes one function call as JSON; the call is executed and its result is observation O_i.
3. The final answer is the last observation O_n.

LLM calls: 1 + n, where n (1 <= n <= N) is the number of planned steps.

Budget stop: the latest observation (the answer, had the plan ended at that step).

Deviations:
- The paper's planner is fine-tuned and has internalised F; here F is listed in both prompts
  (the approximation methods.md suggests). The plan is a JSON list of steps instead of steps
  joined by ``<nexa_split>``.
- The action agent sees the task and every earlier step's observation, not only the last one,
  so a step can combine earlier results.
- Defensive parsing (not in the paper): a plan longer than N steps is cut to N and one that
  cannot be parsed becomes a single step, the whole task (both recorded in the metadata); a
  reply without a function call, an unknown function or bad arguments yield an error
  observation and the chain goes on.
- F is configurable (``functions``: names registered in :mod:`maslab.kit.tools`); the default is
  the built-in add, subtract, multiply, divide, compare and sandboxed python.
- Prompts are our own.

Native features: where the planner's model supports structured output, the plan is requested
with its JSON schema as well; where an action agent's model supports tools, F is offered as
native functions and the prompt asks for a call instead of JSON text. Calls and parsing are
the same on both paths (a text reply is still read).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.structured import Reply, ask, reply_call, tool_params
from maslab.kit.tools import ToolNames, get_tools, run_tool

NO_CALL = "error: no function call found in the reply"
ACTION = "action"  # the model role of the action agents action_1 .. action_n


class Plan(Reply):
    """The planner's JSON reply: the steps, in order."""

    steps: list[Annotated[str, Field(description="a step")]]


def plan_prompt(task: Task, functions: str, max_steps: int) -> str:
    return (
        f"You plan how to solve a task with these functions:\n{functions}\n\n"
        f"Task:\n{task.prompt()}\n\n"
        f"Break the task into 1 to {max_steps} steps. Each step is done by one call of one "
        "function and may use the results of earlier steps; write it as a short instruction "
        "that names the function and its inputs. The result of the last step is the answer."
    )


def action_prompt(
    task: Task, functions: str, step: str, done: list[dict[str, Any]], *, native: bool = False
) -> str:
    """The action agent's prompt; ``native``: the functions are offered as native tools."""
    parts = [f"Overall task:\n{task.prompt()}", f"Functions:\n{functions}"]
    if done:
        results = "\n".join(
            f"Step {i}: {d['step']}\nResult: {d['observation']}" for i, d in enumerate(done, 1)
        )
        parts.append(f"Results of the earlier steps:\n{results}")
    reply = (
        "Call that function."
        if native
        else "Reply with one JSON object only: "
        '{"function": "<name>", "arguments": {<argument>: <value>, ...}}'
    )
    parts.append(
        f"Current step: {step}\n\nWrite the function call for the current step, taking its "
        f"inputs from the task and the earlier results. {reply}"
    )
    return "\n\n".join(parts)


@register_method("planner_executor")
class PlannerExecutor(Method):
    """Plan 1..5 function-call steps, then execute them in order, chaining the observations."""

    roles = ("planner", ACTION)
    paper = "Octo-planner, arXiv 2406.18082"
    category = "planner-conductor hierarchy"
    calls = "1 + n (n ≤ 5 planned steps)"

    class Config(MethodConfig):
        functions: ToolNames = Field(
            default_factory=lambda: ["add", "subtract", "multiply", "divide", "compare", "python"],
            min_length=1,
        )
        max_steps: int = Field(5, ge=1)

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered(ACTION, self.config.max_steps)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        functions = get_tools(cfg.functions)
        catalogue = "\n".join(f.describe() for f in functions)
        planner = ctx.agent("planner")
        _, plan = await ask(
            planner, plan_prompt(task, catalogue, cfg.max_steps), Plan, round=0, kind="plan"
        )
        written = [s.strip() for s in plan.steps if s.strip()] if plan is not None else []
        steps = written[: cfg.max_steps] or [task.prompt()]
        names = list(numbered(ACTION, len(steps)))
        ctx.topology = Topology.chain(["planner", *names])

        done: list[dict[str, Any]] = []
        for i, (name, step) in enumerate(zip(names, steps, strict=True), 1):
            actor = ctx.agent(name, role=ACTION)
            native = tool_params(actor.model, functions)
            reply = await actor.reply(
                action_prompt(task, catalogue, step, done, native=bool(native)),
                round=i,
                kind="action",
                **native,
            )
            call = reply_call(reply)
            observation = NO_CALL if call is None else await run_tool(functions, call)
            executed = {"step": step, "call": None if call is None else call.model_dump()}
            ctx.post("executor", observation, round=i, kind="observation", metadata=executed)
            done.append({**executed, "observation": observation})
            ctx.propose(observation, step=i)

        return Solution(
            answer=done[-1]["observation"],
            metadata={
                "plan": steps,
                "planned_steps": len(written),
                "truncated": len(written) > cfg.max_steps,
                "fallback": not written,
                "steps": done,
            },
        )
