"""JSON replies and tool calls: native where the model handle supports them, in text where not.

A method writes one call whose prompt asks for the JSON, and adds the keywords these helpers
return: for a model that supports structured output, :func:`json_params` adds the schema as a
``response_format`` (the server constrains the reply to it); for one that supports tools,
:func:`tool_params` offers the functions natively. Otherwise both add nothing and the call is the
plain text call. Replies are read the same defensive way on both paths
(:func:`maslab.kit.parsing.parse_model`, :func:`reply_call`), so the path changes neither the number
of calls nor how a reply is read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from maslab.core.messages import Message
from maslab.kit.parsing import parse_json_object
from maslab.kit.tools import Tool, ToolCall, parse_tool_call
from maslab.llm.types import Feature

STRING: dict[str, Any] = {"type": "string"}


def object_schema(**properties: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema object with these properties, every one required and no others (the form
    OpenAI's strict structured output takes)."""
    return {
        "type": "object",
        "properties": {name: dict(schema) for name, schema in properties.items()},
        "required": list(properties),
        "additionalProperties": False,
    }


def native(model: object, feature: Feature) -> bool:
    """Whether ``model`` does ``feature`` natively (a handle without ``supports`` does not)."""
    supports = getattr(model, "supports", None)
    return callable(supports) and bool(supports(feature))


def json_params(
    model: object, name: str, schema: Mapping[str, Any], *, strict: bool = True
) -> dict[str, Any]:
    """Call keywords that ask ``model`` for JSON matching ``schema``: a ``json_schema`` response
    format called ``name`` when it supports structured output, none otherwise. ``strict`` asks
    for exact enforcement (on OpenAI only for schemas in :func:`object_schema`'s form)."""
    if not native(model, "structured_output"):
        return {}
    json_schema = {"name": name, "schema": dict(schema), "strict": strict}
    return {"response_format": {"type": "json_schema", "json_schema": json_schema}}


def tool_params(model: object, tools: Sequence[Tool]) -> dict[str, Any]:
    """Call keywords that offer ``tools`` to ``model`` as native functions when it supports them
    (the model decides whether to call; a reply in text is still read), none otherwise."""
    if not native(model, "tools"):
        return {}
    return {"tools": [tool.spec() for tool in tools], "tool_choice": "auto"}


def reply_call(message: Message) -> ToolCall | None:
    """The first tool call of an agent's reply: native, else written as JSON in its text.

    Native arguments that are not a JSON object count as none (the tool then names the missing
    ones).
    """
    calls = message.metadata.get("tool_calls")
    if calls:
        return ToolCall(name=calls[0].name, arguments=parse_json_object(calls[0].arguments) or {})
    return parse_tool_call(message.content)
