"""One model call of a trace as HTML, the same in the report and in the viewer: a summary line
(agent, round, model, tokens, time, cached, cut short, error) over the chat it sent and the
reply. Everything from the trace is escaped."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any


def call_html(call: Mapping[str, Any], known: int = 0) -> str:
    """``call``'s details; its first ``known`` messages are said to be its agent's previous
    call and reply, not shown again."""
    about = [
        str(call.get("agent")),
        None if call.get("round") is None else f"round {call['round']}",
        call.get("model"),
        f"{call.get('prompt_tokens', 0)} + {call.get('completion_tokens', 0)} tokens",
        f"{call.get('latency_s', 0):.2f} s",
        "cached" if call.get("cached") else None,
        "cut at max_tokens" if call.get("finish_reason") == "length" else None,
        f"error: {call['error']}" if call.get("error") else None,
    ]
    chat = "".join(
        f"<pre><b>{escape(str(m.get('role')))}</b>\n{escape(str(m.get('content')))}</pre>"
        for m in (call.get("messages") or ())[known:]
    )
    if known:
        earlier = (
            f"as the previous call of {call.get('agent')} and its reply ({known} messages), then:"
        )
        chat = f'<p class="muted">{escape(earlier)}</p>{chat}'
    response = call.get("response")
    reply = "" if response is None else f"<b>response</b><pre>{escape(str(response))}</pre>"
    tools = "".join(
        f"{c.get('name')}({c.get('arguments')})\n" for c in call.get("tool_calls") or ()
    )
    if tools:
        reply += f"<b>tool calls</b><pre>{escape(tools)}</pre>"
    title = escape(" · ".join(filter(None, about)))
    return f"<details><summary>{title}</summary>{chat}{reply}</details>"
