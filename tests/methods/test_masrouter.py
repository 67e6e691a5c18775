"""MasRouter (arXiv 2502.11133) with scripted models: the query features, the cascade's draws
(sampled from the sample's stream, or the likeliest), the call formula of every mode, who sees
whom, the decider and its fallback, budget stops, the LLM pool from model roles, training that
learns the right model, mode and team size (reward: score minus λ·tokens), the learned state and
``maslab run`` end to end, with ``--optimize-on`` on gsm8k."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import numpy as np
import pytest
from helpers import GOLD_TASK as TASK
from helpers import TwoModels, agent_of

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.kit.features import query_features
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods import masrouter as module
from maslab.methods.masrouter import (
    MODE_INSTRUCTIONS,
    MODES,
    ROLES,
    MasRouter,
    system_prompt,
)

TAG = re.compile(r"(agent_\d+)@(\d+):")
LABEL = re.compile(r"--- (agent_\d+) \(")
DEV = get_benchmark("arith")().load("dev")[:8]


def round_of(request: ChatRequest) -> int:
    """The agent's round: its earlier user turns (agents keep their history across rounds)."""
    return sum(m["role"] == "user" for m in request.messages) - 1


def tagged(answer: Callable[[str], object] = lambda agent: 42) -> Callable[[ChatRequest], str]:
    """Agent a in round r writes 'a@r: The answer is <answer(a)>.'; the decider 'FINAL: 42'."""

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request).rsplit("/", 1)[-1]
        if agent == "decider":
            return "FINAL: The answer is 42."
        return f"{agent}@{round_of(request)}: The answer is {answer(agent)}."

    return respond


def index_of(agent: str) -> int:
    """Agent i's i (the decider: 9)."""
    suffix = agent.rsplit("_", 1)[-1]
    return int(suffix) if suffix.isdigit() else 9


def fixed(mode: str, n: int, **config: object) -> MasRouter:
    """A router whose only choices are ``mode`` and ``n`` agents, routed greedily (untrained:
    the first role and the run's model for every agent)."""
    return MasRouter(modes=(mode,), min_agents=n, max_agents=n, routing="greedy", **config)


async def solve(method: MasRouter, model: ScriptedModel, task: Task = TASK, **context: object):
    ctx = Context(model, **context)
    return await method.solve(task, ctx), ctx


def calls_by(model: ScriptedModel) -> dict[str, list[ChatRequest]]:
    """Each agent's requests, in order."""
    by: dict[str, list[ChatRequest]] = {}
    for call in model.calls:
        by.setdefault(agent_of(call.request), []).append(call.request)
    return by


def test_defaults_and_validation():
    method = MasRouter()
    assert get_method("masrouter") is MasRouter
    cfg = method.config
    assert cfg.modes == MODES and len(MODES) == 7 and cfg.agent_roles == ROLES
    assert (cfg.min_agents, cfg.max_agents, cfg.debate_rounds) == (1, 6, 2)
    assert (cfg.epochs, cfg.batch_size, cfg.learning_rate, cfg.cost_weight) == (5, 4, 0.1, 0.005)
    assert (cfg.decision, cfg.routing, cfg.hash_features) == ("llm", "sample", 8)
    assert MasRouter.roles == ("llm",) and method.agent_names() == ()
    assert method.structure() is None  # the MAS depends on the query and the draws
    assert method.widths() == {"mode": 13, "agents": 20, "role": 28, "llm": 28}
    assert method.policies["agents"].options == ["1", "2", "3", "4", "5", "6"]
    assert method.learned_state() is None and not method.trained
    for bad in ({"modes": ()}, {"modes": ("chain", "chain")}, {"modes": ("star",)},
                {"agent_roles": ("Pirate",)}, {"min_agents": 3, "max_agents": 2},
                {"max_agents": 0}, {"routing": "best"}, {"decision": "vote"},
                {"learning_rate": 0}, {"cost_weight": -1}):  # fmt: skip
        with pytest.raises(ConfigError):
            MasRouter(**bad)


@pytest.mark.parametrize(
    ("mode", "n", "decision", "calls"),
    [
        ("io", 1, "llm", 2), ("cot", 3, "llm", 4), ("chain", 4, "llm", 5), ("tree", 5, "llm", 6),
        ("graph", 3, "majority", 3), ("debate", 3, "llm", 7), ("debate", 2, "majority", 4),
        ("reflection", 2, "llm", 5), ("reflection", 6, "llm", 13), ("io", 6, "majority", 6),
    ],
)  # fmt: skip
async def test_the_call_formula_of_every_mode(mode, n, decision, calls):
    model = ScriptedModel(tagged(), latency=0.001)
    solution, ctx = await solve(fixed(mode, n, decision=decision), model)
    rounds = {"debate": 2, "reflection": 2}.get(mode, 1)
    assert len(model.calls) == ctx.usage.calls == calls == rounds * n + (decision == "llm")
    meta = solution.metadata
    assert meta["calls"] == calls and meta["mode"] == mode and len(meta["agents"]) == n
    assert [a["name"] for a in meta["agents"]] == [f"agent_{i}" for i in range(1, n + 1)]
    by = calls_by(model)
    assert all(len(by[f"agent_{i}"]) == rounds for i in range(1, n + 1))
    assert ("decider" in by) == (decision == "llm")
    if decision == "llm":
        assert solution.answer == "FINAL: The answer is 42." and meta["decision"] == "decider"
    else:  # every agent says 42: the vote keeps the first agent's last answer
        assert solution.answer == f"agent_1@{rounds - 1}: The answer is 42."


@pytest.mark.parametrize(
    ("mode", "n", "reads"),
    [
        ("io", 3, {1: [], 2: [], 3: []}),
        ("chain", 4, {1: [], 2: [1], 3: [2], 4: [3]}),
        ("tree", 5, {1: [], 2: [1], 3: [1], 4: [2], 5: [2]}),
        ("graph", 4, {1: [], 2: [1], 3: [1, 2], 4: [1, 2, 3]}),
    ],
)
async def test_who_reads_whom_in_one_round_modes(mode, n, reads):
    model = ScriptedModel(tagged(), latency=lambda q: 0.004 / index_of(agent_of(q)))
    _, ctx = await solve(fixed(mode, n), model)
    by = calls_by(model)
    finished = {agent_of(c.request): c.finished for c in model.calls}
    started = {agent_of(c.request): c.started for c in model.calls}
    for i, sources in reads.items():
        prompt = last_user_message(by[f"agent_{i}"][0])
        assert LABEL.findall(prompt) == [f"agent_{j}" for j in sources]  # in agent order
        assert [a for a, _ in TAG.findall(prompt)] == [f"agent_{j}" for j in sources]
        assert MODE_INSTRUCTIONS[mode] in prompt and TASK.prompt() in prompt
        assert all(finished[f"agent_{j}"] <= started[f"agent_{i}"] for j in sources)
    decider = last_user_message(by["decider"][0])
    assert LABEL.findall(decider) == [f"agent_{i}" for i in range(1, n + 1)]
    assert ctx.topology is not None
    assert sorted(ctx.topology.edges) == sorted(
        [(f"agent_{j}", f"agent_{i}") for i, sources in reads.items() for j in sources]
        + [(f"agent_{i}", "decider") for i in range(1, n + 1)]
    )


async def test_debaters_read_the_others_previous_round_and_keep_their_own():
    model = ScriptedModel(tagged(lambda agent: 40 + int(agent[6:])), latency=0.001)
    solution, ctx = await solve(fixed("debate", 3, debate_rounds=3), model)
    assert len(model.calls) == 3 * 3 + 1
    by = calls_by(model)
    for i in range(1, 4):
        first, *later = by[f"agent_{i}"]
        assert TAG.findall(last_user_message(first)) == []
        assert MODE_INSTRUCTIONS["debate"] in last_user_message(first)
        for r, request in enumerate(later, 1):
            others = [(f"agent_{j}", str(r - 1)) for j in range(1, 4) if j != i]
            assert TAG.findall(last_user_message(request)) == others
            own = [m["content"] for m in request.messages if m["role"] == "assistant"]
            assert own[-1].startswith(f"agent_{i}@{r - 1}:")  # its own answer, in its history
    decider = last_user_message(by["decider"][0])
    assert TAG.findall(decider) == [(f"agent_{i}", "2") for i in range(1, 4)]
    assert solution.metadata["decider"] == "scripted"
    edges = set(ctx.topology.edges)
    assert ("agent_1", "agent_2") in edges and ("agent_2", "agent_1") in edges


async def test_reflectors_re_examine_their_own_answer_only():
    model = ScriptedModel(tagged(), latency=0.001)
    await solve(fixed("reflection", 2), model)
    by = calls_by(model)
    for i in (1, 2):
        first, second = by[f"agent_{i}"]
        assert TAG.findall(last_user_message(first)) == []
        prompt = last_user_message(second)
        assert prompt.startswith("Look over your answer above") and TAG.findall(prompt) == []
        assert second.messages[-2]["content"].startswith(f"agent_{i}@0:")
    assert TAG.findall(last_user_message(by["decider"][0])) == [("agent_1", "1"), ("agent_2", "1")]


async def test_the_untrained_default_samples_a_mas_from_the_sample_stream():
    routes = set()
    for seed in range(10):
        model = ScriptedModel(tagged())
        solution, _ = await solve(MasRouter(), model, seed=seed)
        meta = solution.metadata
        assert meta["routing"] == "sample" and meta["trained"] is False
        rounds = {"debate": 2, "reflection": 2}.get(meta["mode"], 1)
        assert len(model.calls) == meta["calls"] == rounds * len(meta["agents"]) + 1
        assert 1 <= len(meta["agents"]) <= 6
        for agent in meta["agents"]:  # each agent holds its routed role
            request = calls_by(model)[agent["name"]][0]
            assert request.messages[0]["content"] == system_prompt(agent["role"])
        again, _ = await solve(MasRouter(), ScriptedModel(tagged()), seed=seed)
        assert again.metadata == meta  # the same stream, the same MAS
        routes.add(json.dumps([meta["mode"], meta["agents"]]))
    assert len(routes) >= 8
    greedy, _ = await solve(MasRouter(routing="greedy"), ScriptedModel(tagged()))
    assert greedy.metadata["mode"] == "io"  # untrained and greedy: the first of everything
    assert greedy.metadata["agents"] == [
        {"name": "agent_1", "role": "Math Solver", "model": "scripted"}
    ]


async def test_prompts_do_not_depend_on_completion_order():
    outcomes = []

    def slow_first(request: ChatRequest) -> float:  # agent_1 finishes last
        return 0.001 * (10 - index_of(agent_of(request)))

    def slow_last(request: ChatRequest) -> float:  # agent_1 finishes first
        return 0.001 * index_of(agent_of(request))

    for latency in (slow_first, slow_last):
        for seed in (0, 4, 7):
            model = ScriptedModel(tagged(lambda agent: int(agent[6:])), latency=latency)
            solution, ctx = await solve(MasRouter(), model, seed=seed)
            records = sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records)
            outcomes.append((records, solution.answer, solution.metadata["mode"]))
    assert outcomes[:3] == outcomes[3:]


async def test_garbage_replies_take_the_vote_fallback():
    garbage = {"agent_1": "", "agent_2": "{{{", "agent_3": "no number", "decider": "]]"}
    model = ScriptedModel(lambda request: garbage[agent_of(request)])
    solution, _ = await solve(fixed("chain", 3), model)
    assert len(model.calls) == 4
    assert solution.answer == ""  # no answer anywhere: the first agent's reply stands
    assert solution.metadata["decision"] == "vote (the decider's reply held no answer)"
    answers = {"agent_1": "The answer is 7.", "agent_2": "The answer is 42.", "decider": ""}
    answers["agent_3"] = "The answer is 42."
    solution, _ = await solve(fixed("graph", 3), ScriptedModel(lambda q: answers[agent_of(q)]))
    assert solution.answer == "The answer is 42."  # the agents' majority, not the decider
    assert solution.metadata["decision"].startswith("vote")


async def test_a_budget_stop_returns_the_vote_of_the_last_complete_layer():
    model = ScriptedModel(tagged({"agent_1": 42, "agent_2": 42, "agent_3": 7}.__getitem__))
    ctx = Context(model, budget=Budget(max_calls=2))  # agent_3's layer is cut off
    solution = await fixed("chain", 3).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert len(model.calls) == 2
    assert solution.answer == "agent_1@0: The answer is 42."
    model = ScriptedModel(tagged({"agent_1": 7, "agent_2": 42}.__getitem__))
    ctx = Context(model, budget=Budget(max_calls=4))  # both debate rounds, not the decider
    solution = await fixed("debate", 2).run_sample(TASK, ctx)
    assert solution.answer == "agent_1@1: The answer is 7."  # the vote over round 1, tied


async def test_the_llm_pool_is_the_run_model_and_the_models_model_roles_name():
    method = MasRouter(modes=("graph",), min_agents=3, max_agents=3)
    roles = method.check_model_roles(
        {"llm_b": {"model": "scripted:b", "temperature": 0.3}, "llm": "scripted:a"}
    )
    seen = set()
    for seed in range(6):
        ctx = Context("scripted:a", models=TwoModels(tagged), model_roles=roles, seed=seed)
        solution = await method.solve(TASK, ctx)
        assert method.policies["llm"].options == ["scripted:a", "scripted:b"]
        routed = {a["name"]: a["model"] for a in solution.metadata["agents"]}
        expected = max(
            routed.values(),
            key=lambda m: (list(routed.values()).count(m), -list(routed.values()).index(m)),
        )
        assert solution.metadata["decider"] == expected  # the model most agents run on
        for record in ctx.ledger.records:
            assert record.model == routed.get(record.agent, expected)
        seen |= set(routed.values())
    assert seen == {"scripted:a", "scripted:b"}
    router = method.policies["llm"]
    router.logits[0] = [-9.0, 9.0]  # now every agent goes to b
    pool = TwoModels(tagged)
    ctx = Context("scripted:a", models=pool, model_roles=roles)
    solution = await method.solve(TASK, ctx)
    assert {r.model for r in ctx.ledger.records} == {"scripted:b"}
    assert all(q.temperature == 0.3 for q in pool.served["scripted:b"].requests)
    assert pool.served["scripted:a"].calls == []


def test_model_roles_name_candidate_models_only():
    method = MasRouter()
    assert method.check_model_roles({"llm": "scripted:a", "llm_2": "scripted:b"}) == {
        "llm": {"model": "scripted:a"}, "llm_2": {"model": "scripted:b"},
    }  # fmt: skip
    for roles, problem in (
        ({"agent_1": "scripted:a"}, "masrouter has no role 'agent_1'"),
        ({"decider": "scripted:a"}, "masrouter has no role 'decider'"),
        ({"llm_": "scripted:a"}, "no role 'llm_'"),
        ({"llm_b": {"temperature": 0.2}}, "model role 'llm_b' names no model"),
    ):
        with pytest.raises(ConfigError, match=problem):
            method.check_model_roles(roles)


def gold_of(request: ChatRequest) -> str:
    text = "\n".join(m["content"] for m in request.messages)
    return next(t.gold for t in DEV if t.question in text)


def right_on_b() -> Callable[[], Callable[[ChatRequest], str]]:
    """scripted:a is always wrong, scripted:b always right (the decider too)."""
    models = iter(["a", "b"])

    def script() -> Callable[[ChatRequest], str]:
        right = next(models) == "b"
        return lambda q: f"\\boxed{{{gold_of(q) if right else 0}}}"

    return script


async def test_training_learns_to_route_agents_to_the_right_model():
    method = MasRouter()  # the defaults: 5 epochs of 4-task batches, lr 0.1
    roles = method.check_model_roles({"llm_b": "scripted:b"})
    pool = TwoModels(right_on_b())
    ctx = Context("scripted:a", models=pool, model_roles=roles, sample_id="optimize", seed=1)
    await method.optimize(DEV, ctx)
    assert method.trained and len(method.mean_reward) == 5
    assert method.mean_reward[-1] > method.mean_reward[0] + 0.2
    x = query_features(DEV[0], 8)
    for mode in range(len(MODES)):
        for role in range(len(ROLES)):
            features = (*x, *np.eye(len(MODES))[mode], *np.eye(len(ROLES))[role])
            assert method.policies["llm"].probabilities(0, features)[1] > 0.7
    assert {r.agent.split("/")[0] for r in ctx.ledger.records} == {f"v{i}" for i in range(8)}
    solved = 0
    for task in DEV:  # trained: most routed MASs now answer right
        sample = Context("scripted:a", models=TwoModels(right_on_b()), model_roles=roles)
        solution = await method.solve(task, sample)
        assert solution.metadata["trained"]
        solved += f"{{{task.gold}}}" in solution.answer
    assert solved >= 6


async def test_training_learns_the_right_mode_and_the_cheapest_team():
    def respond(request: ChatRequest) -> str:  # right only when asked as a chain link
        right = MODE_INSTRUCTIONS["chain"] in last_user_message(request)
        return f"\\boxed{{{gold_of(request) if right else 0}}}"

    method = MasRouter(decision="majority", epochs=10, learning_rate=0.5, cost_weight=1.0)
    await method.optimize(DEV, Context(ScriptedModel(respond), sample_id="optimize", seed=1))
    x = query_features(DEV[0], 8)
    modes = method.policies["mode"].probabilities(0, x)
    assert MODES[int(np.argmax(modes))] == "chain" and modes[MODES.index("chain")] > 0.8
    sizes = method.policies["agents"].probabilities(0, (*x, *np.eye(7)[MODES.index("chain")]))
    assert int(np.argmax(sizes)) == 0 and sizes[0] > 0.6  # one agent: right, and cheapest


async def test_the_reward_is_the_score_minus_lambda_per_thousand_tokens(monkeypatch):
    seen: list[list[float]] = []
    baseline = module.mean_baseline
    monkeypatch.setattr(module, "mean_baseline", lambda r: seen.append(list(r)) or baseline(r))

    method = MasRouter(epochs=1, batch_size=3, cost_weight=2.0)
    right = ScriptedModel(lambda q: f"\\boxed{{{gold_of(q)}}}")
    ctx = Context(right, sample_id="optimize", seed=2)
    await method.optimize(DEV[:5], ctx)
    assert [len(r) for r in seen] == [3, 2]
    tokens = {
        i: sum(r.prompt_tokens + r.completion_tokens for r in ctx.ledger.records
               if r.agent.startswith(f"v{i}/"))
        for i in range(5)
    }  # fmt: skip
    assert all(tokens.values())
    expected = [1 - 2.0 * tokens[i] / 1000 for i in range(5)]
    assert [*seen[0], *seen[1]] == pytest.approx(expected)
    assert method.mean_reward == pytest.approx([np.mean(expected)])


async def test_training_is_seeded_by_the_run_seed():
    def respond(request: ChatRequest) -> str:
        return f"\\boxed{{{gold_of(request) if len(request.messages) % 2 else 0}}}"

    states = []
    for seed in (5, 5, 6):
        method = MasRouter(epochs=1)
        await method.optimize(DEV[:4], Context(ScriptedModel(respond), seed=seed))
        states.append(method.dump_learned_state())
    assert states[0] == states[1] != states[2]


async def trained(**config: object) -> MasRouter:
    method = MasRouter(epochs=1, **config)
    await method.optimize(DEV[:4], Context(ScriptedModel(tagged()), seed=3))
    return method


async def test_the_learned_state_round_trips_and_is_checked():
    method = await trained()
    state = json.loads(json.dumps(method.dump_learned_state()))
    assert state["format"] == "masrouter/1" and len(state["mean_reward"]) == 1
    assert state["llm"]["options"] == ["scripted"]
    copy = MasRouter()
    copy.restore_learned_state(state, "state.json")
    assert copy.trained and copy.dump_learned_state() == state
    for stage in ("mode", "agents", "role", "llm"):
        assert copy.policies[stage].logits.tolist() == method.policies[stage].logits.tolist()
    solution, _ = await solve(copy, ScriptedModel(tagged()))
    assert solution.metadata["trained"] is True
    for other, problem in (
        ({"modes": ("chain", "debate")}, "its mode stage chooses among"),
        ({"max_agents": 4}, "its agents stage chooses among"),
        ({"agent_roles": ("Critic",)}, "its role stage chooses among"),
        (
            {"hash_features": 2},
            r"its mode stage chooses among \[.*\] on 13 features; this "
            r"config's: \[.*\] on 7",
        ),
    ):
        with pytest.raises(ConfigError, match=f"does not fit this config: {problem}"):
            MasRouter(**other).restore_learned_state(state, "state.json")
    for bad, problem in (
        ({**state, "format": "masrouter/0"}, "format: Input should be 'masrouter/1'"),
        ({**state, "mean_reward": ["high"]}, r"mean_reward\[0\]: Input should be a valid number"),
        ({**state, "llm": {**state["llm"], "logits": [[1.0, 2.0]]}}, "llm: logits must hold"),
    ):
        with pytest.raises(ConfigError, match=problem):
            MasRouter().restore_learned_state(bad, "state.json")
    pool = TwoModels(tagged)  # trained on the run's model alone, asked with two
    roles = copy.check_model_roles({"llm_b": "scripted:b"})
    with pytest.raises(ConfigError, match=r"trained on the models \['scripted'\]"):
        await copy.solve(TASK, Context("scripted:a", models=pool, model_roles=roles))


def test_the_command_line_runs_masrouter_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run", "--method", "masrouter", "--benchmark", "arith", "--limit", "2",
            "--model", "scripted:echo", "--out", str(out), "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2
    for record in results:
        assert record["status"] == "ok"
        assert record["usage"]["calls"] == record["metadata"]["calls"] >= 2
    capsys.readouterr()
    assert main([*argv[:-4], "--model-role", "agent_1=scripted:echo", "--out",
                 str(tmp_path / "bad"), "--no-cache", "--quiet"]) == 2  # fmt: skip
    assert "masrouter has no role 'agent_1'" in capsys.readouterr().err


def test_the_command_line_optimises_on_gsm8k_then_reuses_the_state(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    rows = [
        ("Tom has 3 boxes of 6 pencils. How many pencils?", 18),
        ("Maria reads 15 pages a day. How many pages in 6 days?", 90),
        ("A bus holds 40 people. How many people fit in 3 buses?", 120),
        ("Sam had 50 coins and spent 12. How many are left?", 38),
        ("A week has 7 days. How many days are in 5 weeks?", 35),
    ]
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("".join(json.dumps({"question": q, "answer": f"#### {a}"}) + "\n"
                             for q, a in rows[:3]))  # fmt: skip
    test.write_text("".join(json.dumps({"question": q, "answer": f"#### {a}"}) + "\n"
                            for q, a in rows[3:]))  # fmt: skip
    assert main(["data", "import", "gsm8k", str(train), "--split", "train"]) == 0
    answers = tmp_path / "answers.yaml"
    answers.write_text('".": "The answer is 18."\n')
    out = tmp_path / "run"
    argv = ["run", "--method", "masrouter", "--benchmark", "gsm8k", "--data", str(test),
            "--model", f"scripted:{answers}", "--model-role", "llm_echo=scripted:echo",
            "--optimize-on", "train", "--config", "epochs=2", "--config", "batch_size=2",
            "--out", str(out), "--no-cache", "--quiet"]  # fmt: skip
    assert main([*argv, "--limit", "1"]) == 0
    [attempt] = [json.loads(x) for x in (out / "optimize.jsonl").read_text().splitlines()]
    assert attempt["status"] == "ok" and attempt["metadata"] == {"split": "train", "tasks": 3}
    assert 2 * 3 * 2 <= attempt["usage"]["calls"] <= 2 * 3 * 13  # epochs · |V| runs of 2–13
    saved = json.loads((out / "learned_state.json").read_text())
    state = saved["state"]
    assert saved["split"] == "train" and state["format"] == "masrouter/1"
    assert state["llm"]["options"] == [f"scripted:{answers}", "scripted:echo"]
    assert len(state["mean_reward"]) == 2
    [record] = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert record["metadata"]["trained"] and record["usage"]["calls"] == record["metadata"]["calls"]
    capsys.readouterr()
    assert main([*argv, "--limit", "2"]) == 0  # a re-run: the saved state, no new step
    assert len((out / "optimize.jsonl").read_text().splitlines()) == 1
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["metadata"]["trained"] for r in results)
