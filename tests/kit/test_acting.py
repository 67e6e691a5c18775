"""The tool loop (:func:`maslab.kit.acting.act`): native and text paths, the order of a reply's
calls, error observations, the step cap, declared-only tools, budget stops."""

from __future__ import annotations

import json

import pytest
from helpers import CLEAR, PUT, TAKE, Shelf, native_reply

from maslab.core.context import Budget, Context
from maslab.errors import BudgetExceeded
from maslab.kit.acting import act
from maslab.llm.scripted import Reply, ScriptedModel
from maslab.llm.types import FunctionCall

FUNCTIONS = (PUT, TAKE)


def written(*calls: tuple[str, dict]) -> str:
    """A text reply making ``calls`` as a JSON list."""
    listed = [{"name": name, "arguments": arguments} for name, arguments in calls]
    return f"I will do this:\n```json\n{json.dumps(listed)}\n```"


def shelf_ctx(model: ScriptedModel, **options) -> Context:
    return Context(model, environment=Shelf(), **options)


async def test_native_calls_of_one_reply_run_in_order_and_answer_each_call_by_its_id():
    model = ScriptedModel(
        [native_reply(("put", {"key": "a", "value": "1"}), ("take", {"key": "a"})), "Done."],
        native=["tools"],
    )
    ctx = shelf_ctx(model)
    agent = ctx.agent("agent")
    acted = await act(agent, "Put 1 under a, then take it.", FUNCTIONS, max_steps=5, round=0)

    assert (acted.message.content, acted.steps, acted.capped) == ("Done.", 2, False)
    # take only finds a because put ran first
    assert [(c.name, c.outcome.result, c.outcome.error) for c in acted.calls] == [
        ("put", "put a", False),
        ("take", "1", False),
    ]
    first, second = model.requests
    assert first.tools == tuple({"type": "function", "function": f} for f in FUNCTIONS)
    assert first.tool_choice == "auto" and "put:" not in first.messages[-1]["content"]
    tool_turns = [m for m in second.messages if m["role"] == "tool"]
    assert [(t["tool_call_id"], t["content"]) for t in tool_turns] == [
        ("call_1", "put a"),
        ("call_2", "1"),
    ]
    assert second.messages[-3]["tool_calls"][0]["function"]["name"] == "put"
    assert [(r.turn, r.agent, r.name, r.error) for r in ctx.tool_calls] == [
        (0, "agent", "put", False),
        (0, "agent", "take", False),
    ]
    assert len(ctx.ledger.records) == 2  # the tool calls are no model calls


async def test_the_text_path_lists_the_functions_and_returns_every_result_in_one_turn():
    model = ScriptedModel(
        [written(("put", {"key": "a", "value": "1"}), ("take", {"key": "a"})), "Done."]
    )
    ctx = shelf_ctx(model)
    acted = await act(ctx.agent("agent"), "Put 1 under a, then take it.", FUNCTIONS, max_steps=5)

    assert [c.outcome.result for c in acted.calls] == ["put a", "1"]
    first, second = model.requests
    assert first.tools is None
    prompt = first.messages[-1]["content"]
    assert prompt.startswith("Put 1 under a, then take it.")
    for function in FUNCTIONS:
        assert f"- {function['name']}: {function['description']}" in prompt
        assert json.dumps(function["parameters"]) in prompt
    results = second.messages[-1]["content"]
    assert results.splitlines()[1:] == [
        '[1] put({"key": "a", "value": "1"}) -> put a',
        '[2] take({"key": "a"}) -> 1',
    ]


async def test_the_text_path_lists_the_functions_once_to_an_agent_with_a_history():
    model = ScriptedModel(["Nothing to do.", "Still nothing.", "Nothing.", "Done."])
    ctx = shelf_ctx(model)
    agent, other = ctx.agent("agent"), ctx.agent("other")
    await act(agent, "First.", FUNCTIONS, max_steps=1)
    await act(agent, "Second.", FUNCTIONS, max_steps=1)
    await act(agent, "Third.", (*FUNCTIONS, CLEAR), max_steps=1)
    await act(other, "First.", FUNCTIONS, max_steps=1)
    first, second, third, fresh = (r.messages[-1]["content"] for r in model.requests)
    assert "- put:" in first and second == "Second."  # in its history already
    assert "- clear:" in third and "- put:" in third  # a changed list is listed again, whole
    assert "- put:" in fresh  # another agent's history does not hold it


async def test_a_refused_call_goes_back_as_an_error_observation_and_the_loop_goes_on():
    took = native_reply(("take", {"key": "x"}))
    model = ScriptedModel([took, "There was nothing."], native=["tools"])
    ctx = shelf_ctx(model)
    acted = await act(ctx.agent("agent"), "Take x.", FUNCTIONS, max_steps=5)

    [call] = acted.calls
    assert call.outcome.error and call.outcome.result == "error: nothing under 'x'"
    assert model.requests[1].messages[-1]["content"] == "error: nothing under 'x'"
    assert acted.steps == 2 and ctx.tool_calls[0].error


async def test_native_arguments_that_are_no_json_object_count_as_none():
    bad = Reply(tool_calls=(FunctionCall("call_1", "take", "key=a"),))
    ctx = shelf_ctx(ScriptedModel([bad, "ok"], native=["tools"]))
    acted = await act(ctx.agent("agent"), "Take a.", FUNCTIONS, max_steps=3)
    assert acted.calls[0].arguments == {} and acted.calls[0].outcome.error


@pytest.mark.parametrize("native", [True, False])
async def test_the_step_cap_ends_the_turn_after_exactly_max_steps_replies(native):
    put = {"key": "a", "value": "1"}
    reply = native_reply(("put", put)) if native else written(("put", put))
    model = ScriptedModel([reply], cycle=True, native=["tools"] if native else [])
    ctx = shelf_ctx(model)
    agent = ctx.agent("agent")
    acted = await act(agent, "Keep putting.", FUNCTIONS, max_steps=3)

    assert (acted.steps, acted.capped, len(acted.calls)) == (3, True, 3)
    assert len(model.calls) == 3 and len(ctx.tool_calls) == 3
    # the last calls' results are in the history all the same, for the next turn to follow
    last = agent.history[-1]
    assert last["role"] == ("tool" if native else "user") and "put a" in last["content"]


async def test_declared_tools_only_return_the_first_calls_without_running_them():
    model = ScriptedModel(
        [native_reply(("put", {"key": "a", "value": "1"}), ("take", {"key": "a"})), "unused"],
        native=["tools"],
    )
    ctx = Context(model)  # no environment: the functions are only declared
    acted = await act(ctx.agent("agent"), "Put then take.", FUNCTIONS, max_steps=5)

    assert acted.steps == 1 and not acted.capped and len(model.calls) == 1
    assert [(c.name, c.arguments, c.outcome) for c in acted.calls] == [
        ("put", {"key": "a", "value": "1"}, None),
        ("take", {"key": "a"}, None),
    ]
    assert ctx.tool_calls == []


async def test_declared_tools_read_in_text_and_a_reply_without_calls_makes_none():
    model = ScriptedModel([written(("take", {"key": "a"}))])
    acted = await act(Context(model).agent("agent"), "Take a.", FUNCTIONS, max_steps=5)
    assert [(c.name, c.arguments) for c in acted.calls] == [("take", {"key": "a"})]

    answer = 'No function fits. The user is {"name": "Alice"}.'  # a name alone is no call
    acted = await act(Context(ScriptedModel([answer])).agent("a"), "Hi.", FUNCTIONS, max_steps=5)
    assert acted.calls == () and acted.message.content == answer


async def test_without_functions_it_is_one_plain_reply():
    model = ScriptedModel([written(("put", {"key": "a", "value": "1"}))], native=["tools"])
    ctx = shelf_ctx(model)
    acted = await act(ctx.agent("agent"), "What is 6 * 7?", (), max_steps=5)
    assert (acted.steps, acted.calls, len(model.calls)) == (1, (), 1)
    assert model.requests[0].tools is None and model.requests[0].messages[-1]["content"] == (
        "What is 6 * 7?"
    )


async def test_a_budget_stop_propagates_and_the_calls_made_before_it_stand():
    model = ScriptedModel([native_reply(("put", {"key": "a", "value": "1"}))], cycle=True,
                          native=["tools"])  # fmt: skip
    ctx = shelf_ctx(model, budget=Budget(max_calls=2))
    with pytest.raises(BudgetExceeded):
        await act(ctx.agent("agent"), "Keep putting.", FUNCTIONS, max_steps=10)
    assert len(model.calls) == 2 and [r.name for r in ctx.tool_calls] == ["put", "put"]


async def test_a_turns_functions_are_offered_as_given():
    model = ScriptedModel(["Nothing to do."], native=["tools"])
    await act(shelf_ctx(model).agent("agent"), "Clear?", (*FUNCTIONS, CLEAR), max_steps=2)
    assert [t["function"]["name"] for t in model.requests[0].tools] == ["put", "take", "clear"]


async def test_max_steps_must_be_positive():
    with pytest.raises(ValueError, match="max_steps"):
        await act(Context(ScriptedModel()).agent("agent"), "Hi.", FUNCTIONS, max_steps=0)
