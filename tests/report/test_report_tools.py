"""Tool use in the report and the viewer: each call after the message that made it (native calls
matched by name, the text path's by turn), errored calls marked, long results folded, a failed
episode's turns and state difference near its score, tool counts in the tables; all of it
escaped. Runs without tools show none of it."""

from __future__ import annotations

import re
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from maslab.bench.evaluation import Score
from maslab.report import build_report
from maslab.report.tools_html import RESULT_SHOWN, placed
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace
from maslab.viewer.app import make_app
from maslab.viewer.runs import Run

ATTACK = "<script>alert(1)</script>"
LONG = "x" * (RESULT_SHOWN + 40)
DETAILS = {
    "turns": [True, False],
    "first_failed_turn": 1,
    "reason": "FileSystem.root differs",
    "difference": {
        "class": "FileSystem",
        "attribute": "root",
        "model": f"<Directory {ATTACK}>" + "y" * 400,
        "expected": "<Directory temp>",
    },
}


def tool(name: str, turn: int, result: str, error: bool = False, **arguments: object) -> dict:
    return {"turn": turn, "agent": "agent", "name": name, "arguments": arguments,
            "result": result, "error": error}  # fmt: skip


def said(content: str, round: int, *native: str) -> dict:
    """The agent's message; ``native``: the functions its reply called natively."""
    calls = [{"id": f"c{i}", "name": n, "arguments": "{}"} for i, n in enumerate(native)]
    return {"sender": "agent", "content": content, "round": round,
            "metadata": {"tool_calls": calls} if calls else {}}  # fmt: skip


TRACE = Trace.model_validate({
    "task_id": "mt0",
    "repeat": 0,
    "prompt": "Make a folder.",
    "messages": [
        said("", 0, "mkdir", "ls"), said("Made it.", 0),
        said('[{"name": "rm", "arguments": {}}]', 1), said("Could not.", 1),
    ],
    "tools": [
        tool("mkdir", 0, '{"made": "temp"}', dir_name=f"temp{ATTACK}"),
        tool("ls", 0, LONG),
        tool("rm", 1, f"error: unknown function '{ATTACK}'", error=True),
    ],
})  # fmt: skip


def tool_run(directory: Path) -> Path:
    store = RunStore(directory)
    store.open(Manifest(method="tool_agent", benchmark="bfcl_multi_turn", model="m",
                        evaluator="bfcl_state"))  # fmt: skip
    score = Score(value=0.0, correct=False, extracted="[]", explanation="turn 1: differs",
                  details=DETAILS)  # fmt: skip
    record = ResultRecord(task_id="mt0", status="ok", answer="[]", gold="[]", score=score,
                          tool_calls=3, tool_errors=1)  # fmt: skip
    store.append(record, TRACE)
    store.close()
    return directory


def plain_run(directory: Path) -> Path:
    store = RunStore(directory)
    store.open(Manifest(method="vanilla", benchmark="gsm8k", model="m", evaluator="math"))
    score = Score(value=1.0, correct=True, extracted="1")
    trace = Trace.model_validate({
        "task_id": "t0", "repeat": 0, "messages": [said("1", 0)],
    })  # fmt: skip
    store.append(ResultRecord(task_id="t0", status="ok", answer="1", score=score), trace)
    store.close()
    return directory


def check_transcript(html: str) -> None:
    """The calls after the messages that made them, marked, folded and escaped; the state
    difference cut and escaped."""
    assert ATTACK not in html
    made, closing, text_path = (html.index(s) for s in ("mkdir(", "Made it.", "rm({})"))
    assert made < closing < text_path
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert f"<code>mkdir({{&quot;dir_name&quot;:&quot;temp{escaped}&quot;}})</code>" in html
    assert f"error: unknown function &#x27;{escaped}&#x27;" in html
    failed = re.search(
        r'<div class="tool failed"><code>rm\(\{\}\)</code> <span class="fails">', html
    )
    assert failed is not None and html.count('class="fails"') == 1
    assert f"<summary>{'x' * RESULT_SHOWN}…</summary><pre>{LONG}</pre>" in html
    assert "✓ ✗ · first failed: turn 1 (FileSystem.root differs)" in html
    difference = html[html.index("<dt>State difference</dt>") :]
    difference = difference[: difference.index("</dd>")]
    assert "FileSystem.root\nmodel:    &lt;Directory &lt;script&gt;alert(1)" in difference
    assert "y" * 250 + "…\nexpected: &lt;Directory temp&gt;" in difference
    assert "3 tool calls, 1 errored" in html


def test_the_report_shows_tool_calls_in_place_and_the_state_difference(tmp_path):
    page = build_report([tool_run(tmp_path / "run")], tmp_path / "r.html").read_text()
    check_transcript(page)
    board = page[page.index('class="leaderboard"') : page.index("</table>")]
    assert "<th>Tool calls / sample</th><th>Tool errors / sample</th>" in board
    assert "<td>3.0</td><td>1.00</td>" in board


def test_a_report_of_runs_without_tools_shows_nothing_of_them(tmp_path):
    page = build_report([plain_run(tmp_path / "run")], tmp_path / "r.html").read_text()
    assert "Tool calls" not in page and '<div class="tools">' not in page
    assert "tool call" not in page and "<dt>Turns" not in page


async def test_the_viewer_shows_tool_calls_in_place_and_the_state_difference(tmp_path):
    runs = [Run.open(0, tool_run(tmp_path / "run")), Run.open(1, plain_run(tmp_path / "plain"))]
    async with TestClient(TestServer(make_app(runs))) as client:
        sample = await (await client.get("/sample?run=0&task=mt0&repeat=0")).text()
        listed = await (await client.get("/")).text()
        plain = await (await client.get("/?run=1")).text()
        plain_sample = await (await client.get("/sample?run=1&task=t0&repeat=0")).text()
    check_transcript(sample)
    assert "<th>Tool calls / sample</th>" in listed and "<td>3 (1 errored)</td>" in listed.replace(
        '<td class="num">', "<td>"
    )
    samples = plain[plain.index('id="samples"') :]
    assert "Tool calls" not in samples and "tool call" not in plain_sample


def test_calls_follow_their_native_message_else_their_agents_first_message_of_the_turn():
    messages = TRACE.messages
    after, apart = placed(messages, TRACE.tools)
    assert [[t.name for t in shown] for shown in after] == [["mkdir", "ls"], [], ["rm"], []]
    assert apart == []
    # a call of a turn in which its agent said nothing is placed after no message
    after, apart = placed(messages[:2], TRACE.tools)
    assert [t.name for t in apart] == ["rm"]
