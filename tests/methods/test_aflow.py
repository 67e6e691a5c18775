"""AFlow: the soft mixed parent selection, rounds and evaluations counted, broken workflows and
garbage optimizer replies, solve with the best workflow (in the sandbox), the learned state, a
budget stop, and ``maslab run --optimize-on`` end to end."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence

import pytest
import yaml

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.types import ChatRequest
from maslab.methods import aflow
from maslab.methods.aflow import (
    SEED_WORKFLOW,
    AFlow,
    Proposal,
    Run,
    Workflow,
    candidates,
    mixed_probabilities,
    usable_code,
)
from maslab.testing import ScriptedModel, last_user_message

TASKS = [
    Task(id="v1", question="What is 2 + 2?", gold="4", answer_type="number"),
    Task(id="v2", question="What is 3 + 3?", gold="6", answer_type="number"),
]
OPTIMIZER_MARK = "You improve an agentic workflow"


def good_code(tag: str) -> str:
    """A workflow the fake executor answers correctly (it looks for GOOD)."""
    return f"async def workflow(task):\n    return 'GOOD {tag}'\n"


def proposal(modification: str, code: str) -> str:
    return json.dumps({"modification": modification, "code": code})


@pytest.fixture
def executions(monkeypatch) -> list[tuple[str, str]]:
    """Workflows run in process instead of the sandbox: a code with GOOD answers every task
    right; each run is recorded as (code, task id)."""
    seen: list[tuple[str, str]] = []
    golds = {t.id: t.gold for t in TASKS}

    async def fake(self: AFlow, code: str, task: Task, ctx: Context) -> Run:
        seen.append((code, task.id))
        return Run(answer=f"\\boxed{{{golds[task.id]}}}" if "GOOD" in code else "\\boxed{0}")

    monkeypatch.setattr(AFlow, "execute", fake)
    return seen


def optimizer_prompts(model: ScriptedModel) -> list[str]:
    return [p for p in map(last_user_message, model.requests) if OPTIMIZER_MARK in p]


def test_the_soft_mixed_probabilities_follow_the_formula():
    scores = [0.8, 0.5, 0.45]
    alpha, lam = 0.2, 0.3
    exps = [math.exp(alpha * (100 * s - 80)) for s in scores]
    expected = [lam / 3 + (1 - lam) * e / sum(exps) for e in exps]
    assert mixed_probabilities(scores) == pytest.approx(expected, abs=1e-12)
    assert sum(mixed_probabilities(scores)) == pytest.approx(1.0)
    assert mixed_probabilities([0.3, 0.3]) == pytest.approx([0.5, 0.5])
    assert mixed_probabilities([0.0]) == [1.0]


def test_the_candidates_are_the_best_few_plus_the_seed():
    tree = [
        Workflow(id=i, parent=None if i == 0 else 0, round=i, modification="", code="", score=s)
        for i, s in enumerate([0.1, 0.5, 0.9, 0.5, None, 0.7])
    ]
    assert [w.id for w in candidates(tree, 2)] == [2, 5, 0]
    assert [w.id for w in candidates(tree, 3)] == [2, 5, 1, 0]  # tie 1 vs 3: the older
    assert [w.id for w in candidates(tree, 10)] == [2, 5, 1, 3, 0]  # unevaluated 4 is left out


def test_usable_code_is_checked_without_running_it():
    assert usable_code(SEED_WORKFLOW)
    assert usable_code("def workflow(task):\n    return task\n")
    assert not usable_code("async def workflow(task) return 1")  # a syntax error
    assert not usable_code("def solve(task):\n    return task\n")  # no workflow
    assert not usable_code("class A:\n    def workflow(self):\n        pass\n")  # not top level


async def test_rounds_evaluations_and_the_parent_drawn_by_the_formula(executions, monkeypatch):
    drawn: list[list[float]] = []
    picks = iter([0, 0, 1])  # the seed, then child 1, then the seed

    def draw(probabilities: Sequence[float], rng: object) -> int:
        drawn.append(list(probabilities))
        return next(picks)

    monkeypatch.setattr(aflow, "draw", draw)
    bad = "async def workflow(task):\n    return 'bad'\n"
    replies = iter(
        [
            proposal("first", good_code("a")),
            proposal("second", bad),
            proposal("third", good_code("c")),
        ]
    )
    model = ScriptedModel(lambda r: next(replies))
    method = AFlow(rounds=3, validation_rounds=2, early_stop=False)
    await method.optimize(TASKS, Context(model))

    assert len(optimizer_prompts(model)) == len(model.calls) == 3  # one optimizer call a round
    assert len(executions) == (1 + 3) * 2 * len(TASKS)  # (seed + children) · r · |V|
    assert [w.score for w in method.tree] == [0.0, 1.0, 0.0, 1.0]
    assert [w.parent for w in method.tree] == [None, 0, 1, 0]
    # the candidates, best first: round 1 the seed; round 2 [1, seed]; round 3 [1, seed, 2]
    assert drawn[0] == [1.0]
    assert drawn[1] == pytest.approx(mixed_probabilities([1.0, 0.0]))
    assert drawn[2] == pytest.approx(mixed_probabilities([1.0, 0.0, 0.0]))
    prompts = optimizer_prompts(model)
    assert "GOOD a" not in prompts[0] and "GOOD a" in prompts[1]  # parent of round 2: child 1
    assert "first -> 100.0% (better)" in prompts[2]  # the seed's experience, round 3
    assert "second" not in prompts[2]  # child 1's experience
    assert prompts[0].count("Expected: ") == 3  # 3 of the seed's 4 failures
    assert "Some tasks it got wrong:\n\nnone recorded" in prompts[1]  # child 1 failed none
    assert all(p.endswith(f"changes already tried.\n\n{Proposal.instructions()}") for p in prompts)
    assert method.best.id == 1 and method.stopped == "rounds"


async def test_garbage_optimizer_replies_make_no_child_and_never_crash(executions):
    garbage = [
        "I would add an ensemble.",
        '{"modification": "no code"}',
        proposal("syntax", "async def workflow(task) return task"),
        proposal("no workflow", "def solve(task):\n    return task\n"),
        '{"code": 42, "modification": ["x"]}',
        "",
    ]
    model = ScriptedModel(garbage)
    method = AFlow(rounds=len(garbage), validation_rounds=1, early_stop=False)
    await method.optimize(TASKS, Context(model))
    assert len(model.calls) == len(garbage)
    assert len(executions) == len(TASKS)  # the seed's evaluation only
    assert [w.id for w in method.tree] == [0]
    assert optimizer_prompts(model)[-1].count("an unusable reply") == len(garbage) - 1
    assert method.dump_learned_state()["best"] == 0


async def test_the_search_stops_early_when_the_best_stop_improving(executions):
    model = ScriptedModel([proposal("same", good_code(str(i))) for i in range(10)])
    method = AFlow(rounds=10, validation_rounds=1, patience=2)
    await method.optimize(TASKS, Context(model))
    # top-3 means: seed 0, then 1/2, 2/3, 1, 1, 1: no rise for 2 rounds after round 3
    assert len(model.calls) == 5 and method.stopped == "converged"
    assert len(method.tree) == 6


async def test_a_budget_stop_ends_the_search_with_the_tree_so_far(monkeypatch):
    async def fake(self: AFlow, code: str, task: Task, ctx: Context) -> Run:
        return Run(answer=(await ctx.chat(f"run {task.id}", agent="program")).text)

    monkeypatch.setattr(AFlow, "execute", fake)
    model = ScriptedModel(lambda r: proposal("m", good_code("x")) if OPTIMIZER_MARK in
                          last_user_message(r) else "\\boxed{4}")  # fmt: skip
    method = AFlow(rounds=5, validation_rounds=1)
    ctx = Context(model, budget=Budget(max_calls=4))  # seed: 2 runs, optimizer 1, child cut
    await method.optimize(TASKS, ctx)
    assert method.stopped == "budget"
    assert [(w.id, w.score) for w in method.tree] == [(0, 0.5)]
    assert method.dump_learned_state()["stopped"] == "budget"


async def test_the_learned_state_round_trips(executions):
    model = ScriptedModel([proposal("m1", good_code("1")), proposal("m2", good_code("2"))])
    method = AFlow(rounds=2, validation_rounds=1, early_stop=False)
    assert method.learned_state() is None
    await method.optimize(TASKS, Context(model))
    state = json.loads(json.dumps(method.dump_learned_state()))
    again = AFlow()
    again.restore_learned_state(state, "state.json")
    assert again.dump_learned_state() == state and again.best.code == good_code("1").strip()
    assert state["workflows"][1] == {
        "id": 1, "parent": 0, "round": 1, "modification": "m1", "code": good_code("1").strip(),
        "score": 1.0,
    }  # fmt: skip
    for bad in ({}, {"workflows": [], "stopped": "rounds"}, {"workflows": [{"id": 0}]}):
        with pytest.raises(ConfigError, match="invalid aflow learned state"):
            again.restore_learned_state(bad, "state.json")


# -- in the sandbox (few runs) -----------------------------------------------------------------


@pytest.mark.system
async def test_a_broken_workflow_scores_zero_in_the_sandbox():
    broken = "import nowhere_to_be_found\n\nasync def workflow(task):\n    return '4'\n"

    def script(request: ChatRequest) -> str:
        if OPTIMIZER_MARK in last_user_message(request):
            return proposal("import a missing module", broken)
        return "\\boxed{4}"

    model = ScriptedModel(script)
    method = AFlow(rounds=1, validation_rounds=1)
    await method.optimize(TASKS[:1], Context(model))
    assert [w.score for w in method.tree] == [1.0, 0.0]
    assert method.best.id == 0


@pytest.mark.system
async def test_solve_runs_the_best_workflow_in_the_sandbox():
    model = ScriptedModel(["\\boxed{4}", "The answer: \\boxed{6}"])
    fresh = await AFlow().arun(TASKS[0], model)  # before optimisation: the seed
    assert fresh.answer == "\\boxed{4}" and fresh.solution.metadata["workflow"] == 0
    assert [r.agent for r in fresh.context.ledger.records] == ["program/answer"]

    best = (
        "from operators import generate\n\nasync def workflow(task):\n"
        "    return await generate(task, instruction='BEST WORKFLOW')\n"
    )
    method = AFlow()
    method.restore_learned_state(
        {
            "workflows": [
                {"id": 0, "parent": None, "round": 0, "modification": "seed",
                 "code": SEED_WORKFLOW, "score": 0.2},
                {"id": 1, "parent": 0, "round": 1, "modification": "m", "code": best,
                 "score": 0.9},
            ],
            "best": 1,
            "stopped": "rounds",
        },
        "state.json",
    )  # fmt: skip
    outcome = await method.arun(TASKS[1], model)
    assert outcome.answer == "The answer: \\boxed{6}" and outcome.solution.metadata["workflow"] == 1
    [record] = outcome.context.ledger.records
    assert record.agent == "program/generate"
    assert record.messages[-1]["content"].startswith("BEST WORKFLOW")


@pytest.mark.system
async def test_a_budget_stop_in_solve_answers_with_the_latest_reply():
    two_calls = (
        "from operators import answer, revise\n\nasync def workflow(task):\n"
        "    draft = await answer(task)\n    return await revise(task, draft, 'check it')\n"
    )
    method = AFlow()
    method.restore_learned_state(
        {"workflows": [{"id": 0, "parent": None, "round": 0, "modification": "seed",
                        "code": two_calls, "score": 1.0}], "best": 0, "stopped": "rounds"},
        "state.json",
    )  # fmt: skip
    outcome = await method.arun(
        TASKS[0], ScriptedModel(["draft \\boxed{4}", "revised"]), budget=Budget(max_calls=1)
    )
    assert outcome.answer == "draft \\boxed{4}"
    assert "calls" in outcome.solution.metadata["budget"]


@pytest.mark.system
def test_the_command_line_optimises_once_then_reloads(tmp_path):
    dev = get_benchmark("arith")().load("dev")[:2]
    child = (
        "from operators import generate\n\nasync def workflow(task):\n"
        "    return await generate(task, instruction='CHILD')\n"
    )
    script = {OPTIMIZER_MARK: proposal("ask for the answer", child)}
    for task in dev:  # the child answers the validation tasks right; the seed does not
        script[f"^CHILD[\\s\\S]*{re.escape(task.question[:40])}"] = f"\\boxed{{{task.gold}}}"
    script["."] = "no idea"
    path = tmp_path / "script.yaml"
    path.write_text(yaml.safe_dump(script, sort_keys=False))  # patterns in order
    out = tmp_path / "run"
    argv = [
        "run", "--method", "aflow", "--benchmark", "arith", "--model", f"scripted:{path}",
        "--optimize-on", "dev", "--optimize-limit", "2", "--config", "rounds=1",
        "--config", "validation_rounds=1", "--out", str(out), "--no-cache", "--quiet",
    ]  # fmt: skip
    assert main([*argv, "--limit", "1"]) == 0
    state = json.loads((out / "learned_state.json").read_text())["state"]
    assert [w["score"] for w in state["workflows"]] == [0.0, 1.0] and state["best"] == 1
    [attempt] = [json.loads(line) for line in (out / "optimize.jsonl").read_text().splitlines()]
    assert attempt["usage"]["calls"] == 2 + 1 + 2  # seed on 2 tasks, optimizer, child on 2

    assert main([*argv, "--limit", "2"]) == 0  # a re-run: the state is loaded
    assert len((out / "optimize.jsonl").read_text().splitlines()) == 1
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 2
    assert all([c["agent"] for c in t["calls"]] == ["program/generate"] for t in traces)
