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

On tool use (a turn with functions: an environment's, or declared ones), at each turn of the
episode (:meth:`maslab.core.context.Context.episode`) the team is one specialist per group of the
turn's functions (the groups the environment names with ``function_groups()``, as BFCL's does by
class; else one specialist, ``functions``, with all of them). A delegation starts a fresh
specialist that works its task in one tool loop (:func:`maslab.kit.acting.act`, at most
``specialist_steps`` replies, the calls running through the sample's tool door) and reports its
last reply and the calls it made with their results. The planner's history runs through the
episode; ``final_answer`` (or the forced answer) ends the turn, whose answer on an environment is
what was called. On declared tools (no environment) the first calls a specialist makes are the
answer, as JSON, and the planner stops there (``[]``: no specialist called).

LLM calls, per turn: at most S_p + Σ_delegations cap + 1, with cap = 1 for the analyst,
``coder_steps`` for the coder and ``specialist_steps`` for a specialist (tools call no model);
an episode: the sum over its turns; declared tools only: the planner steps up to the first
delegation whose specialist calls, plus those delegations. The exact count depends on the
planner.

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
- On tool use the team is the specialists only (no analyst or coder), a specialist per group of
  functions in place of the paper's per-skill sub-agents, with a fresh memory per delegation.
  A turn with no new message (one that only adds functions) gets our own line saying that more
  functions are available, and a turn whose team changed lists the new team.
- Prompts are our own paraphrase.
"""

from __future__ import annotations

import functools
import json
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

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.environment import Environment
from maslab.core.episode import calls_json
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.acting import Function, act
from maslab.kit.parsing import as_text
from maslab.kit.structured import Reply, ask
from maslab.kit.tools import Tool, ToolCall, ToolNames, get_tools, python_tool, run_tool
from maslab.sandbox import Limits

PLANNER = "planner"
FINAL = "final_answer"
TEAM = ("analyst", "coder")
SPECIALIST = "specialist"  # the model role of the sub-agents that own a group of functions
ALL = "functions"  # the one group when the environment names none

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
SPECIALIST_SYSTEM = (
    "You carry out tasks with functions. Call them to act and to find out what you need, read "
    "each result (an error too) before going on, and call no function you were not offered. "
    "When the task is done, or cannot be done with your functions, reply without a call."
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


def opening_prompt(message: str, team: Sequence[Tool] = ()) -> str:
    """A turn's first planner prompt; ``team``: the team, when it changed since the last turn."""
    changed = "Your team now:\n" + "\n".join(t.describe() for t in team) + "\n\n" if team else ""
    return f"{changed}Task:\n{message}\n\nWrite your plan and take your first action."


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


TASK_ARGUMENT = {"task": {"type": "string", "description": "a complete, self-contained task"}}


class Team:
    """The planner's sub-agents as tools. Each delegation starts a fresh agent; its calls carry
    the planner step (``round``) that delegated it."""

    answer: str | None = None  # an ordinary task's team never answers for the planner

    def __init__(self, ctx: Context, config: Conductor.Config) -> None:
        self.ctx = ctx
        self.config = config
        self.round = 0
        seconds = config.sandbox_seconds
        self.python = python_tool(Limits(wall_seconds=seconds, cpu_seconds=seconds))

    def tools(self) -> list[Tool]:
        return [
            Tool("analyst", "Reasons a problem through step by step.", TASK_ARGUMENT, self.analyst),
            Tool("coder", "Writes Python and runs it in a sandbox.", TASK_ARGUMENT, self.coder),
            *get_tools(self.config.tools),
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


def grouped(
    functions: Sequence[Function], environment: Environment | None
) -> dict[str, list[Function]]:
    """The turn's functions by group, in the order they are offered: the groups the environment
    names (:meth:`~maslab.core.environment.Environment.function_groups`; BFCL's by class), else
    one group of all, :data:`ALL`."""
    group_of = environment.function_groups() if environment is not None else {}
    groups: dict[str, list[Function]] = {}
    for function in functions:
        groups.setdefault(group_of.get(function["name"], ALL), []).append(function)
    return groups


class Specialists:
    """An episode's team: one sub-agent per group of the turn's functions. Each delegation starts
    a fresh agent that works the task in one tool loop (:func:`act`) and reports what it did.

    On declared tools (no environment) nothing runs: the first calls a specialist makes are the
    answer (:attr:`answer`), and the planner stops there.
    """

    def __init__(
        self, ctx: Context, config: Conductor.Config, functions: Sequence[Function]
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.round = 0
        self.answer: str | None = None
        self.groups = grouped(functions, ctx.environment)

    def tools(self) -> list[Tool]:
        return [
            Tool(
                name,
                f"Carries out a task with the functions {', '.join(f['name'] for f in group)}.",
                TASK_ARGUMENT,
                functools.partial(self.work, name),
            )
            for name, group in self.groups.items()
        ]

    async def work(self, name: str, task: str) -> str:
        agent = self.ctx.agent(name, role=SPECIALIST, system=SPECIALIST_SYSTEM)
        acted = await act(
            agent,
            assignment(task),
            self.groups[name],
            max_steps=self.config.specialist_steps,
            round=self.round,
            kind="work",
        )
        if self.ctx.environment is None and acted.calls:
            self.answer = calls_json((c.name, c.arguments) for c in acted.calls)
        made = "\n".join(
            f"- {c.name}({json.dumps(c.arguments, ensure_ascii=False)})"
            + ("" if c.outcome is None else f" -> {c.outcome.result}")
            for c in acted.calls
        )
        capped = "\n(stopped at its step cap)" if acted.capped else ""
        return acted.message.content + (f"\n\nCalls made:\n{made}{capped}" if made else "")


@register_method("conductor")
class Conductor(Method):
    """A planner keeps a plan with statuses and delegates to sub-agents until final_answer; on
    tool use, each sub-agent owns one group of the turn's functions."""

    roles = (PLANNER, *TEAM, SPECIALIST)
    paper = "AgentOrchestra, arXiv 2506.12508"
    category = "planner-conductor hierarchy"
    calls = (
        "per turn ≤ planner_steps + Σ caps of its delegations + 1 (analyst 1, coder "
        "coder_steps, specialist specialist_steps); declared tools only: up to the first "
        "delegation that calls"
    )

    class Config(MethodConfig):
        planner_steps: int = Field(20, ge=1, description="Planner replies per turn at most.")
        coder_steps: int = Field(3, ge=1)
        sandbox_seconds: float = Field(10, gt=0)
        tools: ToolNames = Field(default_factory=list)
        specialist_steps: int = Field(
            10, ge=1, description="A specialist's replies per delegation at most (its tool loop)."
        )

        @field_validator("tools")
        @classmethod
        def _free(cls, names: list[str]) -> list[str]:
            if taken := sorted(set(names) & {PLANNER, FINAL, *TEAM}):
                raise ValueError(f"tool names {taken} are taken by the team")
            return names

    config: Config

    def structure(self) -> Topology:
        """On an ordinary task: the planner calls each team member and tool and reads what it
        returns (on tool use the team is the turn's groups of functions)."""
        return Topology.star(PLANNER, [*TEAM, *self.config.tools], direction="both")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        planner: Agent | None = None
        shown: list[str] = []
        run = Run(ctx, self.config)
        async for turn in ctx.episode(task):
            team = (
                Specialists(ctx, self.config, turn.functions)
                if turn.functions
                else Team(ctx, self.config)
            )
            tools = team.tools()
            members = [tool.name for tool in tools]
            ctx.topology = Topology.star(PLANNER, members, direction="both")
            changed = planner is not None and members != shown
            if planner is None:
                planner = ctx.agent(PLANNER, system=planner_system(tools))
            shown = members
            prompt = opening_prompt(turn.request, tools if changed else ())
            await run.turn(planner, team, tools, prompt)
            if team.answer is not None:
                return run.solution(team.answer, "calls")
        if ctx.environment is None and task.tools:
            return run.solution("[]", run.finish)  # declared tools, and no specialist called
        return run.solution(run.answer, run.finish)


class Run:
    """The planner's steps through the episode: a plan with statuses, the trace of its actions,
    and how the last turn finished."""

    def __init__(self, ctx: Context, config: Conductor.Config) -> None:
        self.ctx = ctx
        self.config = config
        self.plan: list[PlanStep] = []
        self.trace: list[dict[str, Any]] = []
        self.answer = ""
        self.finish = FINAL

    def solution(self, answer: str, finish: str) -> Solution:
        plan = [s.model_dump() for s in self.plan]
        return Solution(
            answer=answer, metadata={"plan": plan, "trace": self.trace, "finish": finish}
        )

    async def turn(
        self, planner: Agent, team: Team | Specialists, tools: list[Tool], prompt: str
    ) -> None:
        """One turn: at most ``planner_steps`` actions, until final_answer, a declared answer
        or the forced final answer (steps are numbered through the episode)."""
        ctx = self.ctx
        action_reply = Action.of(tools)
        first = len(self.trace)
        for step in range(first, first + self.config.planner_steps):
            _, action = await ask(planner, prompt, action_reply, round=step, kind="action")
            if action is None:
                self.trace.append({"step": step, "action": None})
                if prompt is CORRECTION:  # the corrective retry failed too
                    break
                prompt = CORRECTION
                continue
            self.plan = action.plan or self.plan  # an empty plan keeps the previous one
            self.trace.append(
                {"step": step, "action": action.action, "arguments": action.arguments}
            )
            if action.answer is not None:
                self.answer, self.finish = action.answer, FINAL
                return
            team.round = step
            call = ToolCall(name=action.action, arguments=action.arguments)
            observation = await run_tool(tools, call)
            ctx.post(call.name, observation, round=step, kind="observation", recipients=(PLANNER,))
            if team.answer is not None:
                return
            if not observation.startswith("error:"):  # run_tool's failures
                ctx.propose(observation, source=call.name)
            prompt = observation_prompt(call.name, observation)

        reply = await planner.reply(FORCED_FINAL, round=len(self.trace), kind="final")
        forced = action_reply.parse(reply.content)
        answer = forced.answer if forced is not None else None
        self.answer, self.finish = (reply.content if answer is None else answer), "forced"
