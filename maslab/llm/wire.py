"""The chat-completions wire format as a server speaks it: a request body read into a
:class:`~maslab.llm.types.ChatRequest`, and the JSON (or server-sent events) that answers it,
errors in OpenAI's form. What the fake server (:mod:`maslab.testing.fake_server`) and the
front door of an external system (:mod:`maslab.kit.front_door`) share."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from aiohttp import web

from maslab.llm.types import ChatRequest, FunctionCall, make_request

REQUEST_PARAMS = (
    "temperature", "top_p", "max_tokens", "stop", "seed",
    "tools", "tool_choice", "response_format", "logprobs", "top_logprobs",
)  # fmt: skip
"""The body fields a request carries over (the others: ``model``, ``user``, ``stream``...)."""


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, headers=headers, content_type="application/json"
    )


def error_response(
    status: int,
    message: str,
    kind: str,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """An OpenAI-style error response."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json_response(body, status, headers)


def _is_message(m: object) -> bool:
    """A role and text content (none only beside tool calls)."""
    if not (isinstance(m, dict) and isinstance(m.get("role"), str)):
        return False
    return isinstance(m.get("content"), str) or (m.get("content") is None and "tool_calls" in m)


def parse_chat(raw: bytes) -> tuple[dict[str, Any], ChatRequest]:
    """The JSON body and the request it describes; ValueError when it is not a chat request."""
    body = orjson.loads(raw)
    messages = body.get("messages") if isinstance(body, dict) else None
    if not (isinstance(messages, list) and messages and all(map(_is_message, messages))):
        raise ValueError("'messages' must be a non-empty list of {role, content} objects")
    return body, make_request(messages, **{k: body.get(k) for k in REQUEST_PARAMS})


def completion_body(
    number: str,
    model: str,
    text: str,
    finish: str | None,
    tool_calls: Sequence[FunctionCall] = (),
    usage: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` object: one choice, its message's text and tool calls, why it
    ended, and the token counts (left out when None)."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [c.to_wire() for c in tool_calls]
    body: dict[str, Any] = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        body["usage"] = {**usage, "total_tokens": sum(usage.values())}
    return body


def stream_events(body: Mapping[str, Any]) -> bytes:
    """``body`` (a completion, :func:`completion_body`) as server-sent events: a chunk with the
    role and the text, one per tool call, a last chunk with why it ended (and the usage), then
    ``[DONE]``."""
    message, choice = body["choices"][0]["message"], body["choices"][0]
    head = {k: body[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> bytes:
        event = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(event | more) + b"\n\n"

    events = [chunk({"role": "assistant", "content": message["content"]})]
    for i, call in enumerate(message.get("tool_calls", ())):
        events.append(chunk({"tool_calls": [{"index": i, **call}]}))
    usage = {"usage": body["usage"]} if "usage" in body else {}
    events.append(chunk({}, choice["finish_reason"], **usage))
    return b"".join(events) + b"data: [DONE]\n\n"
