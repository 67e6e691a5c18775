"""AgentPrune (arXiv 2410.02506) with scripted models: the candidates and the untrained full
graph, the call formula on full and pruned graphs (who saw whose answers in which round), the
one-shot pruning rule, mask learning that keeps the edges of the one agent that is right, the
learned state, budget stops, reordered latencies, model roles, garbage replies and ``maslab
run`` (arith, and gsm8k with ``--optimize-on``)."""

from __future__ import annotations

import json

import graph_designers_play as play
import numpy as np
import pytest

from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.kit.learning import Edge
from maslab.llm.scripted import ScriptedModel
from maslab.methods.graph_designers.agentprune import AgentPrune
from maslab.methods.graph_designers.spacetime import spatial_candidates

SPATIAL = [("agent_1", "agent_3"), ("agent_2", "agent_3"), ("agent_3", "agent_4")]
TEMPORAL = [
    ("agent_1", "agent_1"), ("agent_1", "agent_2"), ("agent_2", "agent_2"),
    ("agent_2", "agent_4"), ("agent_3", "agent_1"), ("agent_3", "agent_3"),
    ("agent_4", "agent_1"), ("agent_4", "agent_4"),
]  # fmt: skip


def learned(method: AgentPrune, spatial: list[Edge], temporal: list[Edge]) -> AgentPrune:
    """``method`` as if trained: the edges listed at p = 0.9, the others at 0.1."""
    for policy, keep in ((method.spatial, spatial), (method.temporal, temporal)):
        policy.logits[:] = [2.2 if edge in keep else -2.2 for edge in policy.edges]
    method.accuracy = []
    return method


def test_defaults_candidates_and_the_untrained_graph():
    method = AgentPrune()
    assert get_method("agentprune") is AgentPrune
    cfg = method.config
    assert (cfg.agents, cfg.rounds, cfg.decision, cfg.prune_ratio) == (4, 1, "llm", 0.25)
    assert (cfg.iterations, cfg.batch_size, cfg.learning_rate) == (10, 4, 0.1)
    assert method.spatial.edges == spatial_candidates(method.agent_names())
    assert len(method.spatial.edges) == 6 and len(method.temporal.edges) == 16
    assert ("agent_2", "agent_2") in method.temporal.edges  # an agent's own last answer
    assert method.spatial.probabilities() == pytest.approx([0.5] * 6)
    assert method.learned_state() is None
    plan, details = method.inference_plan(play.TEST)
    assert details == {"optimized": False} and plan == method.full_plan()
    assert list(plan.rounds[0].spatial) == method.spatial.edges
    for bad in ({"agents": 0}, {"rounds": 0}, {"prune_ratio": 1}, {"decision": "vote"},
                {"learning_rate": 0}, {"iterations": 0}, {"initial_probability": 1}):  # fmt: skip
        with pytest.raises(ConfigError):
            AgentPrune(**bad)


async def test_a_pruned_graph_shows_each_agent_exactly_its_kept_predecessors():
    method = learned(AgentPrune(rounds=2, prune_ratio=0.5), SPATIAL, TEMPORAL)
    meta = await play.check_views_and_calls(method, 1)
    assert meta["cut"] == {"spatial": 3, "temporal": 8}
    for r, step in enumerate(meta["graph"]):
        assert step["agents"] == ["agent_1", "agent_2", "agent_3", "agent_4"]
        assert step["spatial"] == [list(e) for e in SPATIAL]
        assert step["temporal"] == ([list(e) for e in TEMPORAL] if r else [])


def test_the_one_shot_pruning_cuts_the_least_probable_share_of_each_kind():
    method = AgentPrune(prune_ratio=0.25)
    method.spatial.logits[:] = [3.0, -1.0, 0.5, -1.0, 2.0, 1.0]  # a tie at -1.0
    spatial, temporal = method.kept(play.TEST)
    edges = method.spatial.edges
    # round(0.25 · 6) = 2 cut: the two at -1.0 (the later first on a tie)
    assert spatial == [edges[0], edges[2], edges[4], edges[5]]
    # all 16 temporal logits tie: round(0.25 · 16) = 4 cut, the 4 last candidates
    assert temporal == method.temporal.edges[:12]
    assert AgentPrune(prune_ratio=0).kept(play.TEST)[0] == edges


async def test_mask_learning_keeps_the_edges_of_the_agent_that_is_right():
    # a graph scores 1 only when every agent reads agent_1 (see play.one_is_right)
    method = AgentPrune(agents=5, learning_rate=1.0, iterations=30)
    ctx = Context(ScriptedModel(play.one_is_right("agent_1")), sample_id="optimize", seed=3)
    await method.optimize(play.DEV, ctx)
    assert len(ctx.ledger.records) == 30 * 4 * (5 + 1)  # iterations · batch · (N·R + d)
    out_of_right = [e for e in method.spatial.edges if e[0] == "agent_1"]
    assert all(method.spatial.probability(e) > 0.6 for e in out_of_right)  # from 0.5
    assert np.mean(method.accuracy[-10:]) > np.mean(method.accuracy[:10]) + 0.3
    spatial, _ = method.kept(play.TEST)
    assert len(spatial) == 7 and set(out_of_right) <= set(spatial)  # round(0.25 · 10) = 3 cut
    model = ScriptedModel(play.one_is_right("agent_1"))
    solution, _ = await play.solve(method, model, play.TEST)
    assert solution.answer == f"Decided: \\boxed{{{play.TEST.gold}}}" and len(model.calls) == 6


def test_the_learned_state_round_trips_and_is_checked():
    method = learned(AgentPrune(rounds=2, prune_ratio=0.5), SPATIAL, TEMPORAL)
    method.accuracy = [0.25, 0.75]
    state = json.loads(json.dumps(method.dump_learned_state()))
    assert state["format"] == "agentprune/1" and state["accuracy"] == [0.25, 0.75]
    again = AgentPrune(rounds=2, prune_ratio=0.5)
    again.restore_learned_state(state, "state.json")
    assert again.dump_learned_state() == state
    assert again.kept(play.TEST) == method.kept(play.TEST) == (SPATIAL, TEMPORAL)
    assert again.inference_plan(play.TEST) == method.inference_plan(play.TEST)
    with pytest.raises(ConfigError, match="format: Input should be 'agentprune/1'"):
        again.restore_learned_state({**state, "format": "g-designer/1"}, "state.json")
    with pytest.raises(ConfigError, match="not fit this config: its edges are not those of 5"):
        AgentPrune(agents=5).restore_learned_state(state, "state.json")


class TestAsEveryDesigner(play.TiedChecks):
    method = AgentPrune

    def concurrent(self) -> AgentPrune:
        return learned(AgentPrune(rounds=2, prune_ratio=0.5), SPATIAL, TEMPORAL)
