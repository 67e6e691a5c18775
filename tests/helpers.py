"""Helpers shared by many test files (not tests).

What several files used to define for themselves, word for word: the arithmetic task the method
tests solve, reading who made a call and what it was shown from a request or a context's ledger,
running one method on one task, a model pool of scripted models, a run's JSON lines, the command
line in-process, a toy environment and scripted replies that call its functions.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from maslab.cli import main
from maslab.core.context import Context
from maslab.core.environment import Environment, ToolError
from maslab.core.task import Task
from maslab.llm.pool import ModelPool
from maslab.llm.scripted import Reply, ScriptedModel
from maslab.llm.types import ChatRequest, FunctionCall

TASK = Task(
    id="t1",
    question="What is 6 * 7?",
    answer_type="number",
    instruction="End with 'The answer is N'.",
)  # the arithmetic task most method tests solve
GOLD_TASK = TASK.model_copy(update={"gold": "42"})  # the same, with its gold answer


def add_task(hidden: str) -> Task:
    """A code task: write add(a, b), two examples shown in its question, ``hidden`` its grading
    test (never shown to the method), its gold code marked ``GOLD-CODE``."""
    return Task(
        id="c1",
        question="Write a function add(a, b) that returns the sum of a and b, as in:\n\n"
        "```python\nassert add(1, 2) == 3\nassert add(0, 0) == 0\n```",
        gold="def add(a, b):\n    return a + b  # GOLD-CODE",
        tests=(hidden,),
        answer_type="code",
        instruction="Give your final answer in a single ```python code block.",
    )


def agent_of(request: ChatRequest) -> str:
    """The agent that made the call (the last part of the request's draw scope)."""
    return request.scope.rsplit("\x1f", 1)[-1]


def records_of(ctx: Context, agent: str) -> list:
    """The ledger's records of ``agent``'s calls, in order."""
    return [r for r in ctx.ledger.records if r.agent == agent]


def prompts_of(ctx: Context, agent: str) -> list[str]:
    """The last message of each of ``agent``'s calls, in order."""
    return [r.messages[-1]["content"] for r in records_of(ctx, agent)]


Run = Callable[..., Awaitable[tuple[Any, Context]]]


def method_runner(method: Callable[..., Any], task: Task = TASK) -> Run:
    """``run(model, ctx=None, task=task, **config)``: ``method(**config)`` solves ``task`` in
    ``ctx`` (a fresh :class:`Context` on ``model`` by default); returns ``(solution, ctx)``."""

    async def run(model: Any, ctx: Context | None = None, task: Task = task, **config: Any):
        ctx = ctx or Context(model)
        solution = await method(**config).solve(task, ctx)
        return solution, ctx

    return run


class TwoModels(ModelPool):
    """A pool serving ``scripted:a`` and ``scripted:b`` (or ``specs``), each a
    :class:`ScriptedModel` of its own replying with ``respond()`` (called once a model, so a
    stateful script is not shared)."""

    def __init__(
        self, respond: Callable[[], Any], specs: tuple[str, ...] = ("scripted:a", "scripted:b")
    ) -> None:
        super().__init__()
        self.served = {s: ScriptedModel(respond(), name=s) for s in specs}

    def get(self, spec: str) -> ScriptedModel:  # type: ignore[override]
        return self.served[spec]


def lines(path: Path, *, torn: bool = False) -> list[dict]:
    """The JSON lines of ``path`` (a ``results.jsonl``, a trace file), blank lines skipped.

    ``torn=True`` reads a file a run may still be writing, or one a killed run left: no file is no
    lines, and a last line without its newline (half written) is not read."""
    if torn:
        if not path.exists():
            return []
        return [orjson.loads(line) for line in path.read_bytes().splitlines(keepends=True)
                if line.endswith(b"\n")]  # fmt: skip
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def run_cli(*args: object) -> int:
    """``maslab ARGS...`` in this process (each argument as a string); its exit code."""
    return main([str(a) for a in args])


def _function(name: str, description: str, *parameters: str) -> dict[str, Any]:
    properties = {p: {"type": "string"} for p in parameters}
    schema = {"type": "object", "properties": properties, "required": list(parameters)}
    return {"name": name, "description": description, "parameters": schema}


PUT = _function("put", "Put value on the shelf under key.", "key", "value")
TAKE = _function("take", "Take the value under key off the shelf.", "key")
CLEAR = _function("clear", "Take everything off the shelf.")


class Shelf(Environment):
    """A toy environment: a key-value shelf. ``put`` and ``take`` at every turn (taking a
    missing key is refused), ``clear`` from turn 1 on; ``boom`` fails as a bug would."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def functions(self, turn: int) -> list[dict[str, Any]]:
        return [PUT, TAKE, *([CLEAR] if turn >= 1 else [])]

    def execute(self, name: str, arguments: Mapping[str, Any]) -> str:
        if name == "put" and {"key", "value"} <= set(arguments):
            self.items[str(arguments["key"])] = str(arguments["value"])
            return f"put {arguments['key']}"
        if name == "take" and "key" in arguments:
            if arguments["key"] not in self.items:
                raise ToolError(f"nothing under {arguments['key']!r}")
            return self.items.pop(arguments["key"])
        if name == "clear":
            self.items.clear()
            return "cleared"
        if name == "boom":
            raise KeyError("a bug in the environment")
        raise ToolError(f"cannot call {name} with {dict(arguments)}")


Call = tuple[str, Mapping[str, Any]]
"""A function call a scripted reply makes: the function's name and its arguments."""


def native_reply(*calls: Call) -> Reply:
    """One scripted reply making ``calls`` as native tool calls, in order (ids call_1, ...)."""
    return Reply(
        tool_calls=tuple(
            FunctionCall(f"call_{i}", name, json.dumps(arguments))
            for i, (name, arguments) in enumerate(calls, 1)
        )
    )


def making(native: bool, *calls: Call) -> Reply | str:
    """One scripted reply making ``calls``: native tool calls, or the text path's JSON list."""
    if native:
        return native_reply(*calls)
    return json.dumps([{"name": name, "arguments": arguments} for name, arguments in calls])


def coin_flip_solver(tasks: list[Task]) -> Callable[[ChatRequest], str]:
    """A scripted solver of ``tasks`` that is right on about half its calls and one off on the
    others, a hash of the call's streams (seed, task, repeat, agent, draw) and prompt deciding:
    a noisy model whose repeats differ, the same on a replay."""
    import hashlib

    from maslab.llm.scripted import last_user_message

    def solve(request: ChatRequest) -> str:
        text = "\n".join(str(m.get("content")) for m in request.messages)
        gold = next((int(t.gold or 0) for t in tasks if t.question in text), 0)
        key = f"{request.scope}|{request.draw}|{last_user_message(request)}".encode()
        right = hashlib.sha256(key).digest()[0] % 2 == 0
        return f"The answer is \\boxed{{{gold if right else gold + 1}}}."

    return solve
