"""JSON replies and tool calls: native where the model handle supports them, in text where not.

A JSON reply is declared once, as a :class:`Reply` model; :func:`ask` derives the rest from it:
the text that tells the model the reply's shape, the JSON schema sent as a ``response_format``
when the model supports structured output (the server then constrains the reply to it), and the
defensive parsing (:func:`maslab.kit.parsing.parse_model`). Functions go the same way:
:func:`tool_params` offers them natively where the model has tools (the tool loop,
:func:`maslab.kit.acting.act`, reads a call either way). The path changes neither the number of
calls nor how a reply is read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel

from maslab.core.agents import Agent
from maslab.core.messages import Message
from maslab.kit.parsing import parse_model
from maslab.llm.types import Feature

R = TypeVar("R", bound="Reply")


class Reply(BaseModel):
    """A JSON reply a method asks a model for, declared once as a pydantic model.

    Its fields (with ``Field(description=...)`` where the name alone does not say what to write)
    give the JSON schema (:meth:`json_schema`), the shape the prompt shows (:meth:`instructions`)
    and the parsing (:meth:`parse`). Read text fields as :data:`~maslab.kit.parsing.Text` and
    yes/no fields as :data:`~maslab.kit.parsing.Flag`; give every field a default unless a reply
    without it is no reply. A field whose wire form differs from its Python type says so with
    ``WithJsonSchema``. Unknown keys are ignored.
    """

    json_name: ClassVar[str] = ""
    """The schema's name in a ``response_format`` (default: the class name in lower case)."""
    strict: ClassVar[bool] = True
    """Ask the server for exact enforcement (OpenAI's strict mode)."""

    @classmethod
    def schema_name(cls) -> str:
        return cls.json_name or cls.__name__.lower()

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The reply's JSON schema in strict form: every property required, no others, no
        titles or defaults, nested models inlined."""
        schema = cls.model_json_schema()
        return _strict(schema, schema.get("$defs", {}))

    @classmethod
    def instructions(cls) -> str:
        """What the prompt says about the reply: its shape, with each value described."""
        return f"Reply with a JSON object only: {_shape(cls.json_schema())}."

    @classmethod
    def native_params(cls, model: object) -> dict[str, Any]:
        """Call keywords that constrain ``model``'s reply to the schema where it supports
        structured output (:func:`json_params`), for a call that does not go through :func:`ask`
        (a judge's, a reply whose shape the task's instruction already shows)."""
        return json_params(model, cls.schema_name(), cls.json_schema(), strict=cls.strict)

    @classmethod
    def parse(cls, text: str) -> Self | None:
        """The first JSON object in ``text`` that this model accepts, or None."""
        return parse_model(text, cls)


def _strict(node: Any, defs: Mapping[str, Any]) -> Any:
    """``node`` of a pydantic JSON schema in strict form (see :meth:`Reply.json_schema`)."""
    if isinstance(node, list):
        return [_strict(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _strict(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    out = {
        key: _strict(value, defs)
        for key, value in node.items()
        if key not in {"title", "default", "$defs"}
        and not (key == "description" and "properties" in node)
    }
    if "properties" in node:
        out["properties"] = {k: _strict(v, defs) for k, v in node["properties"].items()}
        out["required"] = list(node["properties"])
        out["additionalProperties"] = False
    return out


def _shape(schema: Mapping[str, Any]) -> str:
    """How a value of ``schema`` is written, for a prompt: keys and literals as JSON, free values
    as ``"<what>"`` (strings) or ``<what>`` (numbers)."""
    if "enum" in schema:
        return " or ".join(json.dumps(value) for value in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_shape(option) for option in schema["anyOf"])
    kind, what = schema.get("type"), schema.get("description")
    if kind == "object" and "properties" in schema:
        fields = ", ".join(f"{json.dumps(k)}: {_shape(v)}" for k, v in schema["properties"].items())
        return "{" + fields + "}"
    if kind == "array":
        return f"[{_shape(schema.get('items', {}))}, ...]"
    if kind == "boolean":
        return "true or false"
    if kind == "null":
        return "null"
    if kind in {"integer", "number"}:
        return f"<{what or ('an integer' if kind == 'integer' else 'a number')}>"
    if kind == "string":
        return f'"<{what}>"' if what else '"..."'
    return f"<{what or 'any JSON value'}>"


async def ask(agent: Agent, prompt: str, reply: type[R], **params: Any) -> tuple[Message, R | None]:
    """Ask ``agent`` for a ``reply``: ``prompt``, then the reply's :meth:`~Reply.instructions`;
    natively constrained to its schema where the model supports structured output. Returns the
    message and the parsed reply (None when the text holds no JSON object the model accepts).
    ``params`` go to :meth:`Agent.reply <maslab.core.agents.Agent.reply>` (``round``, ``kind``,
    sampling, ...)."""
    said = await agent.reply(
        f"{prompt}\n\n{reply.instructions()}",
        **params,
        **reply.native_params(agent.model),
    )
    return said, reply.parse(said.content)


def native(model: object, feature: Feature) -> bool:
    """Whether ``model`` does ``feature`` natively (a handle without ``supports`` does not)."""
    supports = getattr(model, "supports", None)
    return callable(supports) and bool(supports(feature))


def json_params(
    model: object, name: str, schema: Mapping[str, Any], *, strict: bool = True
) -> dict[str, Any]:
    """Call keywords that ask ``model`` for JSON matching ``schema``: a ``json_schema`` response
    format called ``name`` when it supports structured output, none otherwise. ``strict`` asks
    for exact enforcement (on OpenAI only for schemas in the form :meth:`Reply.json_schema`
    gives: every property required, no others)."""
    if not native(model, "structured_output"):
        return {}
    json_schema = {"name": name, "schema": dict(schema), "strict": strict}
    return {"response_format": {"type": "json_schema", "json_schema": json_schema}}


def tool_params(model: object, functions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Call keywords that offer ``functions`` (specs: ``{"name", "description", "parameters"}``)
    to ``model`` as native tools when it supports them (the model decides whether to call; a
    reply in text is still read), none otherwise."""
    if not native(model, "tools"):
        return {}
    tools = [{"type": "function", "function": dict(function)} for function in functions]
    return {"tools": tools, "tool_choice": "auto"}
