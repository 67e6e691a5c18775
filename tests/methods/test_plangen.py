"""PlanGEN (arXiv 2502.16111) with scripted models: each framework's call formula, who sees
what, the threshold stop of the mixture, the UCB arithmetic, REBASE's allocation, budget stops,
model roles, garbage replies and the command line."""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable

import pytest
from helpers import TASK, TwoModels, agent_of, method_runner

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.plangen import (
    Bandit,
    PlanGEN,
    Prior,
    Verdict,
    allocate,
    read_complete,
    read_prior,
    read_verdict,
    record,
    reward,
    ucb,
)

CONSTRAINTS = "CONSTRAINTS: use multiplication; the result is an integer."
_STEP = re.compile(r"Step \d+: (step-\d+)")
_PLAN = re.compile(r"(plan-\d+)")


def kind_of(prompt: str) -> str:
    """Which of PlanGEN's prompts this is."""
    for marker, kind in (
        ("Do not solve the problem.", "constraint"),
        ("You are verifying a plan", "verify"),
        ("You are scoring a partial plan", "reward"),
        ("Do these steps already form a complete plan", "completion"),
        ("Three search algorithms", "prior"),
        ("Propose the next step only", "step"),
        ("Write a complete step-by-step plan", "plan"),
        ("Carry out the plan step by step", "execute"),
    ):
        if marker in prompt:
            return kind
    raise AssertionError(f"unknown prompt {prompt[:80]!r}")


def verdict(score: object, feedback: str = "FEEDBACK") -> str:
    return json.dumps({"feedback": feedback, "score": score})


def script(
    *,
    verify: Callable[[str], int] = lambda plan: 50,
    step_reward: Callable[[tuple[str, ...]], int] = lambda steps: 50,
    complete: Callable[[tuple[str, ...]], bool] = lambda steps: False,
    prior: dict[str, float] | None = None,
):
    """Plans are 'plan-i', steps 'step-i' (i counts in call order); the verifier scores a plan
    with ``verify(first plan name in it)`` (a tree path: its last step's name) and a path with
    ``step_reward``; the completion check says ``complete(steps)``."""
    plans, steps = itertools.count(1), itertools.count(1)
    prior = prior or {"best_of_n": 0.2, "tot": 0.9, "rebase": 0.5}

    def respond(request: ChatRequest) -> str:
        prompt = last_user_message(request)
        kind = kind_of(prompt)
        if kind == "constraint":
            return CONSTRAINTS
        if kind == "plan":
            return f"plan-{next(plans)}: multiply 6 by 7."
        if kind == "step":
            return f"step-{next(steps)}"
        if kind == "execute":
            return "Executed: The answer is 42."
        if kind == "prior":
            return json.dumps({"reasoning": "PRIOR-NOTE", **prior})
        path = tuple(_STEP.findall(prompt))
        if kind == "completion":
            return "Checked.\n1" if complete(path) else "Checked.\n0"
        if kind == "reward":
            return verdict(step_reward(path), f"reward-note-{path[-1]}")
        body = prompt.split("\nPlan:\n", 1)[1]
        found = _PLAN.findall(body) or list(_STEP.findall(body))[-1:]
        return verdict(verify(found[0]), f"feedback-on-{found[0]}")

    return respond


run = method_runner(PlanGEN, TASK)


def kinds(model: ScriptedModel) -> list[str]:
    return [kind_of(last_user_message(r)) for r in model.requests]


def test_defaults_and_registration():
    cfg = PlanGEN().config
    assert get_method("plangen") is PlanGEN
    assert (cfg.framework, cfg.n, cfg.children, cfg.tot_iterations) == ("best_of_n", 5, 3, 20)
    assert (cfg.rebase_width, cfg.threshold, cfg.exploration_cap) == (10, 95, 5.0)
    assert (cfg.sample_temperature, cfg.agent_temperature) == (0.7, 0.0)
    assert (cfg.alpha_div, cfg.alpha_rec, cfg.prior_weight) == (0.1, 0.5, 1.0)
    assert PlanGEN.roles == ("constraint", "planner", "verifier", "selector", "executor")
    for bad in ({"framework": "beam"}, {"n": 0}, {"threshold": 101}, {"rebase_tau": 0}):
        with pytest.raises(ConfigError):
            PlanGEN(**bad)


# -- Best-of-N ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 5])
async def test_best_of_n_costs_1_plus_2n_plus_1_and_keeps_the_top_score(n):
    scores = {"plan-1": 10, "plan-2": 70, "plan-3": 90, "plan-4": 90, "plan-5": -5}
    model = ScriptedModel(script(verify=lambda plan: scores[plan]))
    solution, ctx = await run(model, n=n)
    assert len(model.calls) == ctx.usage.calls == 1 + 2 * n + 1
    assert kinds(model) == ["constraint"] + ["plan"] * n + ["verify"] * n + ["execute"]
    best = max(range(1, n + 1), key=lambda i: (scores[f"plan-{i}"], -i))  # ties: the first
    assert solution.metadata["plan"] == f"plan-{best}: multiply 6 by 7."
    assert solution.metadata["score"] == scores[f"plan-{best}"]
    assert solution.answer == "Executed: The answer is 42."


async def test_the_paper_default_is_12_calls():
    model = ScriptedModel(script())
    await run(model)
    assert len(model.calls) == 12


async def test_who_sees_what_and_at_which_temperature():
    model = ScriptedModel(script(verify=lambda plan: {"plan-2": 80}.get(plan, 20)))
    _, ctx = await run(model, n=3)
    for request in model.requests:
        prompt = last_user_message(request)
        kind, agent = kind_of(prompt), agent_of(request)
        assert len(request.messages) == 1  # no agent remembers an earlier call
        assert (
            agent
            == {
                "constraint": "constraint",
                "plan": "planner",
                "verify": "verifier",
                "execute": "executor",
            }[kind]
        )
        assert request.temperature == (0.7 if kind == "plan" else 0.0)
        assert TASK.prompt() in prompt
        if kind in ("plan", "verify"):
            assert CONSTRAINTS in prompt  # the planner and the verifier see the constraints
        if kind == "verify":
            assert len(set(_PLAN.findall(prompt))) == 1  # one plan at a time
        if kind == "execute":  # the chosen plan, and no other
            assert "plan-2: multiply 6 by 7." in prompt and _PLAN.findall(prompt) == ["plan-2"]
            assert CONSTRAINTS not in prompt and "FEEDBACK" not in prompt
    assert {r.draw for r in ctx.ledger.records if r.agent == "planner"} == {0, 1, 2}


async def test_best_of_n_choice_does_not_depend_on_completion_order():
    def scores(plan: str) -> int:
        return {"plan-1": 40, "plan-2": 90, "plan-3": 90}[plan]

    seen = []
    for slow_first in (True, False):

        def latency(request: ChatRequest, slow_first: bool = slow_first) -> float:
            found = _PLAN.findall(last_user_message(request))
            i = int(found[0].split("-")[1]) if found else 0
            return 0.01 * ((4 - i) if slow_first else i)

        model = ScriptedModel(script(verify=scores), latency=latency)
        solution, _ = await run(model, n=3)
        seen.append(solution.metadata["plan"])
    assert seen == ["plan-2: multiply 6 by 7."] * 2


# -- Tree of Thought ---------------------------------------------------------------------------


def deeper_is_better(steps: tuple[str, ...]) -> int:
    return 4 * len(steps)


@pytest.mark.parametrize("done_at", [1, 2, 5])
async def test_tot_stops_after_the_expansion_with_a_complete_path(done_at):
    model = ScriptedModel(
        script(step_reward=deeper_is_better, complete=lambda steps: len(steps) == done_at)
    )
    solution, ctx = await run(model, framework="tot")
    assert len(model.calls) == ctx.usage.calls == 1 + 9 * done_at + 1
    per_expansion = ["step"] * 3 + ["reward", "completion"] * 3
    assert kinds(model) == ["constraint"] + per_expansion * done_at + ["execute"]
    assert solution.metadata["complete"] is True
    assert solution.metadata["plan"].count("Step ") == done_at
    assert solution.metadata["created"] == 3 * done_at


@pytest.mark.parametrize(("iterations", "calls"), [(4, 1 + 36 + 1), (20, 182)])
async def test_tot_is_capped_by_its_iteration_budget(iterations, calls):
    model = ScriptedModel(script(step_reward=deeper_is_better))
    config = {"tot_iterations": iterations} if iterations != 20 else {}
    solution, _ = await run(model, framework="tot", **config)
    assert len(model.calls) == calls
    assert solution.metadata["complete"] is False
    assert solution.metadata["plan"].count("Step ") == iterations  # the best path: the deepest


async def test_tot_expands_the_highest_reward_node_anywhere_in_the_tree():
    rewards = {"step-1": 50, "step-2": 40, "step-3": 30, "step-4": 10, "step-5": 10}
    model = ScriptedModel(script(step_reward=lambda steps: rewards.get(steps[-1], 0)))
    await run(model, framework="tot", tot_iterations=3)
    steps = [
        last_user_message(r) for r in model.requests if kind_of(last_user_message(r)) == "step"
    ]
    parents = [tuple(_STEP.findall(prompt)) for prompt in steps]
    assert parents == [()] * 3 + [("step-1",)] * 3 + [("step-2",)] * 3  # step-2 beats step-1's
    for request in model.requests:
        prompt = last_user_message(request)
        if kind_of(prompt) in ("reward", "completion", "step"):
            assert CONSTRAINTS in prompt
        assert request.temperature == (0.7 if kind_of(prompt) == "step" else 0.0)


# -- REBASE ------------------------------------------------------------------------------------


def test_allocate_shares_children_by_reward():
    assert allocate([0], 3, 20) == [3]
    assert allocate([60, 50, 0], 3, 20) == [2, 1, 0]  # shares 1.81, 1.10, 0.09
    assert allocate([50, 50, 50], 3, 20) == [1, 1, 1]
    assert allocate([90, 50, -20], 3, 10) == [3, 0, 0]
    assert allocate([50, 50], 1, 20) == [1, 0]  # a tie goes to the higher rank
    assert allocate([50, 40, 30], 2, 1000) == [1, 1, 0]


async def test_rebase_spends_its_width_of_10_nodes_in_at_most_30_tree_calls():
    model = ScriptedModel(script())
    solution, _ = await run(model, framework="rebase")
    assert len(model.calls) == 1 + 30 + 1
    assert kinds(model).count("step") == 10 and solution.metadata["created"] == 10
    assert solution.metadata["plan"].count("Step ") == 1  # all tie: the first path


@pytest.mark.parametrize(("width", "children", "levels"), [(10, 3, 4), (4, 3, 2), (5, 2, 3)])
async def test_rebase_stops_early_on_completion(width, children, levels):
    model = ScriptedModel(script(complete=lambda steps: len(steps) == 2))
    await run(model, framework="rebase", rebase_width=width, children=children)
    nodes = min(2 * children, width)
    assert len(model.calls) == 1 + 3 * nodes + 1
    model = ScriptedModel(script())  # never complete: the whole width, level by level
    await run(model, framework="rebase", rebase_width=width, children=children)
    assert len(model.calls) == 1 + 3 * width + 1
    steps = [
        last_user_message(r) for r in model.requests if kind_of(last_user_message(r)) == "step"
    ]
    depths = [len(_STEP.findall(p)) for p in steps]
    assert max(depths) + 1 == levels


async def test_rebase_gives_lower_reward_paths_fewer_children():
    rewards = {"step-1": 50, "step-2": 60, "step-3": 0}
    model = ScriptedModel(script(step_reward=lambda steps: rewards.get(steps[-1], 10)))
    await run(model, framework="rebase", rebase_width=6)
    steps = [
        last_user_message(r) for r in model.requests if kind_of(last_user_message(r)) == "step"
    ]
    parents = [tuple(_STEP.findall(prompt)) for prompt in steps[3:]]
    assert parents == [("step-2",), ("step-2",), ("step-1",)]  # ranked, 2-1-0


# -- the mixture and its UCB -------------------------------------------------------------------


def test_ucb_at_the_start_is_the_prior_plus_the_diversity_bonus():
    bandit = Bandit.start(weight=1.0)
    prior = {"best_of_n": 0.2, "tot": 0.9, "rebase": 0.5}
    scores, weight = ucb(bandit, prior, alpha_div=0.1, alpha_rec=0.5)
    # R_max = 1 (all rewards 0), E = sqrt(2 ln 1 / 1) = 0, D = 0.1 / 2, λ = 1 / (1 + 0)
    assert scores == pytest.approx({"best_of_n": 0.25, "tot": 0.95, "rebase": 0.55}, abs=1e-12)
    assert weight == 1.0


def test_ucb_by_hand():
    bandit = Bandit(
        rewards={"best_of_n": 0.6, "tot": 0.3, "rebase": 0.0},
        counts={"best_of_n": 2, "tot": 3, "rebase": 1},
        recovery={"best_of_n": 0.2, "tot": 0.0, "rebase": 0.0},
        steps=3,
        weight=0.5,
    )
    prior = {"best_of_n": 0.5, "tot": 0.5, "rebase": 1.0}
    scores, weight = ucb(bandit, prior, alpha_div=0.1, alpha_rec=0.5)
    # means 0.3, 0.1, 0 -> R_max = 0.3; ln 4 = 1.3862944; λ = 0.5 / 4 = 0.125
    assert weight == 0.125
    assert scores["best_of_n"] == pytest.approx(1 + 1.1774100 + 0.0625 + 0.1 / 3 + 0.1, abs=1e-6)
    assert scores["tot"] == pytest.approx(1 / 3 + 0.9613513 + 0.0625 + 0.025, abs=1e-6)
    assert scores["rebase"] == pytest.approx(0 + 1.6651092 + 0.125 + 0.05, abs=1e-6)
    assert scores["best_of_n"] == pytest.approx(2.3732434, abs=1e-6)


def test_ucb_caps_exploration_at_m_and_reads_all_zero_rewards_as_r_max_1():
    bandit = Bandit(
        rewards=dict.fromkeys(("best_of_n", "tot", "rebase"), 0.0),
        counts={"best_of_n": 1, "tot": 100_000, "rebase": 1},
        recovery=dict.fromkeys(("best_of_n", "tot", "rebase"), 0.0),
        steps=10**6,
        weight=0.0,
    )
    scores, _ = ucb(
        bandit, dict.fromkeys(("best_of_n", "tot", "rebase"), 0.0), alpha_div=0, alpha_rec=0
    )
    assert math.sqrt(2 * math.log(10**6 + 1)) > 5
    assert scores["best_of_n"] == scores["rebase"] == 5.0  # capped
    assert scores["tot"] == pytest.approx(math.sqrt(2 * math.log(10**6 + 1) / 100_000))
    scores, _ = ucb(
        bandit,
        dict.fromkeys(("best_of_n", "tot", "rebase"), 0.0),
        alpha_div=0,
        alpha_rec=0,
        cap=2.0,
    )
    assert scores["best_of_n"] == 2.0


def test_record_updates_r_c_t_and_rec_and_lambda_decays():
    prior = dict.fromkeys(("best_of_n", "tot", "rebase"), 1.0)
    bandit = Bandit.start(weight=1.0)
    assert reward(-100) == 0 and reward(0) == 0.5 and reward(100) == 1
    _, weight = ucb(bandit, prior, alpha_div=0.1, alpha_rec=0.5)
    bandit = record(bandit, "tot", 60, -20, weight)  # from 0.4 to 0.8: recovered 0.4
    assert bandit.rewards == {"best_of_n": 0.0, "tot": 0.8, "rebase": 0.0}
    assert bandit.counts == {"best_of_n": 1, "tot": 2, "rebase": 1}
    assert bandit.recovery["tot"] == pytest.approx(0.4) and bandit.steps == 1
    _, weight = ucb(bandit, prior, alpha_div=0.1, alpha_rec=0.5)
    assert weight == 0.5  # 1 / (1 + 1)
    bandit = record(bandit, "tot", 20, 60, weight)  # worse than the best: no recovery
    assert bandit.recovery["tot"] == 0.0 and bandit.rewards["tot"] == pytest.approx(1.4)
    assert bandit.counts["tot"] == 3 and bandit.steps == 2
    _, weight = ucb(bandit, prior, alpha_div=0.1, alpha_rec=0.5)
    assert weight == pytest.approx(1 / 6)  # 0.5 / (1 + 2)
    # R_max is the best mean reward: tot's 1.4 / 3
    scores, _ = ucb(bandit, dict.fromkeys(prior, 0.0), alpha_div=0, alpha_rec=0)
    assert scores["tot"] == pytest.approx(1 + math.sqrt(2 * math.log(3) / 3))


async def test_the_mixture_stops_at_once_when_the_initial_plan_passes():
    model = ScriptedModel(script(verify=lambda plan: 95))
    solution, _ = await run(model, framework="mixture")
    assert kinds(model) == ["constraint", "plan", "verify", "execute"]
    assert solution.metadata["iterations"] == [] and solution.metadata["threshold_met"] is True
    initial = model.requests[1]
    assert initial.temperature == 0.0 and agent_of(initial) == "planner"
    assert CONSTRAINTS not in last_user_message(initial)  # written alongside the constraints
    assert CONSTRAINTS in last_user_message(model.requests[2])


async def test_the_mixture_threshold_stop_fires_after_a_passing_algorithm():
    scores = {"plan-1": 30, "plan-4": 97}  # the initial plan fails; BoN's third plan passes
    prior = {"best_of_n": 0.9, "tot": 0.1, "rebase": 0.1}
    model = ScriptedModel(script(verify=lambda plan: scores.get(plan, 10), prior=prior))
    solution, ctx = await run(model, framework="mixture", max_iterations=3)
    assert len(model.calls) == 3 + (1 + 2 * 5) + 1 == 15
    (iteration,) = solution.metadata["iterations"]
    assert iteration["algorithm"] == "best_of_n" and iteration["score"] == 97
    assert iteration["recovery"] == pytest.approx(reward(97) - reward(30))
    assert solution.metadata["threshold_met"] is True
    assert solution.metadata["plan"] == "plan-4: multiply 6 by 7."
    selector = [r for r in ctx.ledger.records if r.agent == "selector"]
    (prompt,) = [r.messages[-1]["content"] for r in selector]
    assert "feedback-on-plan-1" in prompt and CONSTRAINTS in prompt  # the feedback it weighs
    for request in model.requests[4:14]:  # BoN seeded with the best plan and its feedback
        if kind_of(last_user_message(request)) == "plan":
            assert "plan-1: multiply" in last_user_message(request)
            assert "feedback-on-plan-1" in last_user_message(request)
    assert model.requests[3].temperature == 0.0 and agent_of(model.requests[3]) == "selector"


def cost(algorithm: str) -> int:
    """Calls of one mixture iteration at n=2, tot_iterations=2, rebase_width=4, never done."""
    return 1 + {"best_of_n": 2 * 2, "tot": 9 * 2 + 1, "rebase": 3 * 4 + 1}[algorithm]


@pytest.mark.parametrize(
    "prior",
    [
        {"best_of_n": 0.1, "tot": 0.9, "rebase": 0.2},
        {"best_of_n": 0.1, "tot": 0.2, "rebase": 0.9},
        {"best_of_n": 0.9, "tot": 0.2, "rebase": 0.1},
    ],
)
async def test_the_mixture_runs_its_iteration_budget_and_follows_the_ucb(prior):
    model = ScriptedModel(script(verify=lambda plan: 20, prior=prior))
    config = {"n": 2, "tot_iterations": 2, "rebase_width": 4, "max_iterations": 3}
    solution, _ = await run(model, framework="mixture", **config)
    history = solution.metadata["iterations"]
    assert len(history) == 3 and solution.metadata["threshold_met"] is False
    assert len(model.calls) == 3 + sum(cost(h["algorithm"]) for h in history) + 1
    assert history[0]["algorithm"] == max(prior, key=prior.get)  # at T = 0 the prior decides
    bandit = Bandit.start(weight=1.0)
    best = 20
    for h in history:  # replay the pure functions on what the run saw
        scores, weight = ucb(bandit, h["prior"], alpha_div=0.1, alpha_rec=0.5)
        assert scores == pytest.approx(h["ucb"]) and h["prior"] == prior
        assert h["algorithm"] == max(scores, key=scores.get)
        bandit = record(bandit, h["algorithm"], h["score"], best, weight)
        best = max(best, h["score"])
    assert kinds(model)[-1] == "execute"


async def test_the_mixture_verifies_a_tree_path_as_a_whole_plan():
    prior = {"best_of_n": 0.0, "tot": 1.0, "rebase": 0.0}

    def verify(name: str) -> int:
        return 96 if name.startswith("step") else 0

    model = ScriptedModel(
        script(verify=verify, prior=prior, complete=lambda steps: len(steps) == 1)
    )
    solution, _ = await run(model, framework="mixture")
    assert kinds(model) == (
        ["constraint", "plan", "verify", "prior"]
        + ["step"] * 3
        + ["reward", "completion"] * 3
        + ["verify", "execute"]
    )
    assert solution.metadata["plan"] == "Step 1: step-1"
    assert solution.metadata["score"] == 96 and solution.metadata["threshold_met"] is True
    for request in model.requests:  # the tree is seeded with the initial plan's feedback
        if kind_of(last_user_message(request)) == "step":
            assert "feedback-on-plan-1" in last_user_message(request)


# -- reading replies ---------------------------------------------------------------------------


def test_verdicts_are_read_clamped_and_never_crash():
    assert read_verdict(verdict(87, "ok")) == (87, "ok")
    assert read_verdict(verdict(250))[0] == 100 and read_verdict(verdict(-300))[0] == -100
    assert read_verdict(verdict("87.6"))[0] == 88 and read_verdict(verdict("−40"))[0] == -40
    assert read_verdict("Step 1 is fine, step 2 too.\nScore: 91") == (
        91,
        "Step 1 is fine, step 2 too.\nScore: 91",
    )
    assert read_verdict("**Score** = -15")[0] == -15
    assert read_verdict("score: 120")[0] == 100
    for garbage in ("", "I cannot judge this \\boxed{?", verdict("high"), verdict(None), "{"):
        assert read_verdict(garbage)[0] == -100


def test_priors_are_read_clamped_else_uniform():
    text = json.dumps({"reasoning": "r", "best_of_n": 0.3, "tot": 1.7, "rebase": -2})
    assert read_prior(text) == {"best_of_n": 0.3, "tot": 1.0, "rebase": 0.0}
    uniform = dict.fromkeys(("best_of_n", "tot", "rebase"), 1 / 3)
    for garbage in ("tot looks best", json.dumps({"tot": 0.5}), '{"best_of_n": "x", "tot": 1}'):
        assert read_prior(garbage) == uniform


def test_completion_is_read_from_the_last_line():
    assert read_complete("1") and read_complete("The plan reaches 42.\n**1**\n")
    assert read_complete("yes.") and not read_complete("0")
    assert not read_complete("Step 1: multiply.\nNot yet.") and not read_complete("")


@pytest.mark.parametrize("framework", ["best_of_n", "tot", "rebase", "mixture"])
async def test_garbage_replies_never_crash(framework):
    model = ScriptedModel(lambda request: "\\boxed{? }} {not json")
    config = {"n": 2, "tot_iterations": 2, "rebase_width": 4, "max_iterations": 2}
    solution, _ = await run(model, framework=framework, **config)
    assert solution.answer == "\\boxed{? }} {not json"
    assert solution.metadata["score"] == -100
    if framework == "mixture":  # a uniform prior; every UCB ties: the first algorithm
        assert solution.metadata["iterations"][0]["algorithm"] == "best_of_n"


@pytest.mark.parametrize("native", [True, False])
async def test_json_schemas_are_sent_natively_where_supported(native):
    prior = {"best_of_n": 0.0, "tot": 0.0, "rebase": 1.0}
    model = ScriptedModel(
        script(verify=lambda plan: 0, prior=prior), native=["structured_output"] if native else []
    )
    await run(model, framework="mixture", max_iterations=1, rebase_width=3)
    replies = {"verify": Verdict, "reward": Verdict, "prior": Prior}
    assert {kind_of(last_user_message(r)) for r in model.requests} >= set(replies)
    for request in model.requests:
        prompt = last_user_message(request)
        reply = replies.get(kind_of(prompt))
        if reply is not None:
            assert prompt.endswith(f"\n\n{reply.instructions()}")
        if native and reply is not None:
            assert request.response_format["json_schema"]["schema"] == reply.json_schema()
        else:
            assert request.response_format is None


# -- budget stops, model roles, the command line -----------------------------------------------


async def test_a_budget_stop_returns_the_best_verified_plan_so_far():
    scores = {"plan-1": 10, "plan-2": 60, "plan-3": 99}  # plan-3's verdict never comes
    model = ScriptedModel(script(verify=lambda plan: scores[plan]))
    ctx = Context(model, budget=Budget(max_calls=1 + 3 + 2))
    solution = await PlanGEN(n=3).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and "budget" in solution.metadata
    assert solution.answer == "plan-2: multiply 6 by 7."
    model = ScriptedModel(script(step_reward=lambda steps: {"step-2": 70}.get(steps[-1], 5)))
    ctx = Context(model, budget=Budget(max_calls=1 + 9 + 4))
    solution = await PlanGEN(framework="tot").run_sample(TASK, ctx)
    assert solution.answer == "Step 1: step-2"  # the best-scored path of the first expansion


async def test_a_completed_run_returns_the_executors_answer():
    model = ScriptedModel(script())
    ctx = Context(model)
    solution = await PlanGEN(n=2).run_sample(TASK, ctx)
    assert solution.answer == ctx.proposal.answer == "Executed: The answer is 42."


@pytest.mark.parametrize(
    ("framework", "roles", "on_b"),
    [
        ("best_of_n", {"verifier": "scripted:b"}, {"verifier"}),
        ("tot", {"verifier": "scripted:b"}, {"verifier"}),
        ("best_of_n", {"planner": "scripted:b", "executor": "scripted:b"}, {"planner", "executor"}),
        (
            "mixture",
            {"selector": "scripted:b", "constraint": "scripted:b"},
            {"selector", "constraint"},
        ),
    ],
)
async def test_model_roles_route_a_roles_calls_to_another_model(framework, roles, on_b):
    method = get_method("plangen")(framework=framework, tot_iterations=2, max_iterations=1, n=2)
    ctx = Context(
        "scripted:a", models=TwoModels(script), model_roles=method.check_model_roles(roles)
    )
    await method.solve(TASK, ctx)
    assert {r.agent for r in ctx.ledger.records} >= on_b
    for call in ctx.ledger.records:
        assert call.model == ("scripted:b" if call.agent in on_b else "scripted:a")


async def test_a_model_role_temperature_overrides_the_methods():
    method = PlanGEN(n=2)
    roles = method.check_model_roles(
        {"planner": {"temperature": 0.3}, "verifier": {"temperature": 1.0}}
    )
    model = ScriptedModel(script())
    await method.solve(TASK, Context(model, model_roles=roles))
    temperatures = {(agent_of(r), r.temperature) for r in model.requests}
    assert temperatures == {
        ("constraint", 0.0),
        ("planner", 0.3),
        ("verifier", 1.0),
        ("executor", 0.0),
    }
    with pytest.raises(ConfigError, match="no role or agent 'judge'"):
        method.check_model_roles({"judge": "scripted:echo"})


@pytest.mark.system
def test_the_command_line_runs_plangen_end_to_end(tmp_path):
    for framework, calls in (("best_of_n", 12), ("rebase", 32)):
        out = tmp_path / framework
        code = main(
            ["run", "--method", "plangen", "--benchmark", "arith", "--model", "scripted:echo",
             "--config", f"framework={framework}",
             "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
        )  # fmt: skip
        assert code == 0
        results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert len(results) == 2 and all(r["usage"]["calls"] == calls for r in results)
    mixed, verifier = tmp_path / "mixed", tmp_path / "verifier.yaml"
    verifier.write_text('".": \'{"feedback": "All constraints hold.", "score": 100}\'\n')
    code = main(
        ["run", "--method", "plangen", "--benchmark", "arith", "--model", "scripted:echo",
         "--config", "framework=mixture", "--model-role", f"verifier=scripted:{verifier}",
         "--limit", "1", "--out", str(mixed), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    trace = json.loads((mixed / "traces.jsonl").read_text().splitlines()[0])
    assert [(c["agent"], c["model"]) for c in trace["calls"]] == [
        ("constraint", "scripted:echo"),
        ("planner", "scripted:echo"),
        ("verifier", f"scripted:{verifier}"),
        ("executor", "scripted:echo"),
    ]  # the initial plan passed the threshold at once
