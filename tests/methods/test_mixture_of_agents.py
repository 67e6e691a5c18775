"""Structural tests of Mixture-of-Agents (arXiv 2406.04692) with scripted models."""

from __future__ import annotations

import re

import pytest
from helpers import TASK, agent_of, method_runner

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import ChatRequest
from maslab.methods.mixture_of_agents import MixtureOfAgents, synthesis_system


def system_of(request: ChatRequest) -> str | None:
    first = request.messages[0]
    return first["content"] if first["role"] == "system" else None


def shown(request: ChatRequest) -> int:
    """How many references the request's system message shows."""
    return len(re.findall(r"^\[\d+\]$", system_of(request) or "", flags=re.MULTILINE))


def tagged(request: ChatRequest) -> str:
    """A reply naming its agent and how many references it was shown."""
    return f"{agent_of(request)} after {shown(request)}: The answer is 42."


run = method_runner(MixtureOfAgents, TASK)


def test_defaults_are_the_papers():
    cfg = MixtureOfAgents().config
    assert (cfg.layers, cfg.proposers) == (3, 6)
    assert MixtureOfAgents().agent_names() == tuple(f"proposer_{i}" for i in range(1, 7))
    assert get_method("mixture_of_agents") is MixtureOfAgents
    with pytest.raises(ConfigError):
        MixtureOfAgents(layers=1)
    with pytest.raises(ConfigError):
        MixtureOfAgents(proposers=0)


@pytest.mark.parametrize(("layers", "proposers"), [(2, 1), (2, 3), (3, 2), (3, 6), (4, 3)])
async def test_calls_are_n_times_l_minus_1_plus_1(layers, proposers):
    model = ScriptedModel(tagged)
    solution, ctx = await run(model, layers=layers, proposers=proposers)
    assert len(model.calls) == ctx.usage.calls == proposers * (layers - 1) + 1
    rounds = [(r.agent, r.round) for r in ctx.ledger.records]
    assert sorted(rounds, key=lambda x: x[1])[-1] == ("aggregator", layers - 1)
    for layer in range(layers - 1):
        layer_agents = sorted(a for a, r in rounds if r == layer)
        assert layer_agents == sorted(f"proposer_{i}" for i in range(1, proposers + 1))
    assert solution.answer.startswith("aggregator")


async def test_paper_default_is_13_calls():
    model = ScriptedModel(tagged)
    await run(model)
    assert len(model.calls) == 13


async def test_layer_one_sees_only_the_question_and_later_layers_see_the_previous_layer():
    model = ScriptedModel(tagged)
    _, ctx = await run(model, layers=3, proposers=3)
    by_round: dict[int, list] = {}
    for record in ctx.ledger.records:
        by_round.setdefault(record.round, []).append(record)
    for request in by_round[0]:
        assert [m["role"] for m in request.messages] == ["user"]
        assert request.messages[-1]["content"] == TASK.prompt()
    layer0 = [m for m in ctx.transcript if m.round == 0]
    layer0_in_order = sorted(layer0, key=lambda m: m.sender)
    for request in by_round[1]:
        assert request.messages[0] == {
            "role": "system",
            "content": synthesis_system(layer0_in_order),
        }
        assert request.messages[-1]["content"] == TASK.prompt()
    layer1_in_order = sorted((m for m in ctx.transcript if m.round == 1), key=lambda m: m.sender)
    (aggregate,) = by_round[2]
    assert aggregate.agent == "aggregator"
    system = aggregate.messages[0]["content"]
    assert system == synthesis_system(layer1_in_order)
    # the aggregator is shown the last proposer layer only, never layer 0
    assert all(m.content not in system for m in layer0)
    assert all(m.content in system for m in layer1_in_order)


async def test_references_follow_agent_order_not_completion_order_byte_for_byte():
    def reversed_latency(request: ChatRequest) -> float:
        agent = agent_of(request)
        return 0.0 if agent == "aggregator" else 0.01 * (5 - int(agent.rsplit("_", 1)[1]))

    def in_order_latency(request: ChatRequest) -> float:
        agent = agent_of(request)
        return 0.0 if agent == "aggregator" else 0.01 * int(agent.rsplit("_", 1)[1])

    prompts = []
    for latency in (reversed_latency, in_order_latency):
        model = ScriptedModel(tagged, latency=latency)
        _, ctx = await run(model, layers=3, proposers=4)
        if latency is reversed_latency:  # the layer really finished last-to-first
            first_layer = [c for c in model.calls if shown(c.request) == 0]
            assert [agent_of(c.request) for c in first_layer] == [
                f"proposer_{i}" for i in (4, 3, 2, 1)
            ]
        prompts.append(
            sorted(
                (r.agent, r.round, repr(r.messages))
                for r in ctx.ledger.records  # ledger keeps each call's messages
            )
        )
        system = system_of(model.calls[-1].request)
        positions = [system.index(f"proposer_{i} after") for i in range(1, 5)]
        assert positions == sorted(positions)
    assert prompts[0] == prompts[1]


async def test_a_budget_stop_returns_the_best_answer_so_far():
    def replies(request: ChatRequest) -> str:
        agent = agent_of(request)
        if shown(request) == 0:
            return {"proposer_1": "I think 41.", "proposer_2": "The answer is 42.",
                    "proposer_3": "So: the answer is 42."}[agent]  # fmt: skip
        return "Refined: the answer is 7."

    model = ScriptedModel(replies)
    ctx = Context(model, budget=Budget(max_calls=4))  # layer 1 done, layer 2 partial
    solution = await MixtureOfAgents(layers=3, proposers=3).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert solution.answer == "The answer is 42."  # the vote over layer 1, in agent order


async def test_a_budget_stop_before_any_complete_layer_answers_nothing():
    model = ScriptedModel(tagged)
    ctx = Context(model, budget=Budget(max_calls=2))
    solution = await MixtureOfAgents(layers=2, proposers=3).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and solution.answer == ""


async def test_each_sample_has_its_own_state():
    method = MixtureOfAgents(layers=2, proposers=2)
    first = await method.solve(TASK, Context(ScriptedModel(tagged)))
    model = ScriptedModel(tagged)
    second = await method.solve(TASK, Context(model))
    assert first.answer == second.answer
    assert "proposer_1 after 0" in system_of(model.calls[-1].request)
    assert shown(model.calls[-1].request) == 2  # this sample's 2 replies, none of the first's


def test_model_roles_route_one_proposers_calls_only(tmp_path):
    script = tmp_path / "b.yaml"
    script.write_text('".": "B says the answer is 42."\n')
    other = f"scripted:{script}"
    outcome = MixtureOfAgents(layers=3, proposers=3).run(
        TASK, "scripted:echo", model_roles={"proposer_2": other}
    )
    records = outcome.context.ledger.records
    assert len(records) == 7
    assert [(r.agent, r.model) for r in records if r.model == other] == [
        ("proposer_2", other),
        ("proposer_2", other),
    ]
    assert {r.model for r in records if r.agent != "proposer_2"} == {"scripted:echo"}
    # the other proposers and the aggregator see B's answer in second place
    aggregate = next(r for r in records if r.agent == "aggregator")
    assert "[2]\nB says the answer is 42." in aggregate.messages[0]["content"]


def test_role_names_are_checked():
    method = MixtureOfAgents(proposers=2)
    method.check_model_roles({"proposer": "scripted:echo", "aggregator": "scripted:echo"})
    method.check_model_roles({"proposer_2": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'proposer_3'"):
        method.check_model_roles({"proposer_3": "scripted:echo"})


def test_cli_run_on_arith(tmp_path):
    argv = ["run", "--method", "mixture_of_agents", "--benchmark", "arith", "--model",
            "scripted:echo", "--limit", "2", "--out", str(tmp_path / "run"), "--no-cache",
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
