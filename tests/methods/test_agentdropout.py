"""AgentDropout (arXiv 2503.18891) with scripted models: the untrained full graph, the call
formula with agents dropped per round (who saw whose answers in which round), the dropout
rules, the node stage that never drops the one agent that is right and the edge stage that
keeps its edges, the learned state, budget stops, reordered latencies, model roles, garbage
replies and ``maslab run`` (arith, and gsm8k with ``--optimize-on``)."""

from __future__ import annotations

import json
from typing import ClassVar

import graph_designers_play as play
import numpy as np
import pytest

from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.kit.learning import Edge
from maslab.llm.scripted import ScriptedModel
from maslab.methods.graph_designers.agentdropout import AgentDropout

A1, A2, A3, A4 = "agent_1", "agent_2", "agent_3", "agent_4"
DROPPED = [[A2], [A4]]
SPATIAL = [[(A1, A4), (A3, A4)], [(A1, A3), (A2, A3)]]
TEMPORAL = [(A1, A1), (A1, A2), (A3, A3), (A4, A1), (A4, A2), (A4, A3)]


def trained(
    method: AgentDropout,
    dropped: list[list[str]],
    spatial: list[list[Edge]],
    temporal: list[list[Edge]],
) -> AgentDropout:
    """``method`` as if optimised: round r drops ``dropped[r]`` and keeps the edges listed
    (p = 0.9, the others 0.1); ``temporal[r]`` holds round r+1's temporal edges."""
    names = method.agent_names()
    for slot, gone in enumerate(dropped):
        method.nodes.logits[slot] = [3.0 if n in gone else 0.0 for n in names]
    for policies, keeps in ((method.spatial, spatial), (method.temporal, temporal)):
        for policy, keep in zip(policies, keeps, strict=True):
            policy.logits[:] = [2.2 if edge in keep else -2.2 for edge in policy.edges]
    method.edge_accuracy = []
    return method


def example() -> AgentDropout:
    """4 agents, 2 rounds: agent_2 sits out round 0, agent_4 round 1; of the 3 spatial edges
    within each team one is dropped, of the 9 temporal edges between the teams 3."""
    method = AgentDropout(agents=4, rounds=2, node_dropout=0.25, edge_dropout=0.34)
    return trained(method, DROPPED, SPATIAL, [TEMPORAL])


def test_defaults_and_the_untrained_graph():
    method = AgentDropout()
    assert get_method("agentdropout") is AgentDropout
    cfg = method.config
    assert (cfg.agents, cfg.rounds, cfg.decision) == (5, 2, "llm")
    assert (cfg.node_dropout, cfg.edge_dropout, cfg.learning_rate) == (0.2, 0.2, 0.1)
    assert (cfg.node_iterations, cfg.node_batch_size) == (2, 20)
    assert (cfg.edge_iterations, cfg.edge_batch_size) == (4, 10)
    assert method.dropped_per_round() == 1
    assert method.nodes.slots == ["round_0", "round_1"] and len(method.temporal) == 1
    assert method.learned_state() is None
    plan, details = method.inference_plan(play.TEST)
    assert details == {"optimized": False} and plan == method.full_plan()
    assert plan.calls("llm") == 5 * 2 + 1
    assert AgentDropout(agents=1).dropped_per_round() == 0  # never the last agent
    assert AgentDropout(agents=3, node_dropout=0.9).dropped_per_round() == 2
    for bad in ({"agents": 0}, {"node_dropout": 1}, {"edge_dropout": -0.1},
                {"node_iterations": 0}, {"edge_batch_size": 0}, {"decision": "vote"}):  # fmt: skip
        with pytest.raises(ConfigError):
            AgentDropout(**bad)


@pytest.mark.parametrize(("node_dropout", "k"), [(0.0, 0), (0.2, 1), (0.5, 2), (0.9, 3)])
async def test_k_agents_sit_out_each_round(node_dropout, k):
    method = AgentDropout(agents=4, rounds=3, node_dropout=node_dropout)
    TestAsEveryDesigner().randomise(method, np.random.default_rng(7))
    assert method.dropped_per_round() == k  # round(node_dropout · N), at most N - 1
    meta = await play.check_views_and_calls(method, 1)
    assert [len(d) for d in meta["dropped"]] == [k] * 3
    for gone, step in zip(meta["dropped"], meta["graph"], strict=True):
        assert sorted([*gone, *step["agents"]]) == list(method.agent_names())


async def test_each_round_runs_its_team_on_its_kept_edges():
    meta = await play.check_views_and_calls(example(), 1)  # 3 + 3 agents + 1 decision
    assert meta["dropped"] == DROPPED
    graph = meta["graph"]
    assert [step["agents"] for step in graph] == [[A1, A3, A4], [A1, A2, A3]]
    assert [step["spatial"] for step in graph] == [[list(e) for e in s] for s in SPATIAL]
    assert graph[0]["temporal"] == [] and graph[1]["temporal"] == [list(e) for e in TEMPORAL]


def test_the_dropout_rules_rank_by_the_learned_logits():
    method = AgentDropout(agents=4, rounds=2, node_dropout=0.5, edge_dropout=0.34)
    method.nodes.logits[0] = [0.0, 1.0, 1.0, -1.0]  # agents 2 and 3 likeliest to drop
    method.nodes.logits[1] = [0.5, 0.0, 0.0, 0.0]  # agent_1, then a tie: the later drops
    assert method.teams() == [[A1, A4], [A2, A3]]
    spatial, temporal = method.between(method.teams())
    assert spatial == [[(A1, A4)], [(A2, A3)]]
    assert temporal == [[], [(A1, A2), (A1, A3), (A4, A2), (A4, A3)]]
    method.edge_accuracy = []
    plan, details = method.inference_plan(play.TEST)
    assert details["dropped"] == [[A2, A3], [A1, A4]]
    # all logits equal: round(0.34 · 4) = 1 temporal edge cut, the last candidate
    assert list(plan.rounds[1].temporal) == [(A1, A2), (A1, A3), (A4, A2)]
    assert [list(r.spatial) for r in plan.rounds] == spatial  # round(0.34 · 1) = 0 cut


async def test_the_node_stage_keeps_the_right_agent_and_the_edge_stage_its_edges():
    # a graph scores 1 only when every agent reads agent_1 (see play.one_is_right)
    method = AgentDropout(
        agents=5, rounds=1, learning_rate=1.0,
        node_iterations=10, node_batch_size=4, edge_iterations=20, edge_batch_size=4,
    )  # fmt: skip
    ctx = Context(ScriptedModel(play.one_is_right(A1)), sample_id="optimize", seed=3)
    await method.optimize(play.DEV, ctx)
    assert len(ctx.ledger.records) == (10 * 4 + 20 * 4) * (4 + 1)  # steps·batch·((N-k)·R + d)
    assert method.nodes.probabilities(0)[0] < 0.05  # dropping agent_1 always failed: from 0.2
    assert len(method.node_accuracy) == 10 and len(method.edge_accuracy or []) == 20
    (team,) = method.teams()
    assert A1 in team and len(team) == 4
    out_of_right = [(A1, v) for v in team[1:]]
    assert all(method.spatial[0].probability(e) > 0.5 for e in out_of_right)
    plan, _ = method.inference_plan(play.TEST)
    assert set(out_of_right) <= set(plan.rounds[0].spatial)
    model = ScriptedModel(play.one_is_right(A1))
    solution, _ = await play.solve(method, model, play.TEST)
    assert solution.answer == f"Decided: \\boxed{{{play.TEST.gold}}}" and len(model.calls) == 5


async def test_no_agent_to_drop_skips_the_node_stage():
    method = AgentDropout(agents=3, node_dropout=0.0, edge_iterations=2, edge_batch_size=2)
    ctx = Context(ScriptedModel(play.one_is_right()), sample_id="optimize")
    await method.optimize(play.DEV, ctx)
    assert method.node_accuracy == [] and len(method.edge_accuracy or []) == 2
    assert len(ctx.ledger.records) == 2 * 2 * (3 * 2 + 1)


def test_the_learned_state_round_trips_and_is_checked():
    method = example()
    method.node_accuracy, method.edge_accuracy = [0.5], [0.25, 0.75]
    state = json.loads(json.dumps(method.dump_learned_state()))
    assert state["format"] == "agentdropout/1" and len(state["spatial"]) == 2
    assert len(state["temporal"]) == 1 and state["nodes"]["slots"] == ["round_0", "round_1"]
    again = AgentDropout(agents=4, rounds=2, node_dropout=0.25, edge_dropout=0.34)
    again.restore_learned_state(state, "state.json")
    assert again.dump_learned_state() == state
    assert again.inference_plan(play.TEST) == method.inference_plan(play.TEST)
    with pytest.raises(ConfigError, match="its node logits are not those of 5 agents over 2"):
        AgentDropout(agents=5).restore_learned_state(state, "state.json")
    with pytest.raises(ConfigError, match="its edge logits are not those of 2 rounds"):
        again.restore_learned_state({**state, "temporal": []}, "state.json")
    with pytest.raises(ConfigError, match="format: Input should be 'agentdropout/1'"):
        again.restore_learned_state({**state, "format": "agentprune/1"}, "state.json")


class TestAsEveryDesigner(play.DesignerChecks):
    method = AgentDropout
    untrained_calls = 5 * 2 + 1
    cheap: ClassVar = {"node_iterations": 1, "node_batch_size": 2, "edge_iterations": 1,
                       "edge_batch_size": 2}  # fmt: skip
    cheap_calls = (1 * 2 + 1 * 2) * (4 * 2 + 1)  # (steps · batch) · ((N - k)·R + d)
    learner: ClassVar = {"node_batch_size": 4, "edge_batch_size": 4}

    def concurrent(self) -> AgentDropout:
        return example()

    def randomise(self, method, rng):
        method.nodes.logits[:] = rng.normal(size=method.nodes.logits.shape)
        for policy in [*method.spatial, *method.temporal]:
            policy.logits[:] = rng.normal(size=len(policy.edges))
        method.edge_accuracy = [0.5]
        return method

    def team(self, method, trained):
        return method.config.agents - (method.dropped_per_round() if trained else 0)
