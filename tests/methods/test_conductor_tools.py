"""``conductor`` (AgentOrchestra) on episodes: one specialist per group of the turn's functions,
each delegation a tool loop reported back to the planner; exact call counts on the toy shelf
(native and text), the declared answer, a budget stop mid-episode, and BFCL end to end with a
scripted model that plays each role so that the ground truth is executed."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest
from bfcl_play import (
    assert_run_delivers_every_turn,
    gold_calls,
    native_calls,
    sample_of,
    single_answer,
    wrong,
)
from helpers import PUT, TAKE, Shelf, agent_of

from maslab.bench.benchmark import get_benchmark
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.llm.scripted import Reply, ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest

Conductor = get_method("conductor")
EPISODE = Task(id="e1", question="Put 1 under a.", turns=("Now take a.", ""))
DECLARED = Task(id="d1", question="Put 1 under a, then take a.", tools=(PUT, TAKE))
PUT_A = {"key": "a", "value": "1"}
OPENING = "Write your plan and take your first action."
PATHS = pytest.mark.parametrize("native", [True, False], ids=["native", "text"])


def action(name: str, **arguments: object) -> str:
    return json.dumps({"thought": "", "plan": [], "action": name, "arguments": arguments})


def calling(calls: list[dict[str, Any]], native: bool) -> Reply | str:
    return native_calls(calls) if native else json.dumps(calls)


class Grouped(Shelf):
    """The shelf, its functions in two groups: ``store`` (put, take) and ``admin`` (clear)."""

    def function_groups(self) -> dict[str, str]:
        return {"put": "store", "take": "store", "clear": "admin"}


TURN = re.compile(r"turn (\d+)")


def playing(turns: list[list[dict[str, Any]]], group_of: Mapping[str, str], native: bool):
    """The planner delegates, at each turn, one task per group the turn's calls touch (in the
    order they are first called), then finishes; a specialist makes its group's calls of that
    turn, then closes."""

    def respond(request: ChatRequest) -> Reply | str:
        users = [m["content"] for m in request.messages if m["role"] == "user"]
        if agent_of(request) == "planner":
            openings = [i for i, u in enumerate(users) if OPENING in u]
            turn, delegated = len(openings) - 1, len(users) - 1 - openings[-1]
            groups = list(dict.fromkeys(group_of.get(c["name"], "functions") for c in turns[turn]))
            if delegated < len(groups):
                return action(groups[delegated], task=f"Do the calls of turn {turn}.")
            return action("final_answer", answer="Done.")
        done = request.messages[-1]["role"] == "tool" or users[-1].startswith("Results")
        if done:
            return "Done."
        turn = int(TURN.findall(users[-1])[0])
        mine = [c for c in turns[turn] if group_of.get(c["name"], "functions") == agent_of(request)]
        return calling(mine, native)

    return respond


SHELF_TURNS = [
    [{"name": "put", "arguments": PUT_A}],
    [{"name": "take", "arguments": {"key": "a"}}],
    [{"name": "put", "arguments": PUT_A}, {"name": "clear", "arguments": {}}],
]
GROUP_OF = {"put": "store", "take": "store", "clear": "admin"}


@PATHS
async def test_each_group_of_functions_is_a_specialist_and_the_calls_count_exactly(native):
    model = ScriptedModel(
        playing(SHELF_TURNS, GROUP_OF, native), native=["tools"] if native else []
    )
    outcome = await Conductor().arun(EPISODE, model, environment=Grouped())
    assert json.loads(outcome.answer) == SHELF_TURNS
    # per turn: planner (delegations + 1) + 2 per delegation (calls, closing reply)
    # turns 0, 1: 1 delegation -> 2 + 2; turn 2: 2 delegations -> 3 + 4
    assert len(model.calls) == 4 + 4 + 7
    agents = [agent_of(r) for r in model.requests]
    assert agents.count("planner") == 7 and agents.count("store") == 6
    assert agents.count("admin") == 2
    planner = [r for r in model.requests if agent_of(r) == "planner"]
    system = planner[0].messages[0]["content"]
    assert "- store(task: string): Carries out a task with the functions put, take." in system
    assert "admin" not in system  # clear comes at turn 1
    assert "Your team now:\n- store" in last_user_message(planner[2])
    assert "- admin(task: string)" in last_user_message(planner[2])
    report = last_user_message(planner[1])
    assert report.startswith("Observation from store:\nDone.\n\nCalls made:\n- put(")
    assert "-> put a" in report
    specialist = next(r for r in model.requests if agent_of(r) == "store")
    assert "Do the calls of turn 0." in specialist.messages[1]["content"]
    assert specialist.messages[1]["content"].count("Put 1 under a.") == 0  # only its task
    assert outcome.solution.metadata["finish"] == "final_answer"
    assert set(outcome.context.topology.nodes) == {"planner", "store", "admin"}


async def test_an_environment_without_groups_gets_one_specialist_with_every_function():
    model = ScriptedModel(playing(SHELF_TURNS, {}, True), native=["tools"])
    outcome = await Conductor().arun(EPISODE, model, environment=Shelf())
    assert json.loads(outcome.answer) == SHELF_TURNS
    assert len(model.calls) == 4 + 4 + 4
    assert {agent_of(r) for r in model.requests} == {"planner", "functions"}


async def test_a_specialist_stops_at_its_cap_and_says_so():
    def respond(request: ChatRequest) -> Reply | str:
        if agent_of(request) == "planner":
            users = [m for m in request.messages if m["role"] == "user"]
            return (
                action("functions", task="Put.")
                if len(users) == 1
                else action("final_answer", answer="ok")
            )
        return calling([{"name": "put", "arguments": PUT_A}], True)

    model = ScriptedModel(respond, native=["tools"])
    task = Task(id="one", question="Put 1 under a.")
    outcome = await Conductor(specialist_steps=3).arun(task, model, environment=Shelf())
    assert len(model.calls) == 1 + 3 + 1 and len(outcome.context.tool_calls) == 3
    planner = [r for r in model.requests if agent_of(r) == "planner"]
    assert "(stopped at its step cap)" in last_user_message(planner[1])


async def test_a_budget_stop_mid_episode_keeps_the_calls_made():
    model = ScriptedModel(playing(SHELF_TURNS, GROUP_OF, True), native=["tools"])
    ctx = Context(model, environment=Grouped(), budget=Budget(max_calls=6))
    solution = await Conductor().run_sample(EPISODE, ctx)
    assert len(model.calls) == 6 and ctx.budget_stop is not None
    assert json.loads(solution.answer) == [SHELF_TURNS[0], SHELF_TURNS[1], []]


@PATHS
async def test_declared_tools_answer_with_the_first_calls_a_specialist_makes(native):
    listed = [{"name": "put", "arguments": PUT_A}, {"name": "take", "arguments": {"key": "a"}}]
    replies = {"planner": [action("functions", task="Put, then take.")], "functions": [
        calling(listed, native)]}  # fmt: skip

    def respond(request: ChatRequest) -> Reply | str:
        return replies[agent_of(request)].pop(0)

    model = ScriptedModel(respond, native=["tools"] if native else [])
    outcome = await Conductor().arun(DECLARED, model)
    assert json.loads(outcome.answer) == listed
    assert len(model.calls) == 2 and outcome.context.tool_calls == []
    assert outcome.solution.metadata["finish"] == "calls"


async def test_declared_tools_and_no_call_answer_with_an_empty_list():
    replies = {"planner": [action("functions", task="x"), action("final_answer", answer="no")],
               "functions": ["Nothing fits."]}  # fmt: skip
    model = ScriptedModel(lambda r: replies[agent_of(r)].pop(0))
    outcome = await Conductor().arun(DECLARED, model)
    assert outcome.answer == "[]" and len(model.calls) == 3


# -- BFCL, end to end ------------------------------------------------------------------------


@pytest.mark.usefixtures("bfcl_wheel")
@pytest.mark.parametrize("category", ["base", "long_context", "miss_func", "miss_param"])
def test_replaying_the_ground_truth_scores_every_multi_turn_task_right(category):
    benchmark = get_benchmark("bfcl_multi_turn")(category=category)
    tasks = benchmark.load(limit=25)
    turns = {t.id: gold_calls(t) for t in tasks}
    groups = {t.id: benchmark.environment(t).function_groups() for t in tasks}

    def respond(request: ChatRequest) -> Reply | str:
        sample = sample_of(request)
        return playing(turns[sample], groups[sample], True)(request)

    model = ScriptedModel(respond, native=["tools"])
    assert len(tasks) == 25 and wrong(Conductor(), benchmark, tasks, model) == {}
    classes = {c for group_of in groups.values() for c in group_of.values()}
    assert {agent_of(r) for r in model.requests} - {"planner"} <= classes


@pytest.mark.usefixtures("bfcl_wheel")
@pytest.mark.parametrize("category", ["simple", "parallel"])
def test_replaying_the_ground_truth_scores_single_turn_tasks_right(category):
    benchmark = get_benchmark("bfcl_single")(category=category)
    tasks = benchmark.load(limit=25)
    answers = {t.id: single_answer(t) for t in tasks}

    def respond(request: ChatRequest) -> Reply | str:
        if agent_of(request) == "planner":
            return action("functions", task="Make the calls.")
        return native_calls(answers[sample_of(request)])

    model = ScriptedModel(respond, native=["tools"])
    assert wrong(Conductor(), benchmark, tasks, model) == {}
    assert len(model.calls) == 2 * len(tasks)


@pytest.mark.usefixtures("bfcl_wheel")
def test_maslab_run_on_bfcl_multi_turn_completes(tmp_path):
    assert_run_delivers_every_turn("conductor", tmp_path / "run")
