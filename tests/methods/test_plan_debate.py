"""``plan_debate``: planners propose and debate plans, a judge picks one, an executor works it.

Exact call counts on the toy shelf (native and text paths; the default config and three planners
with two rounds); the revision prompt shows the other plans in planner order whatever the order
they were written in; the judge's choice is the plan executed, an unreadable choice the first;
declared tools answer with the first calls; a budget stop keeps the calls so far; the declared
structure; ``maslab run`` on BFCL.
"""

from __future__ import annotations

import json

import pytest
from bfcl_play import assert_run_delivers_every_turn
from helpers import PUT, TAKE, Shelf, agent_of, making, prompts_of

from maslab.core.context import Budget
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.kit.plans import WHOLE_REQUEST
from maslab.llm.scripted import Reply, ScriptedModel
from maslab.llm.types import ChatRequest

PlanDebate = get_method("plan_debate")
ONE_TURN = Task(id="e1", question="Put 1 under a.")
EPISODE = Task(id="e2", question="Put 1 under a.", turns=("Now take a.",))
DECLARED = Task(id="d1", question="Put 1 under a.", tools=(PUT, TAKE))
PUT_A = {"key": "a", "value": "1"}
PATHS = pytest.mark.parametrize("native", [True, False], ids=["native", "text"])


def plan(*steps: str) -> str:
    return json.dumps({"steps": list(steps)})


def choice(number: int) -> str:
    return json.dumps({"plan": number})


def respond(native: bool, plans: dict[str, str], judge: str = choice(1)):
    """Planner ``p`` answers ``plans[p]`` (every time), the judge ``judge``, the executor puts
    on its first step and says done on the others."""

    def reply(request: ChatRequest) -> Reply | str:
        agent = agent_of(request)
        if agent in plans:
            return plans[agent]
        if agent == "judge":
            return judge
        first = "Step 1 of" in request.messages[-1]["content"]
        return making(native, ("put", PUT_A)) if first else "Done."

    return reply


def who(model: ScriptedModel) -> list[str]:
    return [agent_of(request) for request in model.requests]


@PATHS
async def test_default_config_calls_per_turn(native):
    plans = {"planner_1": plan("put 1 under a", "check"), "planner_2": plan("put 1 under a")}
    model = ScriptedModel(respond(native, plans), native=["tools"] if native else [])
    outcome = await PlanDebate().arun(EPISODE, model, environment=Shelf())
    # per turn 2 + 2·1 + 1 + n, the judge picks plan 1 (2 steps): 7 a turn
    assert len(model.calls) == 2 * (2 + 2 + 1 + 2)
    assert who(model)[:7] == ["planner_1", "planner_2", "planner_1", "planner_2", "judge",
                              "executor", "executor"]  # fmt: skip
    assert json.loads(outcome.answer) == [[{"name": "put", "arguments": PUT_A}]] * 2
    turn = outcome.solution.metadata["turns"][0]
    assert (turn["chosen"], turn["judge_fallback"]) == (0, False)
    assert turn["plans"][-1] == [["put 1 under a", "check"], ["put 1 under a"]]


async def test_planners_and_the_judge_read_the_functions_once_a_list():
    task = Task(id="e3", question="Put 1 under a.", turns=("Now take a.", "And again."))
    plans = {"planner_1": plan("put 1 under a"), "planner_2": plan("put 1 under a")}
    model = ScriptedModel(respond(True, plans), native=["tools"])
    await PlanDebate(rounds=0).arun(task, model, environment=Shelf())
    for agent in ("planner_1", "planner_2", "judge"):
        first, added, unchanged = (
            r.messages[-1]["content"] for r in model.requests if agent_of(r) == agent
        )
        assert first.startswith("Functions:\n- put") and "clear" not in first
        assert "- clear: Take everything off the shelf." in added  # the list changed at turn 1
        assert "Functions:" not in unchanged  # read already, in the agent's history


@PATHS
async def test_three_planners_two_rounds(native):
    plans = {f"planner_{i}": plan(f"step of {i}") for i in (1, 2, 3)}
    model = ScriptedModel(respond(native, plans, choice(3)), native=["tools"] if native else [])
    outcome = await PlanDebate(planners=3, rounds=2).arun(ONE_TURN, model, environment=Shelf())
    assert len(model.calls) == 3 + 3 * 2 + 1 + 1  # P + P·R + 1 + one step
    assert outcome.solution.metadata["turns"][0]["steps"][0]["step"] == "step of 3"
    assert len(outcome.solution.metadata["turns"][0]["plans"]) == 3  # first + 2 rounds


async def test_the_revision_shows_the_other_plans_in_planner_order():
    plans = {f"planner_{i}": plan(f"plan of {i}") for i in (1, 2, 3)}
    delays = {"planner_1": 0.03, "planner_2": 0.02, "planner_3": 0.0}  # 3 finishes first
    model = ScriptedModel(respond(True, plans), native=["tools"],
                          latency=lambda r: delays.get(agent_of(r), 0.0))  # fmt: skip
    outcome = await PlanDebate(planners=3).arun(ONE_TURN, model, environment=Shelf())
    assert who(model)[:3] == ["planner_3", "planner_2", "planner_1"]  # completion order
    revision = prompts_of(outcome.context, "planner_3")[1]
    assert revision.index("planner_1") < revision.index("planner_2")
    assert "plan of 3" not in revision
    revision = prompts_of(outcome.context, "planner_2")[1]
    assert revision.index("plan of 1") < revision.index("plan of 3")


async def test_the_judges_choice_is_the_plan_executed():
    plans = {"planner_1": plan("take b"), "planner_2": plan("put 1 under a")}
    model = ScriptedModel(respond(True, plans, choice(2)), native=["tools"])
    outcome = await PlanDebate().arun(ONE_TURN, model, environment=Shelf())
    judged = prompts_of(outcome.context, "judge")[0]
    assert "Plan 1:\n1. take b" in judged and "Plan 2:\n1. put 1 under a" in judged
    assert "1. put 1 under a" in prompts_of(outcome.context, "executor")[0]
    assert outcome.solution.metadata["turns"][0]["chosen"] == 1


@pytest.mark.parametrize("said", ["Plan two is best.", choice(7)])
async def test_an_unreadable_choice_executes_the_first_plan(said):
    plans = {"planner_1": plan("take b"), "planner_2": plan("put 1 under a")}
    model = ScriptedModel(respond(True, plans, said), native=["tools"])
    outcome = await PlanDebate().arun(ONE_TURN, model, environment=Shelf())
    turn = outcome.solution.metadata["turns"][0]
    assert (turn["chosen"], turn["judge_fallback"]) == (0, True)
    assert "1. take b" in prompts_of(outcome.context, "executor")[0]


async def test_unreadable_plans_fall_back():
    plans = {"planner_1": "I would put it.", "planner_2": plan("put 1 under a")}
    model = ScriptedModel(respond(True, plans), native=["tools"])
    outcome = await PlanDebate().arun(ONE_TURN, model, environment=Shelf())
    turn = outcome.solution.metadata["turns"][0]
    assert turn["plans"][0][0] == [WHOLE_REQUEST]  # the first plan: the whole request
    assert turn["plan_fallbacks"] == [[True, False], [True, False]]


@PATHS
async def test_declared_tools_answer_with_the_first_calls(native):
    plans = {"planner_1": plan("think", "put 1 under a", "check"), "planner_2": plan("x")}
    calls = iter([making(native, ("put", PUT_A))])

    def reply(request: ChatRequest) -> Reply | str:
        if agent_of(request) == "executor" and "Step 1 of" in request.messages[-1]["content"]:
            return "Nothing to call yet."
        if agent_of(request) == "executor":
            return next(calls)
        return respond(native, plans)(request)

    model = ScriptedModel(reply, native=["tools"] if native else [])
    outcome = await PlanDebate().arun(DECLARED, model)
    assert len(model.calls) == 2 + 2 + 1 + 2  # step 3 is skipped
    assert json.loads(outcome.answer) == [{"name": "put", "arguments": PUT_A}]
    assert outcome.context.tool_calls == []


async def test_no_tools_is_one_executor_reply():
    model = ScriptedModel(["The answer is 42."], native=["tools"])
    outcome = await PlanDebate().arun(Task(id="q", question="What is 6 * 7?"), model)
    assert outcome.answer == "The answer is 42." and who(model) == ["executor"]


async def test_a_budget_stop_keeps_the_calls_so_far():
    plans = {"planner_1": plan("put 1 under a"), "planner_2": plan("put 1 under a")}
    model = ScriptedModel(respond(True, plans), native=["tools"])
    outcome = await PlanDebate().arun(
        EPISODE, model, environment=Shelf(), budget=Budget(max_calls=8)
    )
    assert len(model.calls) == 8  # turn 1 (6), then the second turn's first plans
    assert json.loads(outcome.answer) == [[{"name": "put", "arguments": PUT_A}], []]
    assert "budget" in outcome.solution.metadata


async def test_a_budget_stop_on_declared_tools_before_any_call_answers_with_no_calls():
    model = ScriptedModel(default=plan("put 1 under a"))
    outcome = await PlanDebate().arun(DECLARED, model, budget=Budget(max_calls=3))
    assert outcome.answer == "[]" and "budget" in outcome.solution.metadata


def test_structure():
    topology = PlanDebate().structure()
    assert list(topology.nodes) == ["planner_1", "planner_2", "judge", "executor"]
    assert sorted(topology.edges) == sorted([
        ("planner_1", "planner_2"), ("planner_2", "planner_1"), ("planner_1", "judge"),
        ("planner_2", "judge"), ("judge", "executor"),
    ])  # fmt: skip
    assert len(PlanDebate(planners=3).structure().edges) == 6 + 3 + 1
    assert list(PlanDebate(rounds=0).structure().nodes) == [
        "planner_1", "judge", "planner_2", "executor",
    ]  # fmt: skip


async def test_solve_sets_the_declared_structure():
    method = PlanDebate(planners=3, rounds=2)
    model = ScriptedModel(default=plan("put 1 under a"), native=["tools"])
    outcome = await method.arun(ONE_TURN, model, environment=Shelf())
    assert outcome.context.topology is not None
    assert outcome.context.topology.to_dict() == method.structure().to_dict()


@pytest.mark.usefixtures("bfcl_wheel")
def test_maslab_run_on_bfcl_multi_turn_completes(tmp_path):
    assert_run_delivers_every_turn("plan_debate", tmp_path / "run")
