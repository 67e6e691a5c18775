"""Graph-GRPO (arXiv 2603.02701) with scripted models: the call formula, who sees whom on the
policy's graph, query features, the edge-level GRPO step by hand, an adversarial agent's edges
unlearned on ``arith`` dev tasks, flat groups filtered, the learned state, budget stops,
garbage replies, model roles and ``maslab run --optimize-on``."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from helpers import TASK, agent_of

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.kit.features import QUERY_FEATURES as FEATURES
from maslab.kit.features import query_features
from maslab.kit.learning import EdgeStep
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.graph_grpo import DEFAULT_ROLES, GraphGRPO, system_prompt

TAG = re.compile(r"(agent_\d+)@(\d+)")
WRONG = "-999"


def tagged(request: ChatRequest) -> str:
    """Agent a in round r says 'a@r: The answer is 42.' (r: one more than its own previous
    output shown, 0 if none); the aggregator says 'DECIDED 42'."""
    agent = agent_of(request)
    if agent == "aggregator":
        return "DECIDED: The answer is 42."
    prompt = last_user_message(request)
    own = [int(r) for a, r in TAG.findall(prompt) if a == agent]
    return f"{agent}@{own[0] + 1 if own else 0}: The answer is 42."


def prompts_of(model: ScriptedModel) -> dict[tuple[str, int], str]:
    """Each agent's prompt by (agent, round), the round read from its reply's tag."""
    out = {}
    for call in model.calls:
        if (found := TAG.match(call.response)) is not None:
            out[(found[1], int(found[2]))] = last_user_message(call.request)
    return out


def with_edges(method: GraphGRPO, *edges: tuple[str, str]) -> GraphGRPO:
    """``method`` whose policy keeps exactly ``edges`` at inference (for any query)."""
    method.policy.logits[:] = -3.0
    for edge in edges:
        method.policy.logits[method.policy.index[edge]] = 3.0
    return method


def test_defaults_and_validation():
    method = GraphGRPO()
    cfg = method.config
    assert (len(cfg.agent_roles), cfg.rounds, cfg.group_size) == (4, 3, 16)
    assert method.agent_names() == ("agent_1", "agent_2", "agent_3", "agent_4")
    assert method.policy.edges == [
        ("agent_1", "agent_2"), ("agent_1", "agent_3"), ("agent_1", "agent_4"),
        ("agent_2", "agent_3"), ("agent_2", "agent_4"), ("agent_3", "agent_4"),
    ]  # fmt: skip
    assert method.policy.probabilities([0.0] * len(FEATURES)) == pytest.approx([0.5] * 6)
    assert GraphGRPO(initial_probability=0.8).policy.probability(
        ("agent_1", "agent_2"), [1.0] * len(FEATURES)
    ) == pytest.approx(0.8)
    assert get_method("graph_grpo") is GraphGRPO and GraphGRPO.learns()
    for bad in ({"group_size": 1}, {"rounds": 0}, {"agent_roles": ()}, {"threshold": 1.0}):
        with pytest.raises(ConfigError):
            GraphGRPO(**bad)


@pytest.mark.parametrize(("roles", "rounds"), [(4, 3), (2, 1), (1, 2), (3, 2)])
async def test_calls_are_n_times_r_plus_the_decision(roles, rounds):
    model = ScriptedModel(tagged)
    method = GraphGRPO(agent_roles=DEFAULT_ROLES[:roles], rounds=rounds)
    ctx = Context(model)
    solution = await method.solve(TASK, ctx)
    assert len(model.calls) == roles * rounds + 1
    assert [agent_of(r) for r in model.requests].count("aggregator") == 1
    assert agent_of(model.requests[-1]) == "aggregator"
    assert solution.answer == "DECIDED: The answer is 42."
    assert solution.metadata["edges"] == [] and solution.metadata["trained"] is False


async def test_untrained_agents_answer_alone_and_the_decision_reads_every_last_answer():
    model = ScriptedModel(tagged)
    await GraphGRPO(rounds=2).solve(TASK, Context(model))
    prompts = prompts_of(model)
    assert all("--- From" not in prompts[(f"agent_{i}", 0)] for i in range(1, 5))
    # round 1: the agent's own round-0 answer, nobody else's
    assert TAG.findall(prompts[("agent_3", 1)]) == [("agent_3", "0")]
    decision = last_user_message(model.requests[-1])
    assert TAG.findall(decision) == [(f"agent_{i}", "1") for i in range(1, 5)]


async def test_agents_see_their_predecessors_this_round_and_run_in_topological_order():
    method = with_edges(
        GraphGRPO(rounds=2), ("agent_1", "agent_3"), ("agent_2", "agent_3"), ("agent_3", "agent_4")
    )
    model = ScriptedModel(tagged)
    ctx = Context(model)
    solution = await method.solve(TASK, ctx)
    assert ctx.topology.edges == [
        ("agent_1", "agent_3"), ("agent_2", "agent_3"), ("agent_3", "agent_4"),
    ]  # fmt: skip
    assert solution.metadata["edges"] == [list(e) for e in ctx.topology.edges]
    prompts = prompts_of(model)
    assert TAG.findall(prompts[("agent_3", 0)]) == [("agent_1", "0"), ("agent_2", "0")]
    assert TAG.findall(prompts[("agent_4", 0)]) == [("agent_3", "0")]
    assert TAG.findall(prompts[("agent_1", 0)]) == []
    # round 1: own previous answer first, then this round's predecessors
    assert TAG.findall(prompts[("agent_3", 1)]) == [
        ("agent_3", "0"), ("agent_1", "1"), ("agent_2", "1"),
    ]  # fmt: skip
    assert TAG.findall(prompts[("agent_1", 1)]) == [("agent_1", "0")]
    # layers: {1, 2} then 3 then 4, each round
    order = [TAG.match(c.response)[0] for c in model.calls[:-1]]
    assert order[2:4] == ["agent_3@0", "agent_4@0"] and order[6:] == ["agent_3@1", "agent_4@1"]
    assert sorted(order[:2]) == ["agent_1@0", "agent_2@0"]
    systems = {agent_of(r): r.messages[0]["content"] for r in model.requests[:-1]}
    assert systems["agent_4"] == system_prompt("Inspector")


async def test_the_features_decide_the_graph_of_each_query():
    method = GraphGRPO(rounds=1)
    edge = method.policy.index[("agent_1", "agent_2")]
    method.policy.weights[edge, FEATURES.index("choice")] = 2.0  # only multiple-choice queries
    choice = Task(id="m", question="6 * 7?", choices=("42", "41"), answer_type="choice")
    assert (await method.solve(choice, Context(ScriptedModel(tagged)))).metadata["edges"] == [
        ["agent_1", "agent_2"]
    ]
    assert (await method.solve(TASK, Context(ScriptedModel(tagged)))).metadata["edges"] == []


def test_the_update_is_a_policy_gradient_on_signed_edge_advantages():
    method = GraphGRPO(agent_roles=("Math Solver", "Inspector"), learning_rate=2.0)
    edge = ("agent_1", "agent_2")
    x = (1.0, 0.0, 0.5, 0.0, 0.0)
    kept, dropped = EdgeStep(edge, 0.5, True, x), EdgeStep(edge, 0.5, False, x)
    method.update([[kept], [dropped]], [1.0])
    # kept: +1 · (1 − 0.5), dropped: −1 · (0 − 0.5); mean over K = 2, times lr 2: +1
    assert method.policy.logits.tolist() == [1.0]
    assert method.policy.weights[0].tolist() == [1.0, 0.0, 0.5, 0.0, 0.0]
    method.update([[kept], [dropped]], [-0.5])  # a harmful edge goes down by half as much
    assert method.policy.logits.tolist() == [0.5]


# -- optimisation ----------------------------------------------------------------------------


def arith_dev(n: int) -> list[Task]:
    return get_benchmark("arith")().load("dev")[:n]


def honest(tasks: Sequence[Task]) -> Callable[[ChatRequest], str]:
    """Honest agents answer the gold, unless they are shown the adversary's answer: they take
    it. The aggregator states the majority of the answers it reads, a tie going to WRONG."""

    def respond(request: ChatRequest) -> str:
        prompt = last_user_message(request)
        gold = next(t.gold for t in tasks if t.question in prompt)
        if agent_of(request) == "aggregator":
            wrong = prompt.count(f"answer is {WRONG}")
            right = prompt.count(f"answer is {gold}.")
            return f"The answer is {WRONG if wrong >= right else gold}."
        return f"The answer is {WRONG if WRONG in prompt else gold}."

    return respond


@pytest.fixture
def adversary(tmp_path) -> dict[str, str]:
    path = tmp_path / "adversary.yaml"
    path.write_text(f'".": "Trust me: the answer is {WRONG}."\n')
    return {"agent_2": f"scripted:{path}"}


async def test_optimisation_lowers_the_adversarial_agents_edges(adversary):
    tasks = arith_dev(4)
    model = ScriptedModel(honest(tasks))
    method = GraphGRPO(rounds=1, group_size=8, train_epochs=2)
    ctx = Context(model, model_roles=adversary)
    await method.optimize(tasks, ctx)
    assert len(ctx.ledger.records) == 2 * 4 * 8 * (4 + 1)  # epochs · tasks · K · (N·R + 1)
    assert method.groups is not None and method.groups["informative"] >= 4
    assert sum(method.groups.values()) == 2 * 4
    for task in tasks:
        x = query_features(task)
        for target in ("agent_3", "agent_4"):
            assert method.policy.probability(("agent_2", target), x) < 0.4
    # agent_1 -> agent_2 feeds the adversary, which ignores it: no systematic blame
    harmless = method.policy.probability(("agent_1", "agent_2"), query_features(tasks[0]))
    assert harmless > max(
        method.policy.probability(("agent_2", t), query_features(tasks[0]))
        for t in ("agent_3", "agent_4")
    )
    # the learned graph keeps the adversary's answer away from the others
    test = get_benchmark("arith")().load("test")[0]
    solver = ScriptedModel(honest([test]))
    outcome = await method.arun(test, solver, model_roles=adversary)
    assert not [e for e in outcome.solution.metadata["edges"] if e[0] == "agent_2"]
    assert outcome.answer == f"The answer is {test.gold}."


async def test_groups_where_every_graph_succeeds_are_filtered():
    tasks = arith_dev(3)
    method = GraphGRPO(rounds=1, group_size=4)
    assert method.learned_state() is None
    await method.optimize(tasks, Context(ScriptedModel(honest(tasks))))  # nobody is wrong
    assert method.groups == {"informative": 0, "filtered": 3}
    assert method.policy.logits.tolist() == [0.0] * 6
    assert not method.policy.weights.any()
    assert method.learned_state() is not None  # optimised, nothing to learn


async def test_optimize_with_no_tasks_learns_nothing():
    method = GraphGRPO()
    model = ScriptedModel(tagged)
    await method.optimize([], Context(model))
    assert model.calls == [] and method.learned_state() is None


async def test_the_learned_state_round_trips(adversary):
    tasks = arith_dev(2)
    method = GraphGRPO(rounds=1, group_size=6)
    await method.optimize(tasks, Context(ScriptedModel(honest(tasks)), model_roles=adversary))
    state = json.loads(json.dumps(method.dump_learned_state()))
    assert state["format"] == "graph-grpo/1" and state["groups"] == method.groups
    again = GraphGRPO(rounds=1, group_size=6)
    again.restore_learned_state(state, "state.json")
    x = query_features(tasks[0])
    assert again.policy.probabilities(x).tolist() == method.policy.probabilities(x).tolist()
    assert np.array_equal(again.policy.weights, method.policy.weights)
    assert again.dump_learned_state() == state
    with pytest.raises(ConfigError, match="format: Input should be 'graph-grpo/1'"):
        again.restore_learned_state({**state, "format": "graph-grpo/0"}, "state.json")
    with pytest.raises(ConfigError, match=r"policy\.nodes: Field required"):
        again.restore_learned_state({**state, "policy": {"edges": []}}, "state.json")
    with pytest.raises(ConfigError, match="policy: 6 edges need as many logits, got 0"):
        short = {**state["policy"], "logits": []}  # the right types, not for its edges
        again.restore_learned_state({**state, "policy": short}, "state.json")
    with pytest.raises(ConfigError, match="does not fit this config: trained for other agents"):
        GraphGRPO(agent_roles=("Critic", "Inspector")).restore_learned_state(state, "state.json")


# -- robustness, model roles, command line ---------------------------------------------------


async def test_a_budget_stop_returns_the_best_answer_so_far():
    answers = {"agent_1": 42, "agent_2": 7, "agent_3": 42, "agent_4": 9}
    model = ScriptedModel(lambda request: f"The answer is {answers[agent_of(request)]}.")
    ctx = Context(model, budget=Budget(max_calls=6))  # round 0 done, round 1 cut short
    solution = await GraphGRPO(rounds=2).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert solution.answer == "The answer is 42."  # the majority of the round-0 answers


@pytest.mark.parametrize("garbage", ["", "}{", "null", "The answer is", "\x00 ünïcödé " * 30])
async def test_garbage_replies_never_crash(garbage):
    model = ScriptedModel(lambda request: garbage)
    method = with_edges(GraphGRPO(rounds=2), ("agent_1", "agent_2"), ("agent_2", "agent_4"))
    solution = await method.solve(TASK, Context(model))
    assert solution.answer == garbage and len(model.calls) == 4 * 2 + 1
    await method.optimize([TASK.model_copy(update={"gold": "42"})], Context(model))
    assert method.groups == {"informative": 0, "filtered": 1}


def test_model_roles_route_agents_and_the_aggregator(tmp_path):
    b, d = tmp_path / "b.yaml", tmp_path / "d.yaml"
    b.write_text('".": "B says the answer is 41."\n')
    d.write_text('".": "The decision: 42."\n')
    on_b, on_d = f"scripted:{b}", f"scripted:{d}"
    model = ScriptedModel(tagged)
    outcome = GraphGRPO(rounds=2).run(
        TASK, model, model_roles={"agent_2": on_b, "aggregator": on_d}
    )
    records = outcome.context.ledger.records
    assert len(records) == 9 and outcome.answer == "The decision: 42."
    for record in records:
        assert record.model == {"agent_2": on_b, "aggregator": on_d}.get(record.agent, model.name)
    assert len(model.calls) == 9 - 2 - 1
    GraphGRPO().check_model_roles({"agent": "scripted:echo", "agent_4": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'agent_5'"):
        GraphGRPO().check_model_roles({"agent_5": "scripted:echo"})


def test_the_command_line_optimises_then_reuses_the_learned_state(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["run", "--method", "graph_grpo", "--benchmark", "arith", "--model", "scripted:echo",
            "--optimize-on", "dev", "--optimize-limit", "4", "--config", "rounds=1",
            "--config", "group_size=2", "--out", str(out), "--no-cache", "--quiet"]  # fmt: skip
    assert main([*args, "--limit", "2"]) == 0
    optimisation = (out / "optimize.jsonl").read_text().splitlines()
    assert len(optimisation) == 1
    assert json.loads(optimisation[0])["usage"]["calls"] == 4 * 2 * (4 + 1)
    saved = json.loads((out / "learned_state.json").read_text())["state"]
    assert saved["format"] == "graph-grpo/1" and sum(saved["groups"].values()) == 4
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 4 + 1 for r in results)
    assert all(r["metadata"]["trained"] for r in results)
    capsys.readouterr()
    assert main([*args, "--limit", "3"]) == 0  # a re-run: the saved state, no new step
    assert "optimisation: 40 calls" in capsys.readouterr().out
    assert (out / "optimize.jsonl").read_text().splitlines() == optimisation
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 3 and all(r["metadata"]["trained"] for r in results)
    assert math.isclose(sum(r["usage"]["calls"] for r in results), 3 * 5)
