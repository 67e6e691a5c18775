"""G-Designer (arXiv 2410.11782) with our cheap query features in place of its GNN, with
scripted models: the features by hand, the untrained full graph, the call formula on full and
generated graphs (who saw whose answers in which round), a graph generated per query, training
that keeps the edges of the one agent that is right, the learned state, budget stops,
reordered latencies, model roles, garbage replies and ``maslab run`` (arith, and gsm8k with
``--optimize-on``)."""

from __future__ import annotations

import json

import graph_designers_play as play
import numpy as np
import pytest

from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.kit.features import query_features
from maslab.llm.scripted import ScriptedModel
from maslab.methods.graph_designers.g_designer import GDesigner

OPTIONS = 4  # the multiple-choice flag's place among the features
CHOICE = Task(id="c", question="Which is prime?", choices=("4", "7"), answer_type="choice")
A1, A2, A3, A4 = "agent_1", "agent_2", "agent_3", "agent_4"


def generator(rounds: int = 2) -> GDesigner:
    """A trained generator: spatial 1 -> 3, 2 -> 3, 3 -> 4 always, 1 -> 2 only for a
    multiple-choice query; temporal v -> v and 4 -> 1."""
    method = GDesigner(rounds=rounds)
    method.spatial.logits[:] = [2.0 if e in [(A1, A3), (A2, A3), (A3, A4)] else -2.0
                                for e in method.spatial.edges]  # fmt: skip
    method.spatial.weights[method.spatial.index[(A1, A2)], OPTIONS] = 5.0
    method.temporal.logits[:] = [2.0 if u == v or (u, v) == (A4, A1) else -2.0
                                 for u, v in method.temporal.edges]  # fmt: skip
    method.accuracy = []
    return method


def test_defaults_and_the_untrained_graph():
    method = GDesigner()
    assert get_method("g_designer") is GDesigner
    cfg = method.config
    assert (cfg.agents, cfg.rounds, cfg.decision, cfg.threshold) == (4, 1, "llm", 0.5)
    assert (cfg.iterations, cfg.batch_size, cfg.learning_rate, cfg.hash_buckets) == (10, 4, 0.1, 8)
    assert method.spatial.weights.shape == (6, 5 + 8) and method.temporal.weights.shape == (16, 0)
    assert method.learned_state() is None
    plan, details = method.inference_plan(play.TEST)
    assert plan == method.full_plan() and details["optimized"] is False
    assert details["features"] == list(query_features(play.TEST, 8))
    for bad in ({"agents": 0}, {"threshold": 1}, {"hash_buckets": 0}, {"decision": "vote"}):
        with pytest.raises(ConfigError):
            GDesigner(**bad)


async def test_each_query_gets_its_own_graph():
    method = generator()
    meta = await play.check_views_and_calls(method, 1)
    spatial = [[A1, A3], [A2, A3], [A3, A4]]
    temporal = [[A1, A1], [A2, A2], [A3, A3], [A4, A1], [A4, A4]]
    assert [step["spatial"] for step in meta["graph"]] == [spatial, spatial]
    assert [step["temporal"] for step in meta["graph"]] == [[], temporal]
    plan, details = method.inference_plan(CHOICE)
    assert details["features"][OPTIONS] == 1.0
    assert list(plan.rounds[0].spatial) == [(A1, A2), (A1, A3), (A2, A3), (A3, A4)]


async def test_training_keeps_the_edges_of_the_agent_that_is_right():
    # a graph scores 1 only when every agent reads agent_1 (see play.one_is_right)
    method = GDesigner(agents=5, learning_rate=1.0, iterations=30)
    ctx = Context(ScriptedModel(play.one_is_right(A1)), sample_id="optimize", seed=3)
    await method.optimize(play.DEV, ctx)
    assert len(ctx.ledger.records) == 30 * 4 * (5 + 1)  # iterations · batch · (N·R + d)
    assert np.mean(method.accuracy[-10:]) > np.mean(method.accuracy[:10])
    assert np.abs(method.spatial.weights).sum() > 0  # the feature weights learned too
    out_of_right = {e for e in method.spatial.edges if e[0] == A1}
    for task in [*play.DEV, play.TEST]:  # the validation queries and an unseen one
        plan, _ = method.inference_plan(task)
        assert out_of_right <= set(plan.rounds[0].spatial)
    model = ScriptedModel(play.one_is_right(A1))
    solution, _ = await play.solve(method, model, play.TEST)
    assert solution.answer == f"Decided: \\boxed{{{play.TEST.gold}}}" and len(model.calls) == 6


def test_the_learned_state_round_trips_and_is_checked():
    method = generator()
    method.accuracy = [0.5]
    state = json.loads(json.dumps(method.dump_learned_state()))
    assert state["format"] == "g-designer/1" and state["spatial"]["features"] == 13
    again = GDesigner(rounds=2)
    again.restore_learned_state(state, "state.json")
    assert again.dump_learned_state() == state
    for task in (play.TEST, CHOICE):
        assert again.inference_plan(task) == method.inference_plan(task)
    with pytest.raises(ConfigError, match="its edges take 13 query features, not 9"):
        GDesigner(hash_buckets=4).restore_learned_state(state, "state.json")
    with pytest.raises(ConfigError, match="its edges are not those of 3 agents"):
        GDesigner(agents=3).restore_learned_state(state, "state.json")
    with pytest.raises(ConfigError, match="format: Input should be 'g-designer/1'"):
        again.restore_learned_state({**state, "format": "gptswarm/1"}, "state.json")


class TestAsEveryDesigner(play.TiedChecks):
    method = GDesigner

    def concurrent(self) -> GDesigner:
        return generator()
