"""Structural tests of the reference methods with the scripted model."""

from __future__ import annotations

import itertools

import pytest
from helpers import TASK

from maslab.core.context import Context
from maslab.core.method import get_method, list_methods
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message


def unique_answers():
    """Every call gets a distinct, traceable answer."""
    counter = itertools.count(1)
    return lambda request: f"token-{next(counter)}: The answer is 42."


@pytest.mark.parametrize(("agents", "rounds"), [(3, 2), (2, 3), (4, 1), (1, 2), (5, 3)])
async def test_debate_makes_n_times_r_calls(agents, rounds):
    model = ScriptedModel(unique_answers())
    debate = get_method("llm_debate")(agents=agents, rounds=rounds)
    ctx = Context(model)
    solution = await debate.solve(TASK, ctx)
    assert len(model.calls) == agents * rounds
    assert ctx.usage.calls == agents * rounds
    assert solution.metadata["votes"] == {"42": agents}


async def test_each_agent_sees_the_others_previous_round_and_not_its_own():
    model = ScriptedModel(unique_answers())
    ctx = Context(model)
    await get_method("llm_debate")(agents=3, rounds=3).solve(TASK, ctx)
    answers = {(r.agent, r.round): r.response for r in ctx.ledger.records}
    agents = sorted({r.agent for r in ctx.ledger.records})
    assert len(agents) == 3
    for record in ctx.ledger.records:
        prompt = record.messages[-1]["content"]
        if record.round == 0:
            assert "token-" not in prompt
            continue
        for other in agents:
            previous = answers[(other, record.round - 1)]
            if other == record.agent:
                assert previous not in prompt
                # its own previous answer is in its own history, as its assistant turn
                assert record.messages[-2] == {"role": "assistant", "content": previous}
            else:
                assert previous in prompt
        older = [answers[(a, r)] for a in agents for r in range(record.round - 1)]
        assert not any(text in prompt for text in older)


async def test_the_calls_of_a_round_run_concurrently():
    model = ScriptedModel(unique_answers(), latency=0.1)
    ctx = Context(model)
    await get_method("llm_debate")(agents=4, rounds=2).solve(TASK, ctx)
    by_round = {0: model.calls[:4], 1: model.calls[4:]}
    for calls in by_round.values():
        assert max(c.started for c in calls) < min(c.finished for c in calls)
    assert min(c.started for c in by_round[1]) >= max(c.finished for c in by_round[0])


async def test_majority_vote_picks_the_most_common_extracted_answer():
    finals = iter(["The answer is 41.", "I get 42. The answer is 42.", "The answer is 42."])
    model = ScriptedModel(
        lambda r: "warm-up" if "Explain" in last_user_message(r) else next(finals)
    )
    solution = await get_method("llm_debate")(agents=3, rounds=2).solve(TASK, Context(model))
    assert solution.answer == "I get 42. The answer is 42."
    assert solution.metadata["votes"] == {"41": 1, "42": 2}


async def test_llm_aggregation_adds_exactly_one_call():
    model = ScriptedModel(unique_answers())
    ctx = Context(model)
    solution = await get_method("llm_debate")(aggregate="llm").solve(TASK, ctx)
    assert len(model.calls) == 3 * 2 + 1
    assert ctx.ledger.records[-1].agent == "aggregator"
    assert solution.answer == model.calls[-1].response


async def test_vanilla_is_one_call_on_the_task_prompt():
    model = ScriptedModel(["The answer is 42."])
    solution = await get_method("vanilla")().solve(TASK, Context(model))
    assert solution.answer == "The answer is 42."
    assert last_user_message(model.calls[0].request) == TASK.prompt()
    model.assert_consumed()


def test_registry_lists_and_rejects_unknown_names_with_suggestions():
    assert {"vanilla", "llm_debate"} <= set(list_methods())
    with pytest.raises(ConfigError) as info:
        get_method("debate")
    message = str(info.value)
    assert "unknown method 'debate'" in message and "did you mean llm_debate" in message
    with pytest.raises(ConfigError, match="unknown method 'zzz'; known:"):
        get_method("zzz")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"agents": 0}, "llm_debate config: agents: Input should be greater than or equal to 1"),
        ({"agent": 3}, "llm_debate config: agent: Extra inputs are not permitted"),
        (
            {"aggregate": "mean"},
            "llm_debate config: aggregate: Input should be 'majority' or 'llm'",
        ),
    ],
)
def test_bad_method_config_is_a_one_line_error(overrides, message):
    with pytest.raises(ConfigError) as info:
        get_method("llm_debate")(**overrides)
    assert str(info.value) == message
