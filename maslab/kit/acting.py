"""The tool loop of one agent at one turn: reply, run the calls the reply makes, show the
results, until a reply makes none.

:func:`act` offers the turn's functions (specs ``{"name", "description", "parameters"}``) as
native tools where the agent's model has them: the calls come back as the reply's tool calls and
each result goes back as a ``tool`` turn answering its call. Elsewhere the prompt lists the
functions (unless the agent's history holds the same list already) and asks for the calls as a
JSON list in the reply's text; the results go back as one user turn. Either way the calls of one
reply run in the order given, each through the sample's tool door (:meth:`Context.call_tool
<maslab.core.context.Context.call_tool>`, which records it); a call the environment refuses
comes back as an error observation. On a task whose tools are only declared (no environment)
nothing runs: the loop stops at the first reply that makes calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import AliasChoices, Field

from maslab.core.agents import Agent
from maslab.core.episode import ToolOutcome
from maslab.core.messages import Message
from maslab.kit.parsing import parse_json_object, parse_models
from maslab.kit.structured import tool_params
from maslab.kit.tools import ToolCall
from maslab.llm.types import ChatMessage, FunctionCall

Function = Mapping[str, Any]
"""A function spec: ``{"name", "description", "parameters"}``, parameters a JSON schema."""
Asked = tuple[str, dict[str, Any]]
"""A call a reply asks for: the function's name and its arguments."""


@dataclass(frozen=True)
class Call:
    """A call an agent made: the function, its arguments, and what it gave (None: the tools
    are only declared, nothing ran)."""

    name: str
    arguments: dict[str, Any]
    outcome: ToolOutcome | None = None


@dataclass(frozen=True)
class Acted:
    """What :func:`act` did: the last reply, every call made (in order), the replies it took,
    and whether the step cap cut it off (its last reply still made calls)."""

    message: Message
    calls: tuple[Call, ...]
    steps: int
    capped: bool


class _WrittenCall(ToolCall):
    """A call written in text: unlike :class:`ToolCall`, its arguments must be there (so that a
    reply's JSON with a ``name`` is no call)."""

    arguments: dict[str, Any] = Field(
        validation_alias=AliasChoices("arguments", "args", "parameters")
    )


def describe_functions(functions: Sequence[Function]) -> str:
    """The functions as the text path's prompt lists them: name, description, parameters."""
    return "\n".join(
        f"- {f['name']}: {f.get('description', '')}\n"
        f"  parameters: {json.dumps(f.get('parameters', {}), ensure_ascii=False)}"
        for f in functions
    )


def call_instructions(functions: Sequence[Function]) -> str:
    """What the text path adds to a prompt: the functions and how to call them."""
    return (
        f"You can call these functions:\n{describe_functions(functions)}\n\n"
        'To call functions, reply with a JSON list of calls, [{"name": "<function>", '
        '"arguments": {"<parameter>": <value>, ...}}, ...]: they run in the order you list '
        "them and you are shown each result. When you need no more calls, reply in plain "
        "text with no call in it."
    )


def _results(asked: Sequence[Asked], outcomes: Sequence[ToolOutcome]) -> str:
    """The text path's user turn: each call and its result, in order."""
    lines = [
        f"[{i}] {name}({json.dumps(arguments, ensure_ascii=False)}) -> {outcome.result}"
        for i, ((name, arguments), outcome) in enumerate(zip(asked, outcomes, strict=True), 1)
    ]
    return "Results of your calls, in order:\n" + "\n".join(lines)


def _asked(
    message: Message, functions: Sequence[Function], offered: bool
) -> tuple[list[Asked], list[FunctionCall]]:
    """The calls ``message`` makes, and its native tool calls (those it answers on the native
    path). Native arguments that are not a JSON object count as none (the environment then
    names what is missing)."""
    if offered:
        wire: list[FunctionCall] = list(message.metadata.get("tool_calls", ()))
        return [(c.name, parse_json_object(c.arguments) or {}) for c in wire], wire
    if not functions:
        return [], []
    return [(c.name, c.arguments) for c in parse_models(message.content, _WrittenCall)], []


async def act(
    agent: Agent,
    prompt: str | None,
    functions: Sequence[Function],
    *,
    max_steps: int,
    round: int | None = None,
    **params: Any,
) -> Acted:
    """Let ``agent`` work on ``prompt`` with ``functions`` until a reply makes no call.

    On the native path a reply's calls are read from its tool calls only, on the text path
    from its text only. After a turn the step cap cut off, the last calls' results are in the
    agent's history all the same (shown with its next prompt).

    Args:
        agent: The agent; its history keeps the turn (calls and results included).
        prompt: The new user turn; None sends the history as it is.
        functions: The function specs it may call; none: one plain reply.
        max_steps: At most this many replies (a turn's cap); the last may still make calls.
        round: The method's round, on every reply.
        **params: For :meth:`Agent.reply <maslab.core.agents.Agent.reply>` (sampling,
            ``kind``, ...).

    Raises:
        BudgetExceeded: The budget stopped a reply (the calls made before it are recorded).
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    ctx = agent.ctx
    native_tools = tool_params(agent.model, functions) if functions else {}
    offered = bool(native_tools)
    if offered:
        params = {**params, **native_tools}
    elif functions and not agent.has_read(instructions := call_instructions(functions)):
        prompt = "\n\n".join(p for p in (prompt, instructions) if p)
    made: list[Call] = []
    for step in range(1, max_steps + 1):
        message = await agent.reply(prompt, round=round, **params)
        asked, wire = _asked(message, functions, offered)
        if not asked or ctx.environment is None:  # done, or declared only: nothing runs
            made += [Call(name, arguments) for name, arguments in asked]
            return Acted(message, tuple(made), step, capped=False)
        outcomes = [ctx.call_tool(agent.name, name, arguments) for name, arguments in asked]
        made += [Call(n, a, o) for (n, a), o in zip(asked, outcomes, strict=True)]
        if offered:
            agent.remember(*map(_tool_turn, wire, outcomes))
            prompt = None
        else:
            prompt = _results(asked, outcomes)
    if prompt is not None:  # the text path's last results, for the next prompt to follow
        agent.remember({"role": "user", "content": prompt})
    return Acted(message, tuple(made), max_steps, capped=True)


def _tool_turn(call: FunctionCall, outcome: ToolOutcome) -> ChatMessage:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": outcome.result}
