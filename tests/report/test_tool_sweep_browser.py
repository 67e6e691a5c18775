"""A sweep of the tool-using methods (tool_agent, planner_executor, conductor) over BFCL's
single- and multi-turn benchmarks, on a scripted model that replays the ground truth natively
but leaves out the first multi-turn task's first turn's last call: every cell finishes, and the
sweep's report, opened in a real headless Chromium, shows the transcripts' tool calls (name,
arguments, result) and the failed episode's state difference, and its leaderboard (with the
tool columns) fits a page 1400 pixels wide; screenshots show something."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from bfcl_play import Turns, gold_calls, native_calls, sample_of, single_answer
from browser import HEIGHT, WIDTH, Browser, check_screenshot, find_chromium
from helpers import agent_of

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.types import ChatRequest
from maslab.testing import Reply, ScriptedModel

pytestmark = [
    pytest.mark.skipif(find_chromium() is None, reason="no chromium binary"),
    pytest.mark.usefixtures("bfcl_wheel"),
]

METHODS = ["tool_agent", "planner_executor", "conductor"]
BENCHMARKS = ["bfcl_single", "bfcl_multi_turn"]
LIMIT = 2
OPENING = "Write your plan and take your first action."  # the conductor's planner, each turn
TURN = re.compile(r"turn (\d+)")


def action(name: str, **arguments: object) -> str:
    return json.dumps({"thought": "", "plan": [], "action": name, "arguments": arguments})


class Play:
    """The replies of every method's agents: the planner of planner_executor writes one step per
    turn, the conductor's planner delegates one task per turn to the group of the turn's first
    call and then finishes; an acting agent makes its turn's calls (its group's, for a
    specialist) and closes once their results are back. ``perturbed``: the multi-turn tasks
    whose first turn is played without its last call (a file not moved: a state difference)."""

    def __init__(self) -> None:
        single = get_benchmark("bfcl_single")().load(limit=LIMIT)
        multi = get_benchmark("bfcl_multi_turn")()
        tasks = multi.load(limit=LIMIT)
        self.answers = {t.id: single_answer(t) for t in single}
        self.turns: dict[str, Turns] = {t.id: gold_calls(t) for t in tasks}
        self.groups = {t.id: multi.environment(t).function_groups() for t in tasks}
        self.perturbed = {tasks[0].id}

    def respond(self, request: ChatRequest) -> Reply | str:
        sample, agent = sample_of(request), agent_of(request)
        users = [m["content"] for m in request.messages if m["role"] == "user"]
        if agent == "planner":
            return self.plan(sample, users)
        if request.messages[-1]["role"] == "tool" or users[-1].startswith("Results"):
            return "Done."
        if sample in self.answers:
            return native_calls(self.answers[sample])
        named = TURN.findall(users[-1])
        turn = int(named[-1]) if named else len(users) - 1
        groups = self.groups[sample]
        calls = self.turns[sample][turn]
        if sample in self.perturbed and turn == 0:
            calls = calls[:-1]
        if agent in set(groups.values()) | {"functions"}:  # a conductor's specialist
            calls = [c for c in calls if groups.get(c["name"], "functions") == agent]
        return native_calls(calls) if calls else "Nothing to call."

    def plan(self, sample: str, users: list[str]) -> str:
        openings = [i for i, u in enumerate(users) if OPENING in u]
        if not openings:  # planner_executor's planner
            return json.dumps({"steps": [f"turn {len(users) - 1}"]})
        turn, delegated = len(openings) - 1, len(users) - 1 - openings[-1]
        if sample in self.answers:
            return action("functions", task="Make the calls.")
        calls = self.turns[sample][turn]
        if delegated or not calls:
            return action("final_answer", answer="Done.")
        group = self.groups[sample].get(calls[0]["name"], "functions")
        return action(group, task=f"Do the calls of turn {turn}.")


@pytest.fixture
def playing(monkeypatch) -> str:
    """A ``bfclplay:`` provider serving :class:`Play` natively; its spec."""
    play = Play()
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("bfclplay")(
        lambda name, settings: ScriptedModel(
            play.respond, name=f"bfclplay:{name}", native=["tools"]
        )
    )
    return "bfclplay:truth"


def results(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


async def test_a_tool_sweep_report_shows_calls_and_state_differences_in_chromium(
    tmp_path, playing, capsys
):
    out = tmp_path / "sweep"
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {out}\nmodels: ['{playing}']\nmethods: {json.dumps(METHODS)}\n"
        f"benchmarks: {json.dumps(BENCHMARKS)}\nlimit: {LIMIT}\ncache: false\n"
    )
    status = await asyncio.to_thread(main, ["sweep", str(sweep), "--quiet"])
    assert status == 0, capsys.readouterr().out
    assert "sweep done: 6 of 6 runs finished" in capsys.readouterr().out
    for benchmark in BENCHMARKS:
        for method in METHODS:
            records = results(out / benchmark / method / "bfclplay_truth")
            assert len(records) == LIMIT and all(r["status"] == "ok" for r in records)
            correct = {r["task_id"]: r["score"]["correct"] for r in records}
            assert correct == (
                {"multi_turn_base_0": False, "multi_turn_base_1": True}
                if benchmark == "bfcl_multi_turn"
                else {"simple_python_0": True, "simple_python_1": True}
            )
    page = out / "report.html"
    assert page.is_file()

    async with Browser.start(tmp_path / "profile") as browser:
        for width in (1400, WIDTH):  # the leaderboard fits the wider; screenshots are the other
            await browser.send("Emulation.setDeviceMetricsOverride", width=width, height=HEIGHT,
                               deviceScaleFactor=1, mobile=False)  # fmt: skip
            await browser.goto(page.as_uri())
            right, window = await browser.evaluate(
                "[document.querySelector('.leaderboard').getBoundingClientRect().right, innerWidth]"
            )
            assert right <= window and "Tool calls" in await browser.text(".leaderboard")
        check_screenshot(shot := await browser.screenshot())
        (tmp_path / "report.png").write_bytes(shot)
        # every multi-turn cell's transcripts show calls: name(arguments) over a result
        calls = await browser.evaluate(
            "[...document.querySelectorAll('div.tools div.tool')].map(t => ["
            "t.querySelector('code').textContent, t.querySelector('pre').textContent])"
        )
        assert len(calls) >= len(METHODS) * 6  # at least the right episode's 6 in each cell
        assert ['cd({"folder":"document"})', '{"current_working_directory": "document"}'] in calls
        assert all(re.fullmatch(r"\w+\(\{.*\}\)", code, re.S) for code, _ in calls)
        assert any(result.strip() for _, result in calls)
        # a failed episode: its turns and the state difference, open to read
        difference = await browser.evaluate(
            "(() => { const dt = [...document.querySelectorAll('dt')]"
            ".find(d => d.textContent === 'State difference'); if (!dt) return null;"
            " const s = dt.closest('details.sample'); if (s) s.open = true;"
            " dt.scrollIntoView({block: 'center'}); const r = dt.getBoundingClientRect();"
            " return [dt.nextElementSibling.innerText, r.width, r.height]; })()"
        )
        assert difference is not None, "no state difference in the report"
        text, width, height = difference
        assert text.startswith("GorillaFileSystem.root\nmodel:") and "\nexpected:" in text
        assert width > 0 and height > 0
        assert await browser.evaluate(
            "[...document.querySelectorAll('dt')].filter(d => d.textContent === "
            "'State difference').length"
        ) == len(METHODS)
        check_screenshot(shot := await browser.screenshot())
        (tmp_path / "difference.png").write_bytes(shot)
    print(f"screenshots: {tmp_path / 'report.png'}, {tmp_path / 'difference.png'}")
