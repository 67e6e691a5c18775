"""One model call of a trace as HTML, the same in the report and in the viewer: a summary line
(agent, round, model, tokens, time, cached, cut short, error) over the chat it sent and the
reply. Everything from the trace is escaped."""

from __future__ import annotations

from html import escape

from maslab.store.records import TraceCall


def call_html(call: TraceCall, known: int = 0) -> str:
    """``call``'s details; its first ``known`` messages are said to be its agent's previous
    call and reply, not shown again."""
    about = [
        str(call.agent),
        None if call.round is None else f"round {call.round}",
        call.model,
        f"{call.prompt_tokens} + {call.completion_tokens} tokens",
        f"{call.latency_s:.2f} s"
        + (f" ({call.queued_s:.2f} s queued at the server)" if call.queued_s >= 0.005 else ""),
        "cached" if call.cached else None,
        "cut at max_tokens" if call.finish_reason == "length" else None,
        f"error: {call.error}" if call.error else None,
    ]
    chat = "".join(
        f"<pre><b>{escape(m.role)}</b>\n{escape(m.content)}</pre>" for m in call.messages[known:]
    )
    if known:
        earlier = f"as the previous call of {call.agent} and its reply ({known} messages), then:"
        chat = f'<p class="muted">{escape(earlier)}</p>{chat}'
    response = call.response
    reply = "" if response is None else f"<b>response</b><pre>{escape(response)}</pre>"
    tools = "".join(f"{c.name}({c.arguments})\n" for c in call.tool_calls)
    if tools:
        reply += f"<b>tool calls</b><pre>{escape(tools)}</pre>"
    title = escape(" · ".join(filter(None, about)))
    return f"<details><summary>{title}</summary>{chat}{reply}</details>"
