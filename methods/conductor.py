"""AgentOrchestra: a planning conductor that delegates to specialised sub-agents.

Zhang, Zeng, Xiao, ..., Zhou, An. "AgentOrchestra: A Hierarchical Multi-Agent Framework for
General-Purpose Task Solving". arXiv:2506.12508 (2025).

Algorithm (planner cap S_p; sub-agents are exposed to the planner as tools; star topology):

1. The planner sees the task and its team: a reasoning analyst, a coder with a Python sandbox,
   any extra tools, and ``final_answer``.
2. Step s = 0..S_p-1: the planner replies with one JSON action: a thought, its plan (at most
   five steps, each not_started / in_progress / completed / blocked) and a call
   ``"action": name, "arguments": {...}``. A synonym status is read as its canonical one ("done"
   as completed), any other status is kept as written, and an unreadable plan keeps the previous
   one: the plan never invalidates the action.
   - ``final_answer`` ends the run with ``arguments.answer``: a string as written, a list as
     its items joined with ", " (one item: the item), anything else (a number) as JSON writes
     it. A null answer, or a list of nothing, is no answer: the action is malformed.
   - A team member gets ``arguments.task`` inside a "you are helping a manager" brief, works
     with a fresh memory under its own cap, and its report comes back as the observation. The
     analyst reasons in one call. The coder writes a program, sees the sandbox's output and
     revises, for at most ``coder_steps`` calls; a reply without code is its report.
   - An extra tool runs directly; its output is the observation.
   - A malformed action gets one corrective message; a second malformed reply in a row ends
     the loop.
3. If the loop ends without ``final_answer``, one more planner call asks for the answer.

LLM calls: at most S_p + Σ_delegations cap + 1, with cap = 1 for the analyst and
``coder_steps`` for the coder (tools call no model). The exact count depends on the planner.

Budget stop: the latest observation that is not an error (a team member's report or a tool's
output), since the planner states no answer before ``final_answer``.

Deviations:
- maslab runs offline, so the paper's Deep Researcher and Browser Use sub-agents (web search,
  browsing) are not part of the team. Tools registered in :mod:`maslab.kit.tools` can be offered to
  the planner through ``tools``; there are none by default, so no web access.
- The Deep Analyzer (several analyser models plus a summariser) is one reasoning call (the
  official config gives it one step); the model role ``analyst`` picks its model.
- The planning tool (create / update / mark_step) is folded into the action: the planner
  restates the plan with statuses in every reply. Actions are JSON (:class:`Action`, whose
  shape ends every planner prompt) rather than native function calls, one per step; where the
  planner's model supports structured output they are requested with their JSON schema as well
  (same prompt, same calls, same parsing).
- When the coder reaches its cap, its last reply plus the output of its last program is the
  report, instead of an extra forced-answer call, which keeps the call bound above.
- A second malformed planner reply in a row ends the loop early (the official code keeps
  stepping to the cap).
- Prompts are our own paraphrase.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    create_model,
    field_validator,
    model_validator,
)

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.parsing import as_text
from maslab.kit.structured import Reply, ask
from maslab.kit.tools import Tool, ToolCall, ToolNames, get_tools, python_tool, run_tool
from maslab.sandbox import Limits

PLANNER = "planner"
FINAL = "final_answer"
TEAM = ("analyst", "coder")

_PYTHON_BLOCK = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.S)

ANALYST_SYSTEM = (
    "You are a meticulous analyst. You solve problems by careful step-by-step reasoning and "
    "check every step before you conclude."
)
CODER_SYSTEM = (
    "You are a Python programmer with a sandboxed interpreter (no network access). To run a "
    "program, reply with one ```python code block that prints what you need; you will be shown "
    "its output. Once you have what you need, reply with your report and no code block."
)
CORRECTION = "Your last reply was not a valid action (final_answer needs arguments.answer)."
FORCED_FINAL = (
    "You have used all your steps. From what you have learned so far, give the final answer to "
    "the original task now, in the format it asks for."
)


STATUSES = ("not_started", "in_progress", "completed", "blocked")
_SYNONYMS = {
    "completed": "done complete finished succeeded success successful resolved verified",
    "in_progress": "ongoing active started running working doing current wip",
    "not_started": "todo to_do pending planned open queued waiting not_done",
    "blocked": "stuck failed failure error",
}
_STATUS_OF = {word: status for status, words in _SYNONYMS.items() for word in words.split()}


def _status(value: object) -> str:
    """One of STATUSES for a known status or synonym ("Done" -> "completed"), else as written."""
    written = "" if value is None else str(value).strip()
    key = re.sub(r"[\s-]+", "_", written.lower())
    return key if key in STATUSES else _STATUS_OF.get(key, written or STATUSES[0])


class PlanStep(BaseModel):
    step: str = Field(description="a step")
    status: Annotated[
        str, BeforeValidator(_status), WithJsonSchema({"type": "string", "enum": list(STATUSES)})
    ] = STATUSES[0]


class FinalArguments(Reply):
    """The arguments of final_answer."""

    answer: str


class Action(Reply):
    """One planner reply: a call of a team member, a tool or final_answer. The plan is
    bookkeeping: an unreadable one is dropped (empty), never the action with it.

    The schema names the team (:attr:`tools`, see :meth:`of`). Not strict: tools may have
    optional arguments, and the reply is validated after all.
    """

    strict = False
    tools: ClassVar[tuple[Tool, ...]] = ()
    """The team members and tools ``action`` may name, besides final_answer."""

    thought: str = Field("", description="what you know and what to do next")
    plan: list[PlanStep] = Field(default_factory=list)
    action: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, tools: Sequence[Tool]) -> type[Action]:
        """The reply of a planner whose team is ``tools``."""
        reply = create_model(cls.__name__, __base__=cls)
        reply.tools = tuple(tools)
        return reply

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """As declared, with ``action`` one of the team's names or final_answer and
        ``arguments`` the arguments of one of them (each tool's schema as it is)."""
        schema = super().json_schema()
        names = [*(tool.name for tool in cls.tools), FINAL]
        arguments = [*(tool.schema() for tool in cls.tools), FinalArguments.json_schema()]
        schema["properties"]["action"] = {"type": "string", "enum": names}
        schema["properties"]["arguments"] = {"anyOf": arguments}
        return schema

    @field_validator("plan", mode="wrap")
    @classmethod
    def _readable_plan(cls, value: object, read: ValidatorFunctionWrapHandler) -> object:
        try:
            return read(value)
        except ValidationError:
            return []

    @model_validator(mode="after")
    def _final_answer_has_answer(self) -> Action:
        if self.action == FINAL and self.answer is None:
            raise ValueError(f"{FINAL} needs arguments.answer")
        return self

    @property
    def answer(self) -> str | None:
        if self.action != FINAL or self.arguments.get("answer") is None:
            return None
        return as_text(self.arguments["answer"]) or None


def planner_system(tools: Sequence[Tool]) -> str:
    listed = "\n".join(tool.describe() for tool in tools)
    return (
        "You lead a small team and solve the user's task by planning, delegating and checking. "
        "You act in steps: each reply is one action, and its result comes back to you as an "
        f"observation.\n\nYour team members and tools:\n{listed}\n"
        f"- {FINAL}(answer: string): finish, with the answer in the format the task asks for.\n\n"
        "Rules:\n"
        "- Start with a plan of at most 5 steps, each done by a team member or tool, and restate "
        "it in every reply with updated statuses.\n"
        "- Team members see only the task you give them: make it complete and self-contained, "
        "and quote the original question word for word when they need it.\n"
        "- Delegate only when it helps, and never repeat an identical call.\n"
        f"- Check the results, then finish with {FINAL}."
    )


def opening_prompt(task: Task) -> str:
    return f"Task:\n{task.prompt()}\n\nWrite your plan and take your first action."


def observation_prompt(name: str, observation: str) -> str:
    return (
        f"Observation from {name}:\n{observation}\n\n"
        "Update the statuses in your plan and reply with your next action."
    )


def assignment(task: str) -> str:
    """The brief every delegated task is wrapped in."""
    return (
        "You are a member of a team, helping a manager who works on a larger task. The manager "
        f"gave you this assignment:\n\n{task}\n\nThe manager sees only your final report, so be "
        "thorough. Write it in three parts: 1. Short outcome; 2. Detailed outcome; "
        "3. Additional context."
    )


def coder_followup(output: str, *, last: bool) -> str:
    advice = (
        "Your next reply is your last: write your final report now, without a code block."
        if last
        else "Fix the program and run it again if needed, or write your report without code."
    )
    return f"Output of your program:\n{output}\n\n{advice}"


class Team:
    """The planner's sub-agents as tools. Each delegation starts a fresh agent; its calls carry
    the planner step (``round``) that delegated it."""

    def __init__(self, ctx: Context, config: Conductor.Config) -> None:
        self.ctx = ctx
        self.config = config
        self.round = 0
        seconds = config.sandbox_seconds
        self.python = python_tool(Limits(wall_seconds=seconds, cpu_seconds=seconds))

    def tools(self) -> list[Tool]:
        task = {"task": {"type": "string", "description": "a complete, self-contained task"}}
        return [
            Tool("analyst", "Reasons a problem through step by step.", task, self.analyst),
            Tool("coder", "Writes Python and runs it in a sandbox.", task, self.coder),
        ]

    async def analyst(self, task: str) -> str:
        agent = self.ctx.agent("analyst", system=ANALYST_SYSTEM)
        return (await agent.reply(assignment(task), round=self.round, kind="report")).content

    async def coder(self, task: str) -> str:
        cap = self.config.coder_steps
        agent = self.ctx.agent("coder", system=CODER_SYSTEM)
        prompt = f"{assignment(task)}\n\nReplies allowed, the report included: {cap}."
        for step in range(1, cap + 1):
            reply = await agent.reply(prompt, round=self.round, kind="work")
            blocks = [b for b in _PYTHON_BLOCK.findall(reply.content) if b.strip()]
            if not blocks:
                return reply.content
            output = await run_tool(
                [self.python], ToolCall(name="python", arguments={"code": blocks[-1]})
            )
            self.ctx.post(
                "python", output, round=self.round, kind="observation", recipients=("coder",)
            )
            prompt = coder_followup(output, last=step == cap - 1)
        return f"{reply.content}\n\nOutput of the last program:\n{output}"


@register_method("conductor")
class Conductor(Method):
    """A planner keeps a plan with statuses and delegates to sub-agents until final_answer."""

    roles = (PLANNER, *TEAM)
    paper = "AgentOrchestra, arXiv 2506.12508"
    category = "planner-conductor hierarchy"
    calls = "≤ planner steps + Σ sub-agent step caps of its delegations + 1"

    class Config(MethodConfig):
        planner_steps: int = Field(20, ge=1)
        coder_steps: int = Field(3, ge=1)
        sandbox_seconds: float = Field(10, gt=0)
        tools: ToolNames = Field(default_factory=list)

        @field_validator("tools")
        @classmethod
        def _free(cls, names: list[str]) -> list[str]:
            if taken := sorted(set(names) & {PLANNER, FINAL, *TEAM}):
                raise ValueError(f"tool names {taken} are taken by the team")
            return names

    config: Config

    def structure(self) -> Topology:
        """The planner calls each team member and tool and reads what it returns."""
        return Topology.star(PLANNER, [*TEAM, *self.config.tools], direction="both")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        team = Team(ctx, cfg)
        tools = [*team.tools(), *get_tools(cfg.tools)]
        ctx.topology = self.structure()
        planner = ctx.agent(PLANNER, system=planner_system(tools))
        plan: list[PlanStep] = []
        trace: list[dict[str, Any]] = []

        def solution(answer: str, finish: str) -> Solution:
            return Solution(
                answer=answer,
                metadata={"plan": [s.model_dump() for s in plan], "trace": trace, "finish": finish},
            )

        action_reply = Action.of(tools)
        prompt = opening_prompt(task)
        for step in range(cfg.planner_steps):
            _, action = await ask(planner, prompt, action_reply, round=step, kind="action")
            if action is None:
                trace.append({"step": step, "action": None})
                if prompt is CORRECTION:  # the corrective retry failed too
                    break
                prompt = CORRECTION
                continue
            plan = action.plan or plan  # an empty plan keeps the previous one
            trace.append({"step": step, "action": action.action, "arguments": action.arguments})
            if action.answer is not None:
                return solution(action.answer, FINAL)
            team.round = step
            call = ToolCall(name=action.action, arguments=action.arguments)
            observation = await run_tool(tools, call)
            ctx.post(call.name, observation, round=step, kind="observation", recipients=(PLANNER,))
            if not observation.startswith("error:"):  # run_tool's failures
                ctx.propose(observation, source=call.name)
            prompt = observation_prompt(call.name, observation)

        reply = await planner.reply(FORCED_FINAL, round=len(trace), kind="final")
        forced = action_reply.parse(reply.content)
        answer = forced.answer if forced is not None else None
        return solution(reply.content if answer is None else answer, "forced")
