"""Tools that agents call by writing JSON in plain text: no native function calling needed.

A :class:`Tool` is a name, a description, its parameters (JSON-schema-ish: argument name ->
``{"type": ..., "description": ..., "default": ...}``) and an async function returning the
observation text. An agent writes ``{"tool": "add", "arguments": {"a": 2, "b": 3}}``;
:func:`parse_tool_call` reads it defensively and :func:`run_tool` runs it, turning an unknown
tool, bad arguments or a failing tool into an error observation instead of an exception.
Models with native function calling get :meth:`Tool.spec` instead (see
:mod:`maslab.kit.structured`).

Tools are registered by name (:func:`register_tool`, or by an installed distribution through the
entry-point group ``maslab.tools``: the entry point's name is the tool's, its object the factory)
so method configs can list them. Built in: ``add``, ``subtract``, ``multiply``, ``divide``,
``compare`` and ``python`` (the sandbox).
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
)

from maslab.errors import BudgetExceeded, ConfigError, LLMError
from maslab.kit.parsing import parse_model
from maslab.plugins import PluginGroup
from maslab.sandbox import IsolationMissing, Limits, arun_python

_TYPES: dict[str, Any] = {
    "number": int | float,
    "integer": int,
    "string": str,
    "boolean": bool,
    "array": list,
    "object": dict,
}


@dataclass(frozen=True)
class Tool:
    """A function agents may call; ``run`` takes the arguments as keywords."""

    name: str
    description: str
    parameters: Mapping[str, Mapping[str, Any]]
    run: Callable[..., Awaitable[str]]

    def describe(self) -> str:
        """One prompt line: ``name(arg: type, ...): description``, then one line per argument."""
        args = ", ".join(f"{n}: {p.get('type', 'any')}" for n, p in self.parameters.items())
        notes = [
            f"    {n}: {p['description']}" for n, p in self.parameters.items() if "description" in p
        ]
        return "\n".join([f"- {self.name}({args}): {self.description}", *notes])

    def schema(self) -> dict[str, Any]:
        """The parameters as a JSON schema object; arguments without a default are required."""
        return {
            "type": "object",
            "properties": {name: dict(spec) for name, spec in self.parameters.items()},
            "required": [name for name, spec in self.parameters.items() if "default" not in spec],
            "additionalProperties": False,
        }

    def spec(self) -> dict[str, Any]:
        """The tool as an OpenAI function tool (the ``tools`` of a chat request)."""
        function = {"name": self.name, "description": self.description, "parameters": self.schema()}
        return {"type": "function", "function": function}

    @cached_property
    def arguments_model(self) -> type[BaseModel]:
        """Validates call arguments: types as declared, no unknown names, defaults filled in."""
        fields: dict[str, Any] = {
            name: (_TYPES.get(spec.get("type", ""), Any), spec.get("default", ...))
            for name, spec in self.parameters.items()
        }
        return create_model(
            f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )


class ToolCall(BaseModel):
    """A call as an agent writes it: ``{"tool" | "name" | "function": ..., "arguments": {...}}``."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(validation_alias=AliasChoices("name", "tool", "function"))
    arguments: dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("arguments", "args", "parameters")
    )


def parse_tool_call(text: str) -> ToolCall | None:
    """The first JSON tool call in ``text`` (fenced or inline), or None."""
    return parse_model(text, ToolCall)


async def run_tool(tools: Sequence[Tool], call: ToolCall) -> str:
    """Run ``call`` and return its observation; every failure becomes an ``error: ...`` text.

    Only the sample's own failures propagate (BudgetExceeded, LLMError from a tool that calls
    a model), so the method stops as it would on any model call.
    """
    by_name = {tool.name: tool for tool in tools}
    tool = by_name.get(call.name)
    if tool is None:
        return f"error: unknown tool {call.name!r}; available: {', '.join(by_name) or 'none'}"
    try:
        arguments = tool.arguments_model.model_validate(call.arguments)
    except ValidationError as exc:
        # one message per argument (a union type reports each branch; the last reads best)
        problems = {str(e["loc"][0]) if e["loc"] else "arguments": e["msg"] for e in exc.errors()}
        listed = "; ".join(f"{name}: {message}" for name, message in problems.items())
        return f"error: bad arguments for {tool.name}: {listed}"
    try:
        return await tool.run(**arguments.model_dump())
    except (BudgetExceeded, LLMError, IsolationMissing):
        raise
    except Exception as exc:
        return f"error: {tool.name} failed: {type(exc).__name__}: {exc}"


# --- registry -----------------------------------------------------------------------------------

_FACTORIES: dict[str, Callable[[], Tool]] = {}


def register_tool(name: str, factory: Callable[[], Tool]) -> None:
    """Make ``factory`` (returning a fresh :class:`Tool`) available to configs as ``name``."""
    _FACTORIES[name] = factory


_PLUGINS = PluginGroup("maslab.tools", register_tool)


def tool_factories() -> dict[str, Callable[[], Tool]]:
    """The registered tool factories by name, installed plugins included."""
    _PLUGINS.load()
    return dict(sorted(_FACTORIES.items()))


def get_tools(names: Sequence[str]) -> list[Tool]:
    """Fresh tools for ``names``; a ConfigError names the registered ones."""
    factories = tool_factories()
    if unknown := [n for n in names if n not in factories]:
        known = ", ".join(factories)
        raise ConfigError(f"unknown tools {', '.join(map(repr, unknown))}; known: {known}")
    return [factories[name]() for name in names]


def _registered(names: list[str]) -> list[str]:
    get_tools(names)  # unknown names: ConfigError, a ValueError, so pydantic reports it
    return names


ToolNames = Annotated[list[str], AfterValidator(_registered)]
"""A config field listing registered tools by name."""


# --- built-in tools -----------------------------------------------------------------------------


def python_tool(limits: Limits | None = None, *, max_chars: int = 4000) -> Tool:
    """Run a Python program in :mod:`maslab.sandbox` (default limits unless given); observe its
    status, stdout and stderr, cut to ``max_chars``."""

    async def run(code: str) -> str:
        result = await arun_python(code, limits=limits or Limits())
        streams = {"stdout": result.stdout, "stderr": result.stderr}
        parts = [f"{name}:\n{text.rstrip()}" for name, text in streams.items() if text.strip()]
        text = "\n".join([f"status: {result.status}", *parts])
        return text if len(text) <= max_chars else text[:max_chars] + "\n[output truncated]"

    code = {"type": "string", "description": "a complete program; print the results you need"}
    return Tool("python", "Run Python code in a sandbox (no network).", {"code": code}, run)


def _number(value: float) -> str:
    """Integers exactly (``5.0`` as ``5``), other numbers to 12 significant digits."""
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    return f"{value:.12g}"


def _arithmetic(name: str, description: str, op: Callable[[Any, Any], Any]) -> Tool:
    async def run(a: float, b: float) -> str:
        return _number(op(a, b))

    operands = {"a": {"type": "number"}, "b": {"type": "number"}}
    return Tool(name, description, operands, run)


def _compare() -> Tool:
    async def run(a: float, b: float) -> str:
        sign = "<" if a < b else ">" if a > b else "="
        return f"{_number(a)} {sign} {_number(b)}"

    operands = {"a": {"type": "number"}, "b": {"type": "number"}}
    return Tool("compare", "Compare a with b: 'a < b', 'a = b' or 'a > b'.", operands, run)


register_tool("add", lambda: _arithmetic("add", "a + b.", operator.add))
register_tool("subtract", lambda: _arithmetic("subtract", "a - b.", operator.sub))
register_tool("multiply", lambda: _arithmetic("multiply", "a * b.", operator.mul))
register_tool("divide", lambda: _arithmetic("divide", "a / b.", operator.truediv))
register_tool("compare", _compare)
register_tool("python", python_tool)
