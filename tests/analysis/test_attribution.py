"""Failure attribution (``maslab attribute``): on runs with a planted faulty agent (a debate and a
pipeline), each strategy finds that agent and its step with its stated number of judge calls;
the attributions are recorded beside the run, whose files stay as they were, and a second
invocation attributes nothing again. The judge here is a scripted stand-in that reads the log
it is shown the way a perfect judge would (it spots the planted marker), so what is tested is
what each strategy shows and how it narrows down, not a model's judgement."""

from __future__ import annotations

import json
import math
import re

import pytest
from helpers import lines

import maslab
from maslab.analysis.attribution import calls_bound
from maslab.analysis.strategies import STRATEGIES
from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.method import get_method
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import ChatRequest
from maslab.store.run_store import RunStore

TASKS = 3
MARK = "I will simply guess"
_STEP = re.compile(r"^\[step (\d+)\] ", re.M)
_HALF = re.compile(r"first half \(steps (\d+) to (\d+)\)")
PIPELINE = {
    "nodes": {"reader": "You restate the problem.", "solver": "You solve it.",
              "checker": "You check the solution.", "writer": "You state the final answer."},
    "edges": [["reader", "solver"], ["solver", "checker"], ["checker", "writer"]],
}  # fmt: skip


def agent_of(request: ChatRequest) -> str:
    return request.scope.split("\x1f")[-1]


class Planted:
    """A team that answers arith tasks right, except the faulty agent, which guesses wrong on
    every task (its message carries :data:`MARK`), and every agent after it, which copies it."""

    def __init__(self, faulty: str, followers: tuple[str, ...]) -> None:
        self.tasks = get_benchmark("arith")().load(limit=TASKS)
        self.faulty, self.followers = faulty, followers

    def respond(self, request: ChatRequest) -> str:
        text = "\n".join(str(m.get("content")) for m in request.messages)
        task = next(t for t in self.tasks if t.question in text)
        agent, gold = agent_of(request), int(task.gold or 0)
        if agent == self.faulty:
            return f"{MARK}: the answer is \\boxed{{{gold + 7}}}."
        if agent in self.followers and "guess" in text:
            return f"{agent} agrees with the guess: \\boxed{{{gold + 7}}}."
        return f"{agent} works it through: \\boxed{{{gold}}}."


def judge(request: ChatRequest) -> str:
    """A perfect judge's replies for each strategy, from the log it is shown."""
    prompt = request.messages[-1]["content"]
    shown = {int(m.group(1)): m.start() for m in _STEP.finditer(prompt)}
    planted = [i for i, start in shown.items() if MARK in prompt[start:].split("\n[step ")[0]]
    if "first half" in prompt:
        first, last = map(int, _HALF.search(prompt).groups())
        half = "first" if any(first <= i <= last for i in planted) else "second"
        return json.dumps({"half": half, "reason": "the guess"})
    if "Judge this step only" in prompt:
        latest = max(shown)
        return json.dumps({"decisive": latest in planted, "reason": "the guess"})
    return json.dumps({"step": min(planted), "reason": "it guessed instead of computing"})


@pytest.fixture
def providers(monkeypatch):
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("judge")(lambda name, settings: ScriptedModel(judge, name="judge:perfect"))
    return monkeypatch


def planted_run(tmp_path, method: str, planted: Planted, **config) -> maslab.RunResult:
    register_provider("team")(lambda name, settings: ScriptedModel(planted.respond, name="team"))
    return maslab.evaluate(get_method(method)(**config), "arith", "team:x", limit=TASKS,
                           cache=False, out=tmp_path / method, progress=False)  # fmt: skip


def expected_steps(run: maslab.RunResult) -> dict[tuple[str, int], tuple[int, str, int]]:
    """Per failed sample: the planted step (the first message with the marker), its sender and
    the transcript's length."""
    found = {}
    for trace in RunStore(run.dir).traces():
        step = next(i for i, m in enumerate(trace.messages) if MARK in m.content)
        found[trace.key] = (step, trace.messages[step].sender, len(trace.messages))
    return found


@pytest.mark.parametrize(
    ("method", "faulty", "followers", "config", "role"),
    [
        ("llm_debate", "debater_2", ("debater_1", "debater_3"), {}, "debater"),
        ("dag_pipeline", "solver", ("checker", "writer"), PIPELINE, "node"),
    ],
)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_strategy_finds_the_planted_agent_and_step(
    providers, tmp_path, capsys, method, faulty, followers, config, role, strategy
):
    run = planted_run(tmp_path, method, Planted(faulty, followers), **config)
    assert run.summary.correct == 0  # the planted agent sank every task
    before = {name: (run.dir / name).read_bytes() for name in ("results.jsonl", "traces.jsonl")}
    expected = expected_steps(run)
    assert (
        main(["attribute", str(run.dir), "--judge-model", "judge:x", "--strategy", strategy]) == 0
    )
    out = capsys.readouterr().out
    records = RunStore(run.dir).attributions()
    assert {(a.task_id, a.repeat) for a in records} == set(expected) and len(records) == TASKS
    for a in records:
        step, sender, steps = expected[(a.task_id, a.repeat)]
        assert (a.agent, a.step, a.steps) == (sender, step, steps) and sender == faulty
        assert a.role == role and a.reason
        calls = {"all_at_once": 1, "step_by_step": step + 1,
                 "binary_search": math.ceil(math.log2(steps))}[strategy]  # fmt: skip
        assert a.calls == calls <= calls_bound(strategy, steps)
        assert a.prompt_tokens > 0 and (a.strategy, a.judge) == (strategy, "judge:x")
    assert f"{TASKS} failed samples, {TASKS} attributed; now {TASKS}," in out
    assert re.search(rf"{method}\s+{role}\s+{TASKS}\s+100%", out)
    # the run's own files are untouched, and the next invocation has nothing left to do
    assert {n: (run.dir / n).read_bytes() for n in before} == before
    assert (
        main(["attribute", str(run.dir), "--judge-model", "judge:x", "--strategy", strategy]) == 0
    )
    assert "now 0, 0 judge calls" in capsys.readouterr().out
    assert len(lines(run.dir / "attributions.jsonl")) == TASKS


def test_an_unreadable_judge_leaves_samples_unattributed_or_takes_the_first_half(
    providers, tmp_path, capsys
):
    run = planted_run(tmp_path, "llm_debate", Planted("debater_2", ("debater_1", "debater_3")))
    register_provider("mute")(lambda name, settings: ScriptedModel(lambda r: "no idea"))
    for strategy in STRATEGIES:
        assert main(["attribute", str(run.dir), "--judge-model", "mute:x",
                     "--strategy", strategy]) == 0  # fmt: skip
    by = {s: [a for a in RunStore(run.dir).attributions() if a.strategy == s] for s in STRATEGIES}
    assert all(a.agent is None and a.step is None for a in by["all_at_once"])
    assert all(a.agent is None and a.calls == a.steps for a in by["step_by_step"])
    assert all(a.step == 0 and a.agent == "debater_1" for a in by["binary_search"])
    assert "(none)" in capsys.readouterr().out


def test_a_run_being_written_is_not_attributed(providers, tmp_path, capsys):
    run = planted_run(tmp_path, "llm_debate", Planted("debater_2", ("debater_1", "debater_3")))
    writer = RunStore(run.dir)
    writer.open(writer.manifest())
    try:
        assert main(["attribute", str(run.dir), "--judge-model", "judge:x"]) == 2
        assert "being written by another maslab process" in capsys.readouterr().err
    finally:
        writer.close()
    assert not (run.dir / "attributions.jsonl").exists()


def test_the_trace_records_each_agents_role(providers, tmp_path):
    run = planted_run(tmp_path, "llm_debate", Planted("debater_2", ("debater_1", "debater_3")))
    (trace, *_) = RunStore(run.dir).traces()
    assert trace.roles == {f"debater_{i}": "debater" for i in (1, 2, 3)}


def test_the_report_and_the_viewer_show_the_attributions(providers, tmp_path, capsys):
    from maslab.report import build_report
    from maslab.viewer import pages
    from maslab.viewer.runs import Run

    run = planted_run(tmp_path, "llm_debate", Planted("debater_2", ("debater_1", "debater_3")))
    assert main(["attribute", str(run.dir), "--judge-model", "judge:x"]) == 0
    html = build_report([run.dir], tmp_path / "report.html").read_text()
    assert "<h4>Failure attribution</h4>" in html and "role held responsible" in html
    assert "<tr><td>debater</td><td>3</td><td>100%</td></tr>" in html
    assert html.count("Attributed to <b>debater_2</b> (debater), step ") == TASKS
    assert f"failure attribution: {TASKS} samples, {TASKS} judge calls" in html
    viewed = Run.open(0, run.dir)
    record = viewed.records[0]
    page = pages.transcript(viewed, record, viewed.trace(record.key), "", {})
    assert "Attributed to <b>debater_2</b> (debater), step " in page
    assert "it guessed instead of computing" in page
