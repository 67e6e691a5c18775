"""bfcl_ast and bfcl_state (evaluators/bfcl.py): BFCL's ground truth scores right on every task
of every category, and systematic perturbations of it score wrong."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from bfcl_play import gold_calls, single_answer

from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import CHANGED_AFTER_SOLVED, get_evaluator
from maslab.benchmarks.bfcl import SINGLE
from maslab.core.task import Task
from maslab.evaluators.bfcl import around_difference

# BFCL data defects: no answer can pass these, under BFCL's checker as under bfcl_ast
UNPASSABLE = {
    "live_simple_106-63-0": "missing required parameter 'auto_loan_payment_start'",  # no values
    "live_simple_112-68-0": "missing required parameter 'acc_routing_start'",  # no values
    "live_multiple_507-149-4": "missing required parameter 'origin_airport'",  # only ""
    "live_multiple_862-181-3": "missing parameter 'journey_start_time'",  # not in the schema
    "live_multiple_964-207-0": "missing required parameter 'statement'",  # answer says 'question'
}


def score(evaluator: str, task: Task, answer: Any) -> Any:
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return asyncio.run(get_evaluator(evaluator)().score(task, text))


# --- the ground truth scores right ----------------------------------------------------------------


@pytest.mark.parametrize("category", list(SINGLE))
def test_the_ground_truth_passes_every_single_turn_task(bfcl_wheel, category):
    failed = {}
    for task in get_benchmark("bfcl_single")(category=category).load():
        answer = single_answer(task) if SINGLE[category][1] != "relevance" else [
            {"name": task.tools[0]["name"], "arguments": {}}
        ]  # fmt: skip
        result = score("bfcl_ast", task, answer)
        if not result.correct:
            failed[task.id] = result.explanation
    assert set(failed) == {i for i in UNPASSABLE if i.startswith(category + "_")}
    for task_id, explanation in failed.items():
        assert explanation.endswith(UNPASSABLE[task_id])


@pytest.mark.parametrize("category", ["base", "long_context", "miss_func", "miss_param"])
def test_the_ground_truth_passes_every_multi_turn_task(bfcl_wheel, category):
    for task in get_benchmark("bfcl_multi_turn")(category=category).load():
        result = score("bfcl_state", task, gold_calls(task))
        assert result.correct, (task.id, result.explanation)
        assert result.details == {"turns": [True] * (1 + len(task.turns)), CHANGED_AFTER_SOLVED: 0}


# --- perturbations score wrong --------------------------------------------------------------------


def _single(category: str, task_id: str) -> Task:
    tasks = get_benchmark("bfcl_single")(category=category).load()
    return next(task for task in tasks if task.id == task_id)


def test_single_turn_perturbations_score_wrong(bfcl_wheel):
    task = _single("simple", "simple_python_0")  # calculate_triangle_area(base=10, height=5)
    right = single_answer(task)
    assert score("bfcl_ast", task, right).correct
    assert score("bfcl_ast", task, "[calculate_triangle_area(base=10, height=5)]").correct
    assert score("bfcl_ast", task, "[calculate_triangle_area(10, 5, unit='Units')]").correct
    wrong = {
        "value": [{"name": "calculate_triangle_area", "arguments": {"base": 11, "height": 5}}],
        "type": [{"name": "calculate_triangle_area", "arguments": {"base": "10", "height": 5}}],
        "bool for int": [
            {"name": "calculate_triangle_area", "arguments": {"base": True, "height": 5}}
        ],
        "missing required": [{"name": "calculate_triangle_area", "arguments": {"base": 10}}],
        "unknown parameter": [
            {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5, "x": 1}}
        ],
        "unknown function": [{"name": "triangle_area", "arguments": {"base": 10, "height": 5}}],
        "extra call": right + right,
        "no call": [],
    }
    for why, answer in wrong.items():
        assert not score("bfcl_ast", task, answer).correct, why
    assert score("bfcl_ast", task, "the area is 25").unparsed


def test_numbers_strings_and_names_follow_bfcls_rules(bfcl_wheel):
    task = _single("simple", "simple_python_2")  # math.hypot(x=4, y=5), z optional
    assert score("bfcl_ast", task, [{"name": "math_hypot", "arguments": {"x": 4, "y": 5}}]).correct
    assert not score(
        "bfcl_ast", task, [{"name": "math.hypot", "arguments": {"x": 4, "y": 6}}]
    ).correct
    floats = _single("parallel", "parallel_2")  # calculate_resistance(length=5, area=0.01, ...)
    answer = single_answer(floats)
    answer[0]["arguments"]["length"] = 5.0  # an integer parameter given as a float: wrong
    assert not score("bfcl_ast", floats, answer).correct
    strings = _single("live_simple", "live_simple_2-2-0")  # loc "2020 Addison Street, ..."
    answer = single_answer(strings)
    answer[0]["arguments"]["loc"] = answer[0]["arguments"]["loc"].upper().replace(", ", " ")
    assert score("bfcl_ast", strings, answer).correct  # case, spaces and commas are ignored
    answer[0]["arguments"]["loc"] += " 2"
    assert not score("bfcl_ast", strings, answer).correct


def test_parallel_calls_match_in_any_order_and_multiple_needs_the_right_function(bfcl_wheel):
    task = _single("parallel", "parallel_0")  # spotify.play twice
    answer = single_answer(task)
    assert score("bfcl_ast", task, answer[::-1]).correct
    assert not score("bfcl_ast", task, answer[:1] + answer[:1]).correct
    multiple = _single("multiple", "multiple_0")
    other = next(t["name"] for t in multiple.tools if t["name"] != "triangle_properties.get")
    answer = single_answer(multiple)
    answer[0]["name"] = other
    assert not score("bfcl_ast", multiple, answer).correct


def test_irrelevance_passes_without_calls_and_relevance_needs_one(bfcl_wheel):
    irrelevant = get_benchmark("bfcl_single")(category="irrelevance").load(limit=1)[0]
    assert score("bfcl_ast", irrelevant, "[]").correct
    assert score("bfcl_ast", irrelevant, "No function fits this request.").correct
    call = [{"name": irrelevant.tools[0]["name"], "arguments": {}}]
    assert not score("bfcl_ast", irrelevant, call).correct
    relevant = get_benchmark("bfcl_single")(category="live_relevance").load(limit=1)[0]
    assert not score("bfcl_ast", relevant, "[]").correct


def _multi(category: str = "base") -> Task:
    return get_benchmark("bfcl_multi_turn")(category=category).load(limit=1)[0]


def test_multi_turn_perturbations_score_wrong_at_the_right_turn(bfcl_wheel):
    task = _multi()  # turn 0: cd document, mkdir temp, mv final_report.pdf temp
    right = gold_calls(task)

    def verdict(answer: Any) -> Any:
        return score("bfcl_state", task, answer)

    wrong_value = json.loads(json.dumps(right))
    wrong_value[0][1]["arguments"]["dir_name"] = "tmp"
    result = verdict(wrong_value)
    assert not result.correct and result.details["first_failed_turn"] == 0
    difference = result.details["difference"]
    assert (difference["class"], difference["attribute"]) == ("GorillaFileSystem", "root")
    assert difference["model"] != difference["expected"] and len(difference["model"]) <= 242
    # the window is where the trees differ, not their common first characters
    model, expected = difference["model"], difference["expected"]
    assert model.startswith("…") and model[:81] == expected[:81] and model[81] != expected[81]

    missing = [turn[:] for turn in right]
    missing[3] = missing[3][:-1]  # no diff: the state matches, its result is missing
    result = verdict(missing)
    assert result.details["turns"] == [True, True, True, False]
    assert "no call returned" in result.details["reason"] and "difference" not in result.details

    extra = [turn[:] for turn in right]
    extra[1] = [*extra[1], {"name": "touch", "arguments": {"file_name": "extra.txt"}}]
    assert verdict(extra).details["first_failed_turn"] == 1
    assert verdict(extra).details[CHANGED_AFTER_SOLVED] == 1  # turn 1 was solved, then undone

    swapped = [turn[:] for turn in right]
    swapped[0] = [swapped[0][2], swapped[0][0], swapped[0][1]]  # mv before cd and mkdir
    assert verdict(swapped).details["first_failed_turn"] == 0
    assert verdict(swapped).details[CHANGED_AFTER_SOLVED] == 0  # never solved

    looked = [turn[:] for turn in right]
    looked[1] = [*looked[1], {"name": "ls", "arguments": {}}]  # changes nothing
    assert verdict(looked).correct and verdict(looked).details[CHANGED_AFTER_SOLVED] == 0

    unknown = [turn[:] for turn in right]
    unknown[2] = [{"name": "sort_file", "arguments": {"file_name": "final_report.pdf"}}]
    assert verdict(unknown).details["first_failed_turn"] == 2

    silent = [turn[:] for turn in right]
    silent[2] = []
    assert verdict(silent).details["reason"] == "no call made"
    assert verdict(right[:2]).details["turns"] == [True, True, False, False]  # turns left out
    assert verdict([*right, []]).unparsed and verdict("[ls()]").unparsed


def test_a_turn_without_ground_truth_calls_passes_only_without_calls(bfcl_wheel):
    task = _multi("miss_func")  # turn 2: sort is not offered yet
    right = gold_calls(task)
    assert right[2] == [] and score("bfcl_state", task, right).correct
    eager = [turn[:] for turn in right]
    eager[2] = [{"name": "ls", "arguments": {}}]
    result = score("bfcl_state", task, eager)
    assert result.details["first_failed_turn"] == 2 and "should be made" in result.details["reason"]
    early = [turn[:] for turn in right]
    early[2], early[3] = early[3], []  # sort before it is offered: refused, then not repeated
    assert not score("bfcl_state", task, early).correct


def test_errored_calls_count_as_made_calls(bfcl_wheel):
    task = _multi()
    right = gold_calls(task)
    retried = [turn[:] for turn in right]
    retried[1] = [{"name": "cd", "arguments": {"folder": "nowhere"}}, *retried[1]]
    assert score("bfcl_state", task, retried).correct  # a failed cd changes no state


def test_a_state_difference_shows_where_the_values_differ():
    head, tail = "x" * 500, "y" * 500
    model, expected = around_difference(head + "A" + tail, head + "B" + tail)
    assert model == "…" + "x" * 80 + "A" + "y" * 159 + "…"
    assert expected == "…" + "x" * 80 + "B" + "y" * 159 + "…"
    assert around_difference("abc", "abd") == ("abc", "abd")  # short: whole, no marks
    assert around_difference("ab", "abcd") == ("ab", "abcd")  # one is the other's start
