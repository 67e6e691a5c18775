"""MaAS (arXiv 2502.04180) with scripted models: the activation rule, early exit, call counts
per architecture, what each layer sees, the cost-aware objective, learning, the learned state,
budget stops, garbage replies, model roles and the command line."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from helpers import GOLD_TASK as TASK
from helpers import TwoModels, agent_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.cot import cot_prompt
from maslab.methods.maas import (
    EARLY_EXIT,
    FEATURES,
    MaAS,
    cost_aware_reward,
    query_features,
    step_prompt,
)
from maslab.store.run_store import RunStore


def named(answers: dict[str, int] | None = None, default: int = 42):
    """Each agent answers '<agent>: The answer is N', N by the first key its name starts with
    after the layer tag (``answers``), else ``default``."""
    answers = answers or {}

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        bare = agent.split("_", 1)[1] if re.match(r"l\d+_", agent) else agent
        n = next((v for k, v in answers.items() if bare.startswith(k)), default)
        return f"{agent}: The answer is {n}."

    return respond


def fix(method: MaAS, layer: int, probs: dict[str, float]) -> None:
    """Layer ``layer`` (1-based) gets these probabilities (the other operators ~0), whatever
    the query's features (zero feature weights)."""
    logits = [math.log(probs.get(op, 1e-9)) for op in method.policy.options]
    method.policy.logits[layer - 1] = logits
    method.policy.weights[layer - 1] = 0


def greedy(*layers: dict[str, float], **config) -> MaAS:
    method = MaAS(controller="greedy", layers=max(len(layers), 1), **config)
    for i, probs in enumerate(layers, 1):
        fix(method, i, probs)
    return method


def test_defaults_and_config_checks():
    method = get_method("maas")()
    assert isinstance(method, MaAS)
    cfg = method.config
    assert (cfg.layers, cfg.threshold, cfg.controller) == (4, 0.3, "sample")
    assert EARLY_EXIT in cfg.operators and len(cfg.operators) == 7
    assert method.policy.slots == ["layer_1", "layer_2", "layer_3", "layer_4"]
    assert method.policy.weights.shape == (4, 7, len(FEATURES))
    assert method.learned_state() is None
    for bad in (
        {"threshold": 1.0},
        {"threshold": 0},
        {"operators": ["cot", "cot"]},
        {"operators": ["early_exit"]},
        {"operators": ["react"]},
        {"samples": 1},
        {"layers": 0},
    ):
        with pytest.raises(ConfigError):
            MaAS(**bad)


def test_query_features():
    coding = Task(id="c", question="Write f(x) " + "word " * 400, answer_type="code")
    assert query_features(coding) == (1.0, 0.0, 0.0, 1.0)
    choice = Task(id="m", question="Pick 1, 2 or 3.5", choices=("a", "b"), answer_type="choice")
    assert query_features(choice) == (5 / 200, 0.3, 1.0, 0.0)


# -- the controller --------------------------------------------------------------------------

OPS = ("io", "cot", "debate", "early_exit")


@pytest.mark.parametrize(
    ("probs", "layer", "expected", "exits"),
    [
        ((0.28, 0.27, 0.40, 0.05), 2, ("debate",), False),  # 0.40 > 0.3 at once
        ((0.29, 0.28, 0.27, 0.16), 2, ("io", "cot"), False),  # 0.29 <= 0.3, then 0.57
        ((0.20, 0.15, 0.10, 0.55), 2, (), True),  # the exit is likeliest: nothing runs
        ((0.28, 0.25, 0.20, 0.27), 2, ("io",), True),  # io, then the exit
        ((0.28, 0.25, 0.20, 0.27), 1, ("io",), False),  # no exit in layer 1: io is 0.38
        ((0.10, 0.10, 0.10, 0.70), 1, ("io",), False),  # 1/3 each: ties go to the first
    ],
)
def test_operators_are_activated_by_decreasing_probability_until_the_threshold(
    probs, layer, expected, exits
):
    method = MaAS(controller="greedy", operators=OPS, layers=2)
    fix(method, layer, dict(zip(OPS, probs, strict=True)))
    drawn = method.activate(layer - 1, query_features(TASK), None)
    assert (drawn.operators, drawn.exit) == (expected, exits)
    assert len(drawn.steps) == len(expected) + exits


def test_sampled_activation_stops_right_after_the_cumulative_probability_passes():
    method = MaAS(operators=OPS, layers=2, threshold=0.5)
    fix(method, 2, {"io": 0.3, "cot": 0.25, "debate": 0.2, "early_exit": 0.25})
    p = dict(zip(OPS, method.policy.probabilities(1, (0.0,) * 4), strict=True))
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(200):
        drawn = method.activate(1, (0.0,) * 4, rng)
        picked = [*drawn.operators, *([EARLY_EXIT] if drawn.exit else [])]
        seen.add(tuple(picked))
        sums = np.cumsum([p[op] for op in picked])
        assert drawn.exit or sums[-1] > 0.5
        assert all(s <= 0.5 for s in sums[:-1])  # it went on only while at or under
        assert EARLY_EXIT not in picked[:-1]
        # Plackett-Luce: each draw is among the operators not yet picked
        for step, before in zip(drawn.steps, range(len(picked)), strict=True):
            assert all(step.probs[OPS.index(op)] == 0 for op in picked[:before])
    assert len(seen) > 4  # really sampled


# -- running an architecture -----------------------------------------------------------------

SINGLE = [("io", 1), ("cot", 1), ("self_consistency", 3), ("debate", 4), ("self_refine", 3),
          ("ensemble", 4)]  # fmt: skip


@pytest.mark.parametrize(("operator", "calls"), SINGLE)
async def test_each_operator_in_layer_1_then_an_exit(operator, calls):
    method = greedy({operator: 1.0}, {EARLY_EXIT: 1.0})
    model = ScriptedModel(named())
    ctx = Context(model)
    solution = await method.solve(TASK, ctx)
    assert len(model.calls) == calls == solution.metadata["calls"]
    assert solution.metadata == {
        "architecture": [[operator]],
        "early_exit": True,
        "layers_run": 1,
        "calls": calls,
    }
    assert {r.round for r in ctx.ledger.records} == {0}


async def test_call_counts_of_a_four_layer_architecture():
    method = greedy(
        {"cot": 0.5, "debate": 0.45, "io": 0.05},
        {"self_refine": 0.5, "ensemble": 0.45, "io": 0.05},
        {"self_consistency": 1.0},
        {"io": 0.6, "cot": 0.4},
        threshold=0.9,
        debaters=3,
        debate_rounds=3,
        consistency_samples=2,
        ensemble_size=2,
    )
    model = ScriptedModel(named())
    ctx = Context(model)
    solution = await method.solve(TASK, ctx)
    expected = 1 + 3 * 3 + 2 + (2 + 1) + 2 + 1 + 1
    assert len(model.calls) == expected == solution.metadata["calls"] == 19
    assert solution.metadata["architecture"] == [
        ["cot", "debate"], ["self_refine", "ensemble"], ["self_consistency"], ["io", "cot"],
    ]  # fmt: skip
    assert solution.metadata["early_exit"] is False
    calls: dict[tuple[str, int], int] = {}
    for r in ctx.ledger.records:
        calls[r.agent, r.round] = calls.get((r.agent, r.round), 0) + 1
    assert calls == {
        ("l1_cot", 0): 1,
        **{(f"l1_debater_{i}", 0): 3 for i in (1, 2, 3)},
        ("l2_critic", 1): 1,
        ("l2_refiner", 1): 1,  # refines layer 1's answer: no draft of its own
        ("l2_ensemble_1", 1): 1,
        ("l2_ensemble_2", 1): 1,
        ("aggregator", 1): 1,
        ("l3_sampler_1", 2): 1,
        ("l3_sampler_2", 2): 1,
        ("l4_io", 3): 1,
        ("l4_cot", 3): 1,
    }
    topology = ctx.topology
    layer1 = {"l1_cot", "l1_debater_1", "l1_debater_2", "l1_debater_3"}
    assert set(topology.predecessors("l2_critic")) == layer1
    assert topology.predecessors("l3_sampler_1") == ["l2_refiner", "aggregator"]
    assert topology.predecessors("l4_io") == ["l3_sampler_1", "l3_sampler_2"]


async def test_layer_1_sees_the_question_and_later_layers_the_previous_outputs():
    method = greedy(
        {"cot": 0.55, "io": 0.45},
        {"cot": 0.55, "self_refine": 0.45},
        {EARLY_EXIT: 1.0},
        threshold=0.6,
    )
    model = ScriptedModel(named({"io": 7}))  # io says 7, every other agent 42
    ctx = Context(model)
    solution = await method.solve(TASK, ctx)
    prompts = {r.agent: r.messages[-1]["content"] for r in ctx.ledger.records}
    assert prompts["l1_cot"] == cot_prompt(TASK)
    assert prompts["l1_io"] == TASK.prompt()
    layer1 = ["l1_cot: The answer is 42.", "l1_io: The answer is 7."]  # activation order
    assert prompts["l2_cot"] == step_prompt(TASK, layer1)
    # layer 1's vote is a tie 42 / 7: the first activated (cot) wins; the critic reviews it
    assert "l1_cot: The answer is 42." in prompts["l2_critic"]
    assert "l1_io" not in prompts["l2_critic"]
    assert "l2_critic" in prompts["l2_refiner"]  # the refiner reads the critique
    assert solution.answer == "l2_cot: The answer is 42."  # a tie again: the first activated
    assert solution.metadata["early_exit"] and solution.metadata["layers_run"] == 2


async def test_the_answer_is_the_majority_of_the_last_layer():
    method = greedy({"cot": 0.4, "io": 0.3, "debate": 0.3}, threshold=0.95, debaters=3)
    model = ScriptedModel(named({"cot": 5, "io": 9, "debater_1": 9, "debater_2": 9}))
    solution = await method.solve(TASK, Context(model))
    assert solution.metadata["architecture"] == [["cot", "io", "debate"]]
    assert solution.answer == "l1_io: The answer is 9."  # io 9, debate 9, cot 5


def test_the_sampled_controller_draws_from_the_sample_stream():
    def architecture(seed: int, task_id: str) -> list[list[str]]:
        task = TASK.model_copy(update={"id": task_id})
        outcome = MaAS().run(task, ScriptedModel(named()), seed=seed)
        return outcome.solution.metadata["architecture"]

    assert architecture(1, "a") == architecture(1, "a")
    drawn = {json.dumps(architecture(seed, "a")) for seed in range(8)}
    assert len(drawn) > 1


# -- budget stops and garbage ----------------------------------------------------------------


async def test_a_budget_stop_returns_the_last_complete_layer():
    method = greedy({"io": 1.0}, {"debate": 1.0}, {EARLY_EXIT: 1.0})
    model = ScriptedModel(named({"io": 9}))
    ctx = Context(model, budget=Budget(max_calls=3))
    solution = await method.run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and "budget" in solution.metadata
    assert solution.answer == "l1_io: The answer is 9."


@pytest.mark.parametrize("garbage", ["", "\\boxed{?", "{not json", "The answer is"])
async def test_garbage_replies_never_crash(garbage):
    method = MaAS(threshold=0.99, layers=2, controller="greedy")
    model = ScriptedModel(lambda request: garbage)
    solution = await method.solve(TASK, Context(model))
    assert solution.answer == garbage
    ops = [op for op in method.config.operators if op != EARLY_EXIT]
    assert solution.metadata["architecture"] == [ops, ops]
    assert solution.metadata["early_exit"]  # the exit came last in layer 2
    assert len(model.calls) == solution.metadata["calls"] == 16 + 15
    await method.optimize([TASK], Context(ScriptedModel(lambda request: garbage)))
    assert method.learned_state() is not None


# -- the objective and learning --------------------------------------------------------------


def test_the_cost_aware_reward():
    assert cost_aware_reward(1.0, 3, 0.25) == 0.25
    assert cost_aware_reward(0.0, 4, 0.5) == -2.0
    assert cost_aware_reward(1.0, 10, 0.0) == 1.0


async def test_optimize_rewards_are_score_minus_lambda_calls():
    method = greedy(
        {"self_consistency": 1.0}, {EARLY_EXIT: 1.0}, epochs=2, samples=3, cost_weight=0.25
    )
    wrong = TASK.model_copy(update={"id": "t2", "gold": "41"})
    model = ScriptedModel(named())  # always 42: right on TASK, wrong on `wrong`
    before = method.policy.logits.copy()
    await method.optimize([TASK, wrong], Context(model))
    assert method.rewards == [[0.25] * 3 + [-0.75] * 3] * 2  # 1 − 0.25·3 and 0 − 0.25·3
    assert len(model.calls) == 2 * 2 * 3 * 3
    np.testing.assert_array_equal(method.policy.logits, before)  # flat groups: no update
    assert method.learned_state() == MaAS.LearnedState(
        controller=method.policy.state(), mean_reward=[-0.25, -0.25]
    )


TASKS = [
    Task(id=f"q{i}", question=f"What is {i} + 1?", gold=str(i + 1), answer_type="number")
    for i in range(1, 5)
]


def by_operator(wrong: str = ""):
    """Every agent gives the right answer (read from the question), those of ``wrong`` 0."""

    def respond(request: ChatRequest) -> str:
        n = int(re.search(r"What is (\d+) \+ 1", last_user_message(request)).group(1)) + 1
        return f"The answer is {0 if wrong and wrong in agent_of(request) else n}."

    return respond


@pytest.mark.parametrize(
    ("operators", "script", "cost_weight", "loser"),
    [
        (("cot", "self_consistency"), by_operator(wrong="cot"), 0.01, "cot"),  # cot is wrong
        (("cot", "debate"), by_operator(), 0.1, "debate"),  # both right, debate costs 4
    ],
)
async def test_optimisation_lowers_a_wrong_or_expensive_operator(
    operators, script, cost_weight, loser
):
    method = MaAS(layers=1, operators=operators, epochs=6, cost_weight=cost_weight)
    features = query_features(TASKS[0])
    assert method.policy.probabilities(0, features)[operators.index(loser)] == 0.5
    await method.optimize(TASKS, Context(ScriptedModel(script), seed=3))
    assert method.policy.probabilities(0, features)[operators.index(loser)] < 0.2
    state = method.learned_state()
    assert state is not None and state.mean_reward[-1] > state.mean_reward[0]
    learned = MaAS(layers=1, operators=operators, controller="greedy")
    learned.load_learned_state(state)
    solution = await learned.solve(TASKS[0], Context(ScriptedModel(script)))
    assert solution.metadata["architecture"] == [[op for op in operators if op != loser]]


async def test_the_learned_state_round_trips():
    method = MaAS(layers=2, epochs=1, samples=2)
    await method.arun(TASK, ScriptedModel(named()))  # solving learns nothing
    assert method.learned_state() is None
    await method.optimize([TASK], Context(ScriptedModel(named({"cot": 1})), seed=5))
    state = json.loads(json.dumps(method.dump_learned_state()))
    again = MaAS(layers=2)
    again.restore_learned_state(state, "state.json")
    np.testing.assert_array_equal(again.policy.logits, method.policy.logits)
    np.testing.assert_array_equal(again.policy.weights, method.policy.weights)
    assert again.dump_learned_state() == state
    for other in (MaAS(layers=3), MaAS(layers=2, operators=["cot", "io"])):
        with pytest.raises(ConfigError, match=r"does not fit this config: .* differ"):
            other.restore_learned_state(state, "state.json")
    with pytest.raises(ConfigError, match=r"invalid maas learned state: controller\.slots"):
        MaAS(layers=2).restore_learned_state({"controller": {"slots": []}}, "state.json")


# -- model roles and the command line --------------------------------------------------------


@pytest.mark.parametrize(
    ("roles", "on_b"),
    [
        ({"debater": "scripted:b"}, {"l1_debater_1", "l1_debater_2"}),
        ({"l2_cot": "scripted:b", "aggregator": "scripted:b"}, {"l2_cot", "aggregator"}),
        ({"critic": "scripted:b", "refiner": "scripted:b"}, {"l2_critic", "l2_refiner"}),
    ],
)
async def test_model_roles_route_operators_to_other_models(roles, on_b):
    method = greedy(
        {"debate": 0.5, "ensemble": 0.5}, {"cot": 0.5, "self_refine": 0.5}, threshold=0.6
    )
    ctx = Context(
        "scripted:a", models=TwoModels(named), model_roles=method.check_model_roles(roles)
    )
    await method.solve(TASK, ctx)
    assert len(ctx.ledger.records) == 4 + 4 + 1 + 2
    for record in ctx.ledger.records:
        assert record.model == ("scripted:b" if record.agent in on_b else "scripted:a")


def test_role_names_are_checked():
    method = MaAS(layers=2)
    method.check_model_roles({"sampler": "scripted:echo", "l2_ensemble_3": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'l3_cot'"):
        method.check_model_roles({"l3_cot": "scripted:echo"})


@pytest.mark.system
def test_the_command_line_optimises_then_reloads_the_learned_state(tmp_path):
    out = tmp_path / "run"
    common = ["run", "--method", "maas", "--benchmark", "arith", "--model", "scripted:echo",
              "--optimize-on", "dev", "--optimize-limit", "4", "--out", str(out),
              "--no-cache", "--quiet"]  # fmt: skip
    assert main([*common, "--limit", "2"]) == 0
    saved = json.loads((out / "learned_state.json").read_text())
    assert len(saved["state"]["mean_reward"]) == 3  # the default epochs
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2
    assert all(r["usage"]["calls"] == r["metadata"]["calls"] > 0 for r in results)
    [attempt] = RunStore(out).optimizations()
    spent = attempt.usage["calls"]
    assert spent >= 3 * 4 * 4  # epochs · tasks · K architectures, one call at the least

    assert main([*common, "--limit", "3"]) == 0  # one more test task, no new optimisation
    store = RunStore(out)
    assert [a.usage["calls"] for a in store.optimizations()] == [spent]
    assert json.loads((out / "learned_state.json").read_text()) == saved
    assert len(store.results()) == 3
