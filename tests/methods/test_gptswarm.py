"""GPTSwarm (arXiv 2402.16823) with scripted models: the candidate edges, the call formula on
thresholded and sampled graphs (who saw whose answers), edge optimisation that learns to cut a
scripted adversarial agent, the learned state, budget stops, model roles, garbage replies and
the command line with its optimisation step."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from helpers import GOLD_TASK as TASK
from helpers import agent_of

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.kit.learning import Edge
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.gptswarm import DECISION, GPTSwarm

SHOWN = re.compile(r"--- (agent_\d+) ---")
DEV = get_benchmark("arith")().load("dev")[:4]


def seen(request: ChatRequest) -> list[str]:
    """The agents whose answers the request shows, in the order shown."""
    return SHOWN.findall(last_user_message(request))


def tagged(answer: Callable[[str], object] = lambda agent: 42) -> Callable[[ChatRequest], str]:
    """Agent a writes 'a: The answer is <answer(a)>.'; the aggregator says 'FINAL 42'."""

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        if agent == "aggregator":
            return "FINAL: The answer is 42."
        return f"{agent}: The answer is {answer(agent)}."

    return respond


def with_edges(edges: Sequence[Edge], **config: object) -> GPTSwarm:
    """A swarm whose learned logits keep exactly ``edges`` (p = 0.9, the others 0.1)."""
    method = GPTSwarm(**config)
    logits = [2.2 if edge in edges else -2.2 for edge in method.policy.edges]
    policy = method.policy.state().model_copy(update={"logits": logits})
    method.load_learned_state(
        GPTSwarm.LearnedState(format="gptswarm/1", policy=policy, accuracy=[])
    )
    return method


async def solve(method: GPTSwarm, model: ScriptedModel, **context: object):
    ctx = Context(model, **context)
    return await method.solve(TASK, ctx), ctx


def test_defaults_candidates_and_validation():
    method = GPTSwarm()
    assert get_method("gptswarm") is GPTSwarm
    cfg = method.config
    assert (cfg.agents, cfg.iterations, cfg.batch_size, cfg.learning_rate) == (6, 100, 4, 0.1)
    assert cfg.initial_probability == 0.5 and cfg.threshold == 0.5 and cfg.decision == "majority"
    assert method.agent_names() == tuple(f"agent_{i}" for i in range(1, 7))
    edges = method.policy.edges
    assert len(edges) == 15 + 6  # i < j among 6 agents, and every agent into the decision
    assert all(int(u[6:]) < int(v[6:]) for u, v in edges if v != DECISION)
    assert [u for u, v in edges if v == DECISION] == list(method.agent_names())
    assert method.policy.probabilities() == pytest.approx(np.full(21, 0.5))
    assert method.policy.threshold(0.5) == []  # strict, on probabilities: p = 0.5 keeps none
    assert GPTSwarm(initial_probability=0.8).policy.probabilities() == pytest.approx([0.8] * 21)
    assert method.learned_state() is None and not method.optimized
    for bad in ({"agents": 0}, {"initial_probability": 1}, {"threshold": 1}, {"graph": "all"},
                {"learning_rate": 0}, {"iterations": 0}, {"decision": "vote"}):  # fmt: skip
        with pytest.raises(ConfigError):
            GPTSwarm(**bad)


@pytest.mark.parametrize(
    ("edges", "runs", "layers"),
    [
        # a chain 1 -> 2 -> 3 into the decision; agents 4..6 reach nothing and do not run
        # (agent 5 is fed by agent 2, but its answer would reach nobody)
        ([("agent_1", "agent_2"), ("agent_2", "agent_3"), ("agent_3", DECISION),
          ("agent_2", "agent_5")],
         ["agent_1", "agent_2", "agent_3"], 3),
        # two agents straight into the decision, agent 5 feeds agent 6 which reaches nothing
        ([("agent_2", DECISION), ("agent_4", DECISION), ("agent_5", "agent_6")],
         ["agent_2", "agent_4"], 1),
        # a diamond 1 -> {2, 3} -> 4, with 3 also into the decision
        ([("agent_1", "agent_2"), ("agent_1", "agent_3"), ("agent_2", "agent_4"),
          ("agent_3", "agent_4"), ("agent_4", DECISION), ("agent_3", DECISION)],
         ["agent_1", "agent_2", "agent_3", "agent_4"], 3),
    ],
)  # fmt: skip
@pytest.mark.parametrize("decision", ["majority", "llm"])
async def test_a_thresholded_graph_runs_its_agents_in_order_and_calls_match(
    edges, runs, layers, decision
):
    method = with_edges(edges, decision=decision)
    model = ScriptedModel(tagged(lambda agent: 40 + int(agent[6:])), latency=0.002)
    solution, ctx = await solve(method, model)
    extra = 1 if decision == "llm" else 0
    assert len(model.calls) == ctx.usage.calls == len(runs) + extra  # K + d
    calls = {agent_of(c.request): c for c in model.calls}
    assert sorted(a for a in calls if a != "aggregator") == runs
    for agent in runs:  # each agent saw exactly its predecessors, in agent order, answered
        predecessors = sorted(u for u, v in edges if v == agent)
        assert seen(calls[agent].request) == predecessors
        assert all(calls[p].finished <= calls[agent].started for p in predecessors)
    assert {r.round for r in ctx.ledger.records if r.agent != "aggregator"} == set(range(layers))
    inputs = sorted(u for u, v in edges if v == DECISION)
    if decision == "llm":
        assert solution.answer == "FINAL: The answer is 42."
        assert seen(calls["aggregator"].request) == []  # it reads the inputs' answers only
        shown = last_user_message(calls["aggregator"].request)
        assert all(f"{a}: The answer is" in shown for a in inputs)
        assert not any(f"{a}: The answer is" in shown for a in runs if a not in inputs)
    else:  # every input answers differently: the vote goes to the earliest input
        assert solution.answer == f"{inputs[0]}: The answer is {40 + int(inputs[0][6:])}."
    meta = solution.metadata
    assert meta["graph"] == "threshold" and meta["optimized"] is True
    assert meta["agents_run"] == runs and not meta["decision_edge_added"]
    assert sorted(map(tuple, meta["edges"])) == sorted(
        (u, v) for u, v in edges if u in runs and v in [*runs, DECISION]
    )
    assert ctx.topology is not None and sorted(ctx.topology.nodes) == sorted([*runs, DECISION])


async def test_the_threshold_compares_probabilities_not_logits():
    method = with_edges([])
    method.policy.logits[method.policy.index[("agent_2", DECISION)]] = 0.3  # p = 0.57: kept
    method.policy.logits[method.policy.index[("agent_3", DECISION)]] = -0.1  # p = 0.48: not
    model = ScriptedModel(tagged())
    solution, _ = await solve(method, model)
    assert [agent_of(q) for q in model.requests] == ["agent_2"]
    assert solution.metadata["edges"] == [["agent_2", DECISION]]
    assert not solution.metadata["decision_edge_added"]


async def test_agents_of_a_layer_run_concurrently():
    edges = [(f"agent_{i}", DECISION) for i in range(1, 7)]
    model = ScriptedModel(tagged(), latency=0.01)
    solution, _ = await solve(with_edges(edges), model)
    assert len(model.calls) == 6
    assert max(c.started for c in model.calls) < min(c.finished for c in model.calls)
    assert solution.answer == "agent_1: The answer is 42."


async def test_prompts_do_not_depend_on_completion_order():
    edges = [("agent_1", "agent_3"), ("agent_2", "agent_3"), ("agent_3", DECISION),
             ("agent_1", DECISION)]  # fmt: skip
    outcomes = []
    for latency in (lambda q: 0.002 * int(agent_of(q)[6:]), lambda q: 0.01 / int(agent_of(q)[6:])):
        model = ScriptedModel(tagged(lambda agent: int(agent[6:])), latency=latency)
        solution, ctx = await solve(with_edges(edges), model)
        outcomes.append(
            (sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records),
             solution.answer)
        )  # fmt: skip
    assert outcomes[0] == outcomes[1]


async def test_an_unoptimised_swarm_samples_its_graph_from_the_sample_stream():
    graphs = set()
    for seed in range(8):
        model = ScriptedModel(tagged())
        solution, _ = await solve(GPTSwarm(), model, seed=seed)
        meta = solution.metadata
        assert meta["graph"] == "sample" and meta["optimized"] is False
        assert len(model.calls) == len(meta["agents_run"]) >= 1  # K calls, majority decision
        assert any(v == DECISION for _, v in meta["edges"])
        graphs.add(json.dumps(meta["edges"]))
        again, _ = await solve(GPTSwarm(), ScriptedModel(tagged()), seed=seed)
        assert again.metadata["edges"] == meta["edges"]  # the same stream, the same graph
    assert len(graphs) > 4


async def test_a_threshold_with_no_edge_into_the_decision_adds_the_likeliest():
    model = ScriptedModel(tagged())
    solution, _ = await solve(GPTSwarm(graph="threshold"), model)  # p = 0.5 keeps nothing
    assert len(model.calls) == 1 and agent_of(model.requests[0]) == "agent_1"  # tie: first
    assert solution.metadata["decision_edge_added"] and solution.metadata["edges"] == [
        ["agent_1", DECISION]
    ]
    method = with_edges([("agent_1", "agent_2"), ("agent_5", "agent_6")])
    method.policy.logits[method.policy.index[("agent_4", DECISION)]] = -1.0  # the likeliest
    model = ScriptedModel(tagged())
    solution, _ = await solve(method, model)
    assert [agent_of(q) for q in model.requests] == ["agent_4"]
    assert solution.metadata["edges"] == [["agent_4", DECISION]]


def misled(gold_of: Callable[[str], str], adversary: str = "agent_1") -> Callable:
    """Truthful agents answer the gold, unless shown the adversary's answer: then they copy it
    (-1). The adversary itself runs on a model of its own (model roles)."""

    def respond(request: ChatRequest) -> str:
        if adversary in seen(request):
            return "I trust my teammate: \\boxed{-1}"
        return f"Step by step: \\boxed{{{gold_of(last_user_message(request))}}}"

    return respond


def gold_in(prompt: str) -> str:
    return next(t.gold for t in DEV if t.question in prompt)


@pytest.mark.system
async def test_optimisation_cuts_a_scripted_adversarial_agent(tmp_path):
    adversary = tmp_path / "adversary.yaml"
    adversary.write_text("\".\": 'I am certain: \\boxed{-1}'\n")
    model = ScriptedModel(misled(gold_in))
    method = GPTSwarm()  # the paper's settings: 100 iterations of 4 tasks, lr 0.1
    roles = method.check_model_roles({"agent_1": f"scripted:{adversary}"})
    ctx = Context(model, model_roles=roles, sample_id="optimize", seed=3)
    before = {e: method.policy.probability(e) for e in method.policy.edges}
    await method.optimize(DEV, ctx)
    after = {e: method.policy.probability(e) for e in method.policy.edges}
    out_of_adversary = [e for e in method.policy.edges if e[0] == "agent_1"]
    # every edge out of the adversary lost probability (below the threshold)
    assert all(after[e] < 0.4 < before[e] for e in out_of_adversary)
    assert after[("agent_1", DECISION)] < 0.2
    truthful_inputs = [(f"agent_{i}", DECISION) for i in range(2, 7)]
    assert np.mean([after[e] for e in truthful_inputs]) > 0.5
    assert method.optimized and len(method.accuracy) == 100
    assert np.mean(method.accuracy[-10:]) > np.mean(method.accuracy[:10]) + 0.3
    # calls: every sampled graph's agents reaching the decision (none are llm decisions)
    records = ctx.ledger.records
    assert {r.agent for r in records} <= set(method.agent_names())
    assert any(r.agent == "agent_1" for r in records)
    # the thresholded graph leaves the adversary out: a solve never asks it
    solver = ScriptedModel(tagged())
    solution, _ = await solve(method, solver, model_roles=roles)
    assert "agent_1" not in solution.metadata["agents_run"]
    assert solution.metadata["graph"] == "threshold"
    assert len(solver.calls) == len(solution.metadata["agents_run"])


async def test_optimisation_is_seeded_by_the_run_seed_and_garbage_teaches_nothing():
    states = []
    for seed in (5, 5, 6):
        method, model = GPTSwarm(iterations=3), ScriptedModel(misled(gold_in))
        await method.optimize(DEV, Context(model, sample_id="optimize", seed=seed))
        states.append(method.policy.logits.tolist())
    assert states[0] == states[1] != states[2]

    garbage = iter(["", "{{{", "no number at all", "\\boxed{", "null"] * 200)
    method, model = GPTSwarm(iterations=3), ScriptedModel(lambda request: next(garbage))
    await method.optimize(DEV[:2], Context(model, sample_id="optimize"))
    assert len(model.calls) > 0 and method.accuracy == [0.0] * 3
    assert method.policy.probabilities() == pytest.approx([0.5] * 21)  # no reward, no change


async def test_garbage_replies_never_crash_a_solve():
    garbage = {"agent_1": "", "agent_2": "{{{", "agent_3": "no number", "aggregator": "]]"}
    edges = [("agent_1", "agent_2"), ("agent_2", DECISION), ("agent_3", DECISION)]
    for decision, expected in (("majority", "{{{"), ("llm", "]]")):
        model = ScriptedModel(lambda request: garbage[agent_of(request)])
        solution, _ = await solve(with_edges(edges, decision=decision), model)
        assert len(model.calls) == 3 + (decision == "llm")
        assert solution.answer == expected  # no answer to vote on: the first input's reply


def test_learned_state_round_trips_and_is_checked():
    method = with_edges([("agent_1", DECISION)], agents=3)
    method.accuracy = [0.25, 0.5]
    state = json.loads(json.dumps(method.dump_learned_state()))
    assert state["format"] == "gptswarm/1"
    copy = GPTSwarm(agents=3)
    copy.restore_learned_state(state, "state.json")
    assert copy.optimized and copy.accuracy == [0.25, 0.5]
    assert copy.policy.logits.tolist() == method.policy.logits.tolist()
    assert copy.dump_learned_state() == state
    assert copy.policy.threshold() == [("agent_1", DECISION)]
    bad_states = [
        ({**state, "format": "gptswarm/0"}, "format: Input should be 'gptswarm/1'"),
        ({**state, "policy": "logits"}, "policy: Input should be a valid dictionary"),
        ({**state, "accuracy": ["high"]}, r"accuracy\[0\]: Input should be a valid number"),
    ]
    for bad, message in bad_states:
        with pytest.raises(ConfigError, match=message):
            GPTSwarm(agents=3).restore_learned_state(bad, "state.json")
    with pytest.raises(ConfigError, match="not those of 4 agents"):
        GPTSwarm(agents=4).restore_learned_state(state, "state.json")


async def test_a_budget_stop_returns_the_best_answer_so_far():
    edges = [("agent_1", "agent_2"), ("agent_2", "agent_3"), ("agent_1", DECISION),
             ("agent_2", DECISION), ("agent_3", DECISION)]  # fmt: skip
    answers = {"agent_1": 42, "agent_2": 42, "agent_3": 7}
    model = ScriptedModel(tagged(answers.__getitem__))
    ctx = Context(model, budget=Budget(max_calls=2))  # agent_3's layer is cut off
    solution = await with_edges(edges).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert len(model.calls) == 2
    assert solution.answer == "agent_1: The answer is 42."  # the vote over agents 1 and 2


def test_model_roles_route_agents_and_the_aggregator(tmp_path):
    b, a = tmp_path / "b.yaml", tmp_path / "a.yaml"
    b.write_text('".": "B says the answer is 7."\n')
    a.write_text('".": "The aggregator says 42."\n')
    on_b, on_a = f"scripted:{b}", f"scripted:{a}"
    edges = [("agent_1", "agent_2"), ("agent_2", DECISION), ("agent_3", DECISION)]
    model = ScriptedModel(tagged())
    method = with_edges(edges, decision="llm")
    outcome = method.run(TASK, model, model_roles={"agent_2": on_b, "aggregator": on_a})
    records = outcome.context.ledger.records
    assert {r.agent: r.model for r in records} == {
        "agent_1": model.name, "agent_2": on_b, "agent_3": model.name, "aggregator": on_a,
    }  # fmt: skip
    assert outcome.answer == "The aggregator says 42." and len(model.calls) == 2
    method.check_model_roles({"agent": "scripted:echo", "agent_6": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'agent_7'"):
        method.check_model_roles({"agent_7": "scripted:echo"})


def test_the_command_line_optimises_then_reloads_the_learned_state(tmp_path):
    adversary = tmp_path / "adversary.yaml"
    adversary.write_text("\".\": 'Surely \\boxed{-1}'\n")
    out = tmp_path / "run"
    argv = ["run", "--method", "gptswarm", "--benchmark", "arith", "--model", "scripted:echo",
            "--model-role", f"agent_1=scripted:{adversary}", "--limit", "2", "--optimize-on",
            "dev", "--optimize-limit", "4", "--config", "iterations=2", "--out", str(out),
            "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    attempts = [json.loads(x) for x in (out / "optimize.jsonl").read_text().splitlines()]
    assert len(attempts) == 1 and attempts[0]["status"] == "ok"
    traces = (out / "optimize_traces.jsonl").read_text()
    assert f"scripted:{adversary}" in traces  # the adversary on its own model, by its name
    assert 0 < attempts[0]["usage"]["calls"] <= 2 * 4 * 6  # iterations · batch · N at most
    state = json.loads((out / "learned_state.json").read_text())["state"]
    assert state["format"] == "gptswarm/1" and len(state["accuracy"]) == 2
    learned = GPTSwarm()
    learned.restore_learned_state(state, "learned_state.json")
    edges, _ = learned.with_decision_input(learned.policy.threshold())
    kept = [list(e) for e in learned.kept_graph(edges).edges]
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2
    for record in results:
        assert record["metadata"]["graph"] == "threshold" and record["metadata"]["optimized"]
        assert record["metadata"]["edges"] == kept
        assert record["usage"]["calls"] == len(record["metadata"]["agents_run"])
    # a re-run with one more task reloads the state: no second optimisation
    rerun = [*argv]
    rerun[rerun.index("--limit") + 1] = "3"
    assert main(rerun) == 0
    assert len((out / "optimize.jsonl").read_text().splitlines()) == 1
    assert (out / "optimize_traces.jsonl").read_text() == traces
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 3 and all(r["metadata"]["edges"] == kept for r in results)
