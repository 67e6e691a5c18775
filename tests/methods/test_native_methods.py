"""Methods and judges on both paths: native structured output / tools when the model handle
supports them, JSON in text when not; same calls, same outcome."""

from __future__ import annotations

import json

import pytest

from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.evaluators.llm_judge import LLMJudgeEvaluator, parse_verdict
from maslab.evaluators.llm_judge import Verdict as JudgeVerdict
from maslab.kit.structured import json_params, tool_params
from maslab.kit.tools import get_tools
from maslab.methods.conductor import FINAL
from maslab.methods.mad import Ruling, Verdict
from maslab.testing import ScriptedModel, last_user_message

TASK = Task(id="t1", question="What is 6 * 7?", answer_type="number", gold="42")
NATIVE = ["structured_output", "tools"]
PATHS = pytest.mark.parametrize("native", [NATIVE, []], ids=["native", "text"])


def schema_of(request):
    """The JSON schema a request asks for natively, or None."""
    if request.response_format is None:
        return None
    assert request.response_format["type"] == "json_schema"
    return request.response_format["json_schema"]["schema"]


# -- the helpers -------------------------------------------------------------------------------


class Bare:
    """A model handle that says nothing about native features."""

    name = "bare"


def test_a_handle_without_supports_gets_the_text_path():
    assert json_params(Bare(), "x", {"type": "object"}) == {}
    assert tool_params(Bare(), [t.spec()["function"] for t in get_tools(["add"])]) == {}


def test_native_params_carry_the_schema_and_the_tools():
    model = ScriptedModel(native=NATIVE)
    fmt = json_params(model, "verdict", Verdict.json_schema())["response_format"]
    assert fmt == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": Verdict.json_schema(), "strict": True},
    }
    offered = tool_params(model, [t.spec()["function"] for t in get_tools(["add"])])
    assert offered["tool_choice"] == "auto"
    (spec,) = offered["tools"]
    assert spec["function"]["name"] == "add"
    assert spec["function"]["parameters"]["required"] == ["a", "b"]


# -- MAD ---------------------------------------------------------------------------------------


def mad_model(native, verdict):
    ruling = json.dumps({"reason": "Six sevens.", "answer": "42"})

    def respond(request):
        prompt = last_user_message(request)
        if "of the debate is over" in prompt:
            return verdict
        if "candidate answers" in prompt:
            return "Candidates: 42 and 41."
        if "Back to the question" in prompt:
            return ruling
        return "The answer is 42."

    return ScriptedModel(respond, native=native)


@PATHS
async def test_mad_moderator_verdict_on_both_paths(native):
    yes = json.dumps(
        {"preference": "yes", "supported_side": "affirmative", "reason": "r", "answer": "42"}
    )
    model = mad_model(native, yes)
    solution = await get_method("mad")().solve(TASK, Context(model))
    assert len(model.calls) == 3 and solution.answer == "Final answer:\n42"
    schemas = [schema_of(r) for r in model.requests]
    assert schemas == [None, None, Verdict.json_schema() if native else None]


@PATHS
async def test_mad_judge_ruling_on_both_paths(native):
    no = json.dumps({"preference": "no", "supported_side": "negative", "reason": "", "answer": ""})
    model = mad_model(native, no)
    method = get_method("mad")(max_rounds=1)
    solution = await method.solve(TASK, Context(model))
    assert len(model.calls) == 3 + 2 and solution.metadata["decided_by"] == "judge"
    assert solution.answer == "Final answer:\n42"
    verdict, candidates, ruling = (schema_of(r) for r in model.requests[2:])
    assert candidates is None
    expected = (Verdict.json_schema(), Ruling.json_schema()) if native else (None, None)
    assert (verdict, ruling) == expected


# -- conductor ---------------------------------------------------------------------------------


@PATHS
async def test_conductor_actions_on_both_paths(native):
    def planner_reply(action, **arguments):
        return json.dumps({"thought": "t", "plan": [], "action": action, "arguments": arguments})

    delegate = planner_reply("analyst", task="What is 6 * 7?")
    replies = {"planner": [delegate, planner_reply(FINAL, answer="42")], "analyst": ["42."]}

    def respond(request):
        role = "planner" if "You lead a small team" in request.messages[0]["content"] else "analyst"
        return replies[role].pop(0)

    model = ScriptedModel(respond, native=native)
    solution = await get_method("conductor")().solve(TASK, Context(model))
    assert solution.answer == "42" and solution.metadata["finish"] == FINAL
    assert len(model.calls) == 3
    planner_calls = [r for r in model.requests if r.messages[0]["content"].startswith("You lead")]
    assert len(planner_calls) == 2 and model.requests[1].response_format is None  # the analyst
    for request in planner_calls:
        schema = schema_of(request)
        if not native:
            assert schema is None
            continue
        assert request.response_format["json_schema"]["strict"] is False
        assert schema["properties"]["action"]["enum"] == ["analyst", "coder", FINAL]
        arguments = schema["properties"]["arguments"]["anyOf"]
        assert [sorted(a["properties"]) for a in arguments] == [["task"], ["task"], ["answer"]]


# -- LLM judge ---------------------------------------------------------------------------------


@PATHS
@pytest.mark.parametrize(("verdict", "correct"), [("CORRECT", True), ("INCORRECT", False)])
async def test_the_judges_verdict_on_both_paths(native, verdict, correct):
    reply = json.dumps({"verdict": verdict}) if native else verdict
    judge = ScriptedModel(["42", reply], native=native)
    ctx = Context(ScriptedModel(), sample_id="s")
    score = await LLMJudgeEvaluator(judge=judge).score(TASK, "The answer is 42.", ctx=ctx)
    assert score.correct is correct and score.extracted == "42"
    judge.assert_consumed()
    extract, compare = judge.requests
    assert schema_of(extract) is None
    assert schema_of(compare) == (JudgeVerdict.json_schema() if native else None)
    if native:
        assert compare.response_format["json_schema"]["name"] == "verdict"
    assert ctx.ledger.totals(purpose="scoring").calls == 2


def test_a_json_verdict_is_read_as_it_says():
    assert JudgeVerdict.json_schema()["properties"]["verdict"]["enum"] == ["CORRECT", "INCORRECT"]
    assert parse_verdict('{"verdict": "INCORRECT"}') is False
    assert parse_verdict('Not sure it is right. {"verdict": "CORRECT"}') is True
