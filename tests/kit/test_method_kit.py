"""The method kit's execution pieces: the layer-by-layer runner and vote-and-propose."""

from __future__ import annotations

import pytest
from helpers import TASK, agent_of

from maslab.core.context import Budget, Context
from maslab.core.topology import Topology
from maslab.errors import ConfigError
from maslab.kit.aggregation import propose_vote
from maslab.kit.layers import run_layers
from maslab.llm.scripted import ScriptedModel, last_user_message

# b -> c, a -> c, a -> d, c -> d: layers [b, a], [c], [d]; node order b, c, a, d
DAG = Topology.from_edges([("b", "c"), ("a", "c"), ("a", "d"), ("c", "d")])


def model_with(slow: str) -> ScriptedModel:
    """Each node answers ``out-<node>``; node ``slow`` takes longest, so it finishes last."""
    return ScriptedModel(
        lambda r: f"out-{agent_of(r)}",
        latency=lambda r: 0.05 if agent_of(r) == slow else 0.0,
    )


async def run(model: ScriptedModel) -> list[tuple[int, dict[str, str]]]:
    ctx = Context(model)

    async def node(name: str, depth: int, inputs: list[tuple[str, str]]) -> str:
        shown = "; ".join(f"{p}={out}" for p, out in inputs)
        reply = await ctx.agent(name).reply(f"{name} sees [{shown}]", round=depth)
        return reply.content

    return [(depth, outputs) async for depth, outputs in run_layers(DAG, node)]


@pytest.mark.parametrize("slow", ["a", "b"])
async def test_layers_run_in_order_and_predecessors_come_in_node_order(slow: str):
    model = model_with(slow)
    layers = await run(model)
    finished = [agent_of(c.request) for c in sorted(model.calls, key=lambda c: c.finished)]
    assert finished[:2] == (["b", "a"] if slow == "a" else ["a", "b"])
    assert DAG.nodes == ["b", "c", "a", "d"]  # in the order the edges name them
    assert [(depth, list(outputs)) for depth, outputs in layers] == [
        (0, ["b", "a"]),
        (1, ["c"]),
        (2, ["d"]),
    ]
    prompts = {agent_of(r): last_user_message(r) for r in model.requests}
    # node order (b before a) whichever finished first; d lists c before a, its node order
    assert prompts["c"] == "c sees [b=out-b; a=out-a]"
    assert prompts["d"] == "d sees [c=out-c; a=out-a]"


async def test_a_layer_subset_runs_only_those_layers():
    model = ScriptedModel(lambda r: "x")
    ctx = Context(model)

    async def node(name: str, depth: int, inputs: list[tuple[str, str]]) -> str:
        return (await ctx.agent(name).reply(name, round=depth)).content

    ran = [outputs async for _, outputs in run_layers(DAG, node, layers=DAG.layers()[:-1])]
    assert [list(o) for o in ran] == [["b", "a"], ["c"]]
    assert len(model.calls) == 3


async def test_a_cycle_is_a_config_error():
    async def node(name: str, depth: int, inputs: list[tuple[str, str]]) -> str:
        raise AssertionError("no node runs")

    with pytest.raises(ConfigError, match="cycle"):
        async for _ in run_layers(Topology.ring(["a", "b"]), node):
            pass


def test_propose_vote_proposes_the_winner_with_its_votes():
    ctx = Context(ScriptedModel(["unused"]), budget=Budget(max_calls=0))
    responses = ["The answer is 41.", "So: The answer is 42.", "The answer is 42."]
    decision = propose_vote(ctx, TASK, responses, round=3)
    assert decision.response == "So: The answer is 42."
    assert ctx.proposal is not None
    assert ctx.proposal.answer == "So: The answer is 42."
    assert ctx.proposal.metadata == {"round": 3, "votes": decision.vote.counts}
    assert decision.vote.counts == {"41": 1, "42": 2}
