"""Structural tests of the reference methods with the scripted model."""

from __future__ import annotations

import itertools
import json

import pytest
from helpers import TASK, TwoModels, agent_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method, list_methods
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods.llm_debate import LLMDebate


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


# --- MASLab's protocol (preset=maslab) ----------------------------------------------------------


def debate_script(request) -> str:
    """Debater i says 'd<i>-r<round>: The answer is 4<i>.' (its round: the assistant turns it has
    made); the aggregator says how many turns it was sent."""
    agent = agent_of(request)
    if agent == "aggregator":
        return f"aggregated {len(request.messages)}: The answer is 42."
    i = int(agent.rsplit("_", 1)[1])
    r = sum(m["role"] == "assistant" for m in request.messages)
    return f"d{i}-r{r}: The answer is {40 + i}."


def test_the_maslab_preset_sets_its_protocol_and_explicit_settings_win():
    config = LLMDebate(preset="maslab").config
    assert (config.agents, config.rounds, config.aggregate) == (3, 2, "llm")
    assert LLMDebate().config.aggregate == "majority"  # the paper's vote stays the default
    explicit = LLMDebate(preset="maslab", agents=4, rounds=3).config
    assert (explicit.agents, explicit.rounds, explicit.aggregate) == (4, 3, "llm")
    every_default = LLMDebate.Config().model_dump(mode="json")
    assert LLMDebate({**every_default, "preset": "maslab"}).config == config
    with pytest.raises(ConfigError, match="preset"):
        LLMDebate(preset="du")


@pytest.mark.parametrize(("agents", "rounds"), [(None, None), (4, 2), (2, 3), (1, 1)])
async def test_the_maslab_preset_debates_then_aggregates_with_one_call(agents, rounds):
    """MASLab (llm_debate_main.py; agents_num 3, rounds_num 2): 3 agents × 2 rounds, then 1
    aggregate call over the final answers: 7 calls."""
    config = {k: v for k, v in (("agents", agents), ("rounds", rounds)) if v is not None}
    n, r = agents or 3, rounds or 2
    model = ScriptedModel(debate_script)
    ctx = Context(model)
    solution = await LLMDebate(preset="maslab", **config).solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == n * r + 1
    if not config:
        assert len(model.calls) == 7
    *debate, aggregator = ctx.ledger.records
    assert aggregator.agent == "aggregator" and aggregator.round == r
    assert {rec.agent for rec in debate} == {f"debater_{i}" for i in range(1, n + 1)}
    shown = aggregator.messages[-1]["content"]
    assert len(aggregator.messages) == 1 and shown.startswith(TASK.prompt())
    finals = [f"d{i}-r{r - 1}: The answer is {40 + i}." for i in range(1, n + 1)]
    positions = [shown.index(text) for text in finals]
    assert positions == sorted(positions)  # the last round's answers, in agent order
    assert f"-r{r - 2}:" not in shown  # and nothing of the rounds before
    assert solution.answer == "aggregated 1: The answer is 42."


async def test_the_maslab_preset_prompts_do_not_depend_on_finishing_order():
    async def seen(slow_first: bool) -> tuple[list, str]:
        def latency(request) -> float:
            agent = agent_of(request)
            if agent == "aggregator":
                return 0.0
            i = int(agent.rsplit("_", 1)[1])
            return 0.003 * ((4 - i) if slow_first else i)

        model = ScriptedModel(debate_script, latency=latency)
        ctx = Context(model)
        solution = await LLMDebate(preset="maslab").solve(TASK, ctx)
        finished = [agent_of(c.request) for c in sorted(model.calls, key=lambda c: c.finished)]
        seen = sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records)
        return seen, solution.answer, finished[:3]

    first, last = await seen(True), await seen(False)
    assert first[:2] == last[:2]
    assert first[2] == ["debater_3", "debater_2", "debater_1"] == last[2][::-1]


async def test_the_maslab_preset_budget_stop_votes_over_the_last_complete_round():
    def respond(request) -> str:  # round 0: all say 5; round 1: 7, 7 and a bare 8
        if len(request.messages) == 1:
            return "The answer is 5."
        return "8" if agent_of(request) == "debater_3" else "The answer is 7."

    model = ScriptedModel(respond)
    ctx = Context(model, budget=Budget(max_calls=6))
    solution = await LLMDebate(preset="maslab").run_sample(TASK, ctx)
    assert ctx.usage.calls == 6 and "budget" in solution.metadata
    assert solution.answer == "The answer is 7."
    assert solution.metadata["votes"] == {"7": 2, "8": 1}  # round 1's answers, not round 0's


async def test_the_maslab_preset_reads_garbage_without_crashing():
    model = ScriptedModel(lambda r: "" if agent_of(r) != "aggregator" else "{not json")
    solution = await LLMDebate(preset="maslab").solve(TASK, Context(model))
    assert len(model.calls) == 7 and solution.answer == "{not json"


async def test_the_maslab_preset_puts_the_aggregator_on_its_own_model():
    method = LLMDebate(preset="maslab")
    roles = method.check_model_roles({"aggregator": "scripted:b", "debater_2": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: debate_script), model_roles=roles)
    await method.solve(TASK, ctx)
    on_b = {r.agent for r in ctx.ledger.records if r.model == "scripted:b"}
    assert on_b == {"aggregator", "debater_2"} and len(ctx.ledger.records) == 7


def test_the_maslab_preset_from_the_command_line(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "llm_debate", "--benchmark", "arith", "--model", "scripted:echo",
         "--config", "preset=maslab", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["usage"]["calls"] for r in results] == [7, 7]
    recorded = json.loads((out / "manifest.json").read_text())["method_config"]
    assert (recorded["agents"], recorded["rounds"], recorded["aggregate"]) == (3, 2, "llm")
