"""``planner_executor`` (Octo-planner) on episodes: per turn a plan, then the action agent works
each step in one tool loop; exact call counts on the toy shelf (native and text), the declared
answer, a budget stop mid-episode, the toy functions of an ordinary task, and BFCL end to end
with a scripted model that plays each role so that the ground truth is executed."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from bfcl_play import (
    Turns,
    assert_run_delivers_every_turn,
    gold_calls,
    native_calls,
    sample_of,
    single_answer,
    wrong,
)
from helpers import PUT, TAKE, TASK, Shelf, agent_of, making

from maslab.bench.benchmark import get_benchmark
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.kit.plans import WHOLE_REQUEST
from maslab.llm.scripted import Reply, ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.planner_executor import Plan

PlannerExecutor = get_method("planner_executor")
EPISODE = Task(id="e1", question="Put 1 under a.", turns=("Now take a.", ""))
DECLARED = Task(id="d1", question="Put 1 under a, then take a.", tools=(PUT, TAKE))
PUT_A = {"key": "a", "value": "1"}
PLANS = [["Put 1 under a."], ["Take a.", "Take a again."], ["Clear the shelf."]]
CALLS = [[("put", PUT_A)], [("take", {"key": "a"})], [("take", {"key": "a"})], [("clear", {})]]
Calls = list[tuple[str, dict[str, Any]]]


def roles(plans: list[list[str]], steps: list[Calls], native: bool, closing: bool = False):
    """A responder: the planner writes ``plans`` in turn, the action agent makes ``steps`` in
    turn (``closing``: a reply without a call after each step's results)."""
    plans, steps = list(plans), list(steps)

    def respond(request: ChatRequest) -> Reply | str:
        if agent_of(request) == "planner":
            return json.dumps({"steps": plans.pop(0)})
        results = request.messages[-1]["role"] == "tool" or last_user_message(request).startswith(
            "Results"
        )
        if closing and results:
            return "Done."
        return making(native, *steps.pop(0))

    return respond


PATHS = pytest.mark.parametrize("native", [True, False], ids=["native", "text"])


@PATHS
async def test_an_episode_is_one_plan_and_one_reply_per_step_at_each_turn(native):
    model = ScriptedModel(roles(PLANS, CALLS, native), native=["tools"] if native else [])
    outcome = await PlannerExecutor().arun(EPISODE, model, environment=Shelf())
    # per turn 1 + n: (1 + 1) + (1 + 2) + (1 + 1)
    assert len(model.calls) == 7
    assert [agent_of(r) for r in model.requests] == [
        "planner", "action", "planner", "action", "action", "planner", "action",
    ]  # fmt: skip
    assert json.loads(outcome.answer) == [
        [{"name": "put", "arguments": PUT_A}],
        [{"name": "take", "arguments": {"key": "a"}}, {"name": "take", "arguments": {"key": "a"}}],
        [{"name": "clear", "arguments": {}}],
    ]
    turns = outcome.solution.metadata["turns"]
    assert [t["plan"] for t in turns] == PLANS
    assert [s["observation"] for s in turns[1]["steps"]] == ["1", "error: nothing under 'a'"]
    planner = [r for r in model.requests if agent_of(r) == "planner"]
    first, added, unchanged = (last_user_message(r) for r in planner)
    assert first.startswith("Functions:\n- put") and "clear" not in first
    assert "- clear: Take everything off the shelf." in added  # the list changed: listed again
    assert "Functions:" not in unchanged  # the planner has read this list: not again
    assert "You have more functions now" in unchanged
    assert all(last_user_message(r).endswith(Plan.instructions()) for r in planner)
    actions = [r for r in model.requests if agent_of(r) == "action"]
    # one history through steps and turns: the second step of turn 1 sees the first's result
    assert "Step 2 of 2: Take a again." in last_user_message(actions[2])
    assert any("Put 1 under a." in str(m.get("content")) for m in actions[3].messages)
    if native:
        assert [t["function"]["name"] for t in actions[3].tools] == ["put", "take", "clear"]
        assert actions[2].messages[-2]["role"] == "tool"
    else:
        assert actions[0].tools is None and "You can call these functions" in str(
            actions[0].messages[-1]["content"]
        )
    assert outcome.context.topology.edges == [("planner", "action")]


@PATHS
async def test_step_replies_let_a_step_read_its_results_and_bound_the_calls(native):
    model = ScriptedModel(
        roles(PLANS, CALLS, native, closing=True), native=["tools"] if native else []
    )
    outcome = await PlannerExecutor(step_replies=2).arun(EPISODE, model, environment=Shelf())
    assert len(model.calls) == 3 + 2 * 4  # 1 + Σ r_i per turn, each step 2 replies (its cap)
    assert len(outcome.context.tool_calls) == 4


async def test_a_budget_stop_mid_episode_keeps_the_calls_made():
    model = ScriptedModel(roles(PLANS, CALLS, True), native=["tools"])
    ctx = Context(model, environment=Shelf(), budget=Budget(max_calls=4))
    solution = await PlannerExecutor().run_sample(EPISODE, ctx)
    assert len(model.calls) == 4 and ctx.budget_stop is not None
    assert json.loads(solution.answer) == [
        [{"name": "put", "arguments": PUT_A}], [{"name": "take", "arguments": {"key": "a"}}], [],
    ]  # fmt: skip
    assert "budget" in solution.metadata


@PATHS
async def test_declared_tools_answer_with_the_first_calls_and_skip_the_later_steps(native):
    plans = [["Think first.", "Put and take.", "Check."]]
    listed = [("put", PUT_A), ("take", {"key": "a"})]

    def respond(request: ChatRequest) -> Reply | str:
        if agent_of(request) == "planner":
            return json.dumps({"steps": plans[0]})
        first = "Step 1 of 3" in last_user_message(request)
        return "I will call next." if first else making(native, *listed)

    model = ScriptedModel(respond, native=["tools"] if native else [])
    outcome = await PlannerExecutor().arun(DECLARED, model)
    assert json.loads(outcome.answer) == [{"name": n, "arguments": a} for n, a in listed]
    assert len(model.calls) == 1 + 2 and outcome.context.tool_calls == []


async def test_declared_tools_without_a_call_answer_with_an_empty_list():
    model = ScriptedModel([json.dumps({"steps": ["One."]}), "No function fits."])
    outcome = await PlannerExecutor().arun(DECLARED, model)
    assert outcome.answer == "[]" and len(model.calls) == 2


# -- an ordinary task: the configured toy functions -------------------------------------------


def plan(*steps: str) -> str:
    return json.dumps({"steps": list(steps)})


def call(function: str, **arguments: object) -> str:
    return json.dumps({"function": function, "arguments": arguments})


@PATHS
async def test_toy_functions_chain_through_three_steps_in_one_reply_each(native):
    steps = [
        ("add", {"a": 2, "b": 3}),
        ("multiply", {"a": 5, "b": 4}),
        ("subtract", {"a": 20, "b": 1}),
    ]
    replies = [making(native, s) for s in steps]
    model = ScriptedModel(
        [plan("Add 2 and 3.", "Multiply the sum by 4.", "Subtract 1."), *replies],
        native=["tools"] if native else [],
    )
    ctx = Context(model)
    solution = await PlannerExecutor().solve(TASK, ctx)
    assert len(model.calls) == 1 + 3 and solution.answer == "19"
    assert [(r.agent, r.round) for r in ctx.ledger.records] == [
        ("planner", 0), ("action", 0), ("action", 0), ("action", 0),
    ]  # fmt: skip
    [turn] = solution.metadata["turns"]
    assert [s["observation"] for s in turn["steps"]] == ["5", "20", "19"]
    assert [m.content for m in ctx.transcript.filter(sender="executor")] == ["5", "20", "19"]
    planner, first, second, third = model.requests
    assert "- add: a + b." in last_user_message(planner) and TASK.question in last_user_message(
        planner
    )
    assert "Step 1 of 3: Add 2 and 3." in last_user_message(first)
    seen = json.dumps(second.messages)
    assert ('"content": "5"' in seen) if native else ('add({\\"a\\": 2, \\"b\\": 3}) -> 5' in seen)
    assert "Step 3 of 3: Subtract 1." in last_user_message(third)
    if native:
        names = [t["function"]["name"] for t in first.tools]
        assert names == ["add", "subtract", "multiply", "divide", "compare", "python"]
    assert ctx.tool_calls == []  # no environment: the method ran them


async def test_unknown_functions_and_missing_calls_are_error_observations():
    model = ScriptedModel([plan("Take the root.", "Then answer."), call("sqrt", x=4), "It is 2."])
    solution = await PlannerExecutor().solve(TASK, Context(model))
    assert len(model.calls) == 3
    first, second = (s["observation"] for s in solution.metadata["turns"][0]["steps"])
    assert first.startswith("error: unknown tool 'sqrt'; available: add, subtract, multiply")
    assert second == solution.answer == "error: no function call found in the reply"


async def test_a_plan_longer_than_five_steps_is_truncated():
    steps = [f"Add {i} and 1." for i in range(7)]
    model = ScriptedModel([plan(*steps), *(call("add", a=i, b=1) for i in range(5))])
    solution = await PlannerExecutor().solve(TASK, Context(model))
    assert len(model.calls) == 1 + 5
    model.assert_consumed()
    [turn] = solution.metadata["turns"]
    assert turn["plan"] == steps[:5] and turn["planned_steps"] == 7 and turn["truncated"]
    assert solution.answer == "5"


async def test_an_unparseable_plan_falls_back_to_one_step_the_whole_request():
    model = ScriptedModel(["First add, then multiply.", call("multiply", a=6, b=7)])
    solution = await PlannerExecutor().solve(TASK, Context(model))
    assert len(model.calls) == 2 and solution.answer == "42"
    [turn] = solution.metadata["turns"]
    assert turn["fallback"] is True and turn["plan"] == [WHOLE_REQUEST]
    step = last_user_message(model.requests[1])
    assert f"Request:\n{TASK.prompt()}" in step and f"Step 1 of 1: {WHOLE_REQUEST}" in step


async def test_the_function_set_is_configurable():
    model = ScriptedModel([plan("Multiply 6 by 7."), call("multiply", a=6, b=7)])
    solution = await PlannerExecutor(functions=["add"]).solve(TASK, Context(model))
    assert "multiply" not in last_user_message(model.requests[0])
    assert solution.answer == "error: unknown tool 'multiply'; available: add"
    with pytest.raises(ConfigError, match="unknown tools 'sqrt'"):
        PlannerExecutor(functions=["sqrt"])
    with pytest.raises(ConfigError, match="step_replies"):
        PlannerExecutor(step_replies=0)


@pytest.mark.system
async def test_python_function_runs_in_the_sandbox():
    model = ScriptedModel([plan("Compute 6*7 in Python."), call("python", code="print(6 * 7)")])
    solution = await PlannerExecutor().solve(TASK, Context(model))
    assert solution.answer == "status: ok\nstdout:\n42"


# -- BFCL, end to end ------------------------------------------------------------------------

STEP = re.compile(r"Step 1 of 1: turn (\d+)")


def replaying(turns_of: dict[str, Turns]) -> Callable[[ChatRequest], Reply | str]:
    """The planner writes one step per turn, naming the turn; the action agent makes the
    ground truth's calls of that turn."""

    def respond(request: ChatRequest) -> Reply | str:
        users = [m["content"] for m in request.messages if m["role"] == "user"]
        if agent_of(request) == "planner":
            return json.dumps({"steps": [f"turn {len(users) - 1}"]})
        [turn] = STEP.findall(users[-1])
        calls = turns_of[sample_of(request)][int(turn)]
        return native_calls(calls) if calls else "Nothing to call."

    return respond


@pytest.mark.usefixtures("bfcl_wheel")
@pytest.mark.parametrize("category", ["base", "long_context", "miss_func", "miss_param"])
def test_replaying_the_ground_truth_scores_every_multi_turn_task_right(category):
    benchmark = get_benchmark("bfcl_multi_turn")(category=category)
    tasks = benchmark.load(limit=25)
    model = ScriptedModel(replaying({t.id: gold_calls(t) for t in tasks}), native=["tools"])
    assert len(tasks) == 25 and wrong(PlannerExecutor(), benchmark, tasks, model) == {}
    assert len(model.calls) == 2 * sum(1 + len(t.turns) for t in tasks)  # 1 + 1 per turn


@pytest.mark.usefixtures("bfcl_wheel")
@pytest.mark.parametrize("category", ["simple", "parallel"])
def test_replaying_the_ground_truth_scores_single_turn_tasks_right(category):
    benchmark = get_benchmark("bfcl_single")(category=category)
    tasks = benchmark.load(limit=25)
    answers = {t.id: single_answer(t) for t in tasks}

    def respond(request: ChatRequest) -> Reply | str:
        if agent_of(request) == "planner":
            return json.dumps({"steps": ["Make the calls."]})
        return native_calls(answers[sample_of(request)])

    model = ScriptedModel(respond, native=["tools"])
    assert wrong(PlannerExecutor(), benchmark, tasks, model) == {}
    assert len(model.calls) == 2 * len(tasks)


@pytest.mark.usefixtures("bfcl_wheel")
def test_maslab_run_on_bfcl_multi_turn_completes(tmp_path):
    assert_run_delivers_every_turn("planner_executor", tmp_path / "run")
