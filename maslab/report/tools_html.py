"""Tool use in a transcript as HTML, the same in the report and in the viewer: the calls on the
sample's environment after the message that made them, a sample's count of calls and errors,
and a failed episode's per-turn verdicts and state difference (``bfcl_state``'s
``score.details``). Everything from the trace or the record is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from maslab.bench.evaluation import Score
from maslab.store.records import ResultRecord, TraceMessage, TraceTool

RESULT_SHOWN = 160
"""Characters of a call's result shown before the rest folds away (a trace keeps a result cut
to its own bound already)."""
VALUE_SHOWN = 300
"""Characters of each value of a state difference."""

CSS = """.tools { margin: 0 0 0.8em 1.5em; border-left: 3px solid #d8dee6; padding-left: 0.7em; }
.tool { margin: 0.25em 0; } .tool > code { word-break: break-word; }
.tool pre { margin: 0.2em 0 0.4em; } .tool details { margin: 0.2em 0; }
.tool.failed > code { color: #9b1c1c; }
.tool .fails { font-size: 0.8em; font-weight: 600; padding: 0 0.4em; border-radius: 4px;
  background: #fbe1e1; color: #9b1c1c; }
"""


def placed(
    messages: Sequence[TraceMessage], tools: Sequence[TraceTool]
) -> tuple[list[list[TraceTool]], list[TraceTool]]:
    """The calls to show after each message, and those that belong after none.

    A message whose metadata lists its native ``tool_calls`` takes, in order, the next calls of
    its agent with those names. The others (the text path records no calls per message) go
    after the first message of their agent in the round numbered as their turn (a method that
    numbers rounds by turn, as the tool loop's do), in the order they ran; the rest are apart.
    """
    pending: dict[str | None, list[int]] = {}
    for i, tool in enumerate(tools):
        pending.setdefault(tool.agent, []).append(i)
    after: list[list[int]] = [[] for _ in messages]
    first: dict[tuple[str, int | None], int] = {}
    for at, message in enumerate(messages):
        first.setdefault((message.sender, message.round), at)
        queue = pending.get(message.sender, [])
        for asked in message.metadata.get("tool_calls", ()):
            if queue and isinstance(asked, Mapping) and tools[queue[0]].name == asked.get("name"):
                after[at].append(queue.pop(0))
    apart: list[int] = []
    for agent, queue in pending.items():
        for i in queue:
            place = first.get((str(agent), tools[i].turn))
            (apart if place is None else after[place]).append(i)
    return [[tools[i] for i in sorted(shown)] for shown in after], [tools[i] for i in sorted(apart)]


def call_text(tool: TraceTool) -> str:
    """A call as the report and ``maslab show`` write it: ``name({compact JSON arguments})``."""
    return f"{tool.name}({json.dumps(tool.arguments, ensure_ascii=False, separators=(',', ':'))})"


def tools_html(tools: Sequence[TraceTool]) -> str:
    """The calls, each as ``name({arguments})`` over its result; an errored call is marked, and a
    long result shows its first :data:`RESULT_SHOWN` characters, the whole on opening."""
    if not tools:
        return ""
    turns = sorted({t.turn for t in tools})
    about = f"{len(tools)} tool call{'s' if len(tools) > 1 else ''} · turn " + ", ".join(
        map(str, turns)
    )
    items = []
    for t in tools:
        result = t.result
        if len(result) > RESULT_SHOWN:
            shown = (
                f"<details><summary>{escape(result[:RESULT_SHOWN])}…</summary>"
                f"<pre>{escape(result)}</pre></details>"
            )
        else:
            shown = f"<pre>{escape(result)}</pre>"
        mark = ' <span class="fails">error</span>' if t.error else ""
        items.append(
            f'<div class="tool{" failed" if t.error else ""}"><code>{escape(call_text(t))}'
            f"</code>{mark}{shown}</div>"
        )
    return f'<div class="tools"><div class="muted">{escape(about)}</div>{"".join(items)}</div>'


def tool_counts(record: ResultRecord) -> str | None:
    """'8 tool calls, 1 errored'; None for a sample that made none."""
    if not record.tool_calls:
        return None
    calls = f"{record.tool_calls} tool call{'s' if record.tool_calls > 1 else ''}"
    return f"{calls}, {record.tool_errors} errored" if record.tool_errors else calls


def per_sample(records: Sequence[ResultRecord]) -> tuple[str, str] | None:
    """The tool calls and tool errors per sample over ``records``; None when none made any."""
    if not any(r.tool_calls for r in records):
        return None
    n = len(records)
    return (
        f"{sum(r.tool_calls for r in records) / n:.1f}",
        f"{sum(r.tool_errors for r in records) / n:.2f}",
    )


def episode_facts(score: Score | None) -> dict[str, str]:
    """A multi-turn verdict's facts, as text: each turn's verdict with the first failing turn
    and why, and the state difference behind it (the model's value and the expected one, each
    cut to :data:`VALUE_SHOWN`); none for a score without per-turn verdicts."""
    details: Mapping[str, Any] = score.details if score else {}
    turns = details.get("turns")
    if not isinstance(turns, list):
        return {}
    verdicts = " ".join("✓" if passed else "✗" for passed in turns)
    facts = {"Turns": verdicts}
    if "first_failed_turn" in details:
        facts["Turns"] += f" · first failed: turn {details['first_failed_turn']}"
        if reason := details.get("reason"):
            facts["Turns"] += f" ({reason})"
    difference = details.get("difference")
    if isinstance(difference, Mapping):
        where = f"{difference.get('class')}.{difference.get('attribute')}"
        facts["State difference"] = (
            f"{where}\nmodel:    {_cut(difference.get('model'))}\n"
            f"expected: {_cut(difference.get('expected'))}"
        )
    return facts


def _cut(value: object) -> str:
    text = str(value)
    return text if len(text) <= VALUE_SHOWN else text[:VALUE_SHOWN] + "…"
