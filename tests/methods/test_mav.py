"""Multi-Agent Verification (BoN-MAV, arXiv 2502.20379) with scripted models: the call formula,
who sees what, the selection rule, unreadable verdicts, budget stops, model roles and the
command line."""

from __future__ import annotations

import json
import random
import re

import pytest
from helpers import TASK, TwoModels, agent_of, method_runner

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.cot import cot_prompt
from maslab.methods.mav import (
    APPROVAL_PROMPT,
    ASPECTS,
    MASLAB_ASPECTS,
    Approval,
    MultiAgentVerification,
    Verdict,
    critique_prompt,
    read_verdict,
    verify_prompt,
)

_CANDIDATE = re.compile(r"Proposed solution:\ncand-(\d+):")
APPROVAL_ASK = f"{APPROVAL_PROMPT}\n\n{Approval.instructions()}"


def index_of(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


def verdict(approve: bool) -> str:
    return json.dumps({"reasoning": "VERDICT-NOTE", "approve": approve})


def script(answers=None, approve=None):
    """Candidate i (1-based) is 'cand-i: The answer is <answers[i]>' (default 42); verifier j
    approves candidate i when ``approve(i, j)`` (default: always)."""
    answers = answers or {}
    approve = approve or (lambda i, j: True)

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        if agent.startswith("generator_"):
            i = index_of(agent)
            return f"cand-{i}: The answer is {answers.get(i, 42)}."
        (i,) = map(int, _CANDIDATE.findall(last_user_message(request)))
        return verdict(approve(i, index_of(agent)))

    return respond


run = method_runner(MultiAgentVerification, TASK)


def test_defaults_and_names():
    method = MultiAgentVerification()
    assert get_method("mav") is MultiAgentVerification
    assert method.config.n == 16 and len(method.config.aspects) == 4
    assert method.config.tie_break == "first"
    assert set(method.config.aspects) <= set(ASPECTS)
    names = MultiAgentVerification(n=2, aspects=["logic", "facts"]).agent_names()
    assert names == ("generator_1", "generator_2", "verifier_1", "verifier_2")
    for bad in ({"n": 0}, {"aspects": []}, {"aspects": ["nope"]}, {"aspects": ["logic"] * 2}):
        with pytest.raises(ConfigError):
            MultiAgentVerification(**bad)


@pytest.mark.parametrize(
    ("n", "aspects"),
    [(1, ["logic"]), (3, ["logic", "facts"]), (5, list(ASPECTS)[:4]), (2, list(ASPECTS))],
)
async def test_calls_are_n_plus_n_times_m(n, aspects):
    model = ScriptedModel(script())
    solution, ctx = await run(model, n=n, aspects=aspects)
    m = len(aspects)
    assert len(model.calls) == ctx.usage.calls == n + n * m
    records = ctx.ledger.records
    gens = sorted((r.agent, r.round) for r in records if r.agent.startswith("generator"))
    assert gens == sorted((f"generator_{i}", 0) for i in range(1, n + 1))
    for j in range(1, m + 1):
        assert [r.round for r in records if r.agent == f"verifier_{j}"] == [1] * n
    assert solution.metadata["approvals"] == [m] * n
    assert solution.metadata["unreadable"] == 0


async def test_the_paper_default_is_80_calls():
    model = ScriptedModel(script())
    await run(model)
    assert len(model.calls) == 16 + 16 * 4


async def test_each_verifier_sees_the_question_and_one_candidate_only():
    model = ScriptedModel(script())
    aspects = ["arithmetic", "final_answer", "completeness"]
    _, ctx = await run(model, n=4, aspects=aspects)
    for record in ctx.ledger.records:
        assert len(record.messages) == 1 and record.messages[0]["role"] == "user"
        prompt = record.messages[0]["content"]
        if record.agent.startswith("generator"):
            assert prompt == cot_prompt(TASK)  # the same prompt, independent draws
            continue
        j = index_of(record.agent)
        (i,) = map(int, _CANDIDATE.findall(prompt))
        candidate = f"cand-{i}: The answer is 42."
        asked = verify_prompt(TASK, candidate, aspects[j - 1])
        assert prompt == f"{asked}\n\n{Verdict.instructions()}"
        assert ASPECTS[aspects[j - 1]] in prompt
        assert all(ASPECTS[a] not in prompt for a in aspects if a != aspects[j - 1])
        assert prompt.count("cand-") == 1 and "VERDICT-NOTE" not in prompt  # no other verdicts
    pairs = sorted(
        (r.agent, int(_CANDIDATE.findall(r.messages[0]["content"])[0]))
        for r in ctx.ledger.records
        if r.agent.startswith("verifier")
    )
    assert pairs == sorted((f"verifier_{j}", i) for j in (1, 2, 3) for i in range(1, 5))
    draws = {r.draw for r in ctx.ledger.records if r.agent.startswith("generator")}
    assert len({r.agent for r in ctx.ledger.records if r.agent.startswith("gen")}) == 4
    assert draws == {0}  # each candidate its own agent, so its own random stream


async def test_the_candidate_with_most_approvals_wins():
    approvals = {1: {1}, 2: {1, 2, 3}, 3: {2, 3}, 4: set()}
    model = ScriptedModel(script({2: 7}, lambda i, j: j in approvals[i]))
    solution, _ = await run(model, n=4, aspects=["logic", "facts", "completeness"])
    assert solution.answer == "cand-2: The answer is 7."
    assert solution.metadata["approvals"] == [1, 3, 2, 0]
    assert solution.metadata["chosen"] == 2 and solution.metadata["tied"] == [2]
    assert solution.metadata["verdicts"][3] == [False, False, False]


async def test_ties_go_to_the_earliest_candidate_or_the_majority_among_the_tied():
    answers = {1: 5, 2: 9, 3: 9, 4: 1}
    tied = {1, 2, 3}  # approved by both; candidate 4 by none

    def approve(i: int, j: int) -> bool:
        return i in tied

    model = ScriptedModel(script(answers, approve))
    solution, _ = await run(model, n=4, aspects=["logic", "facts"])
    assert solution.answer == "cand-1: The answer is 5." and solution.metadata["tied"] == [1, 2, 3]
    model = ScriptedModel(script(answers, approve))
    solution, _ = await run(model, n=4, aspects=["logic", "facts"], tie_break="majority")
    assert solution.answer == "cand-2: The answer is 9." and solution.metadata["chosen"] == 2


def test_verdicts_are_read_from_json_or_an_approve_line_else_none():
    assert read_verdict('{"reasoning": "fine", "approve": true}') is True
    fenced = 'Notes first.\n```json\n{"reasoning": "x", "approve": "yes"}\n```'
    assert read_verdict(fenced) is True
    assert read_verdict('{"reasoning": "x", "approve": "false"}') is False
    assert read_verdict("I checked it.\napprove: true") is True
    assert read_verdict('"approve" = FALSE') is False
    assert read_verdict("Looks good to me!") is None
    assert read_verdict('{"reasoning": "x", "approve": "maybe"}') is None
    # a reply that only repeats the shape it was shown is no verdict
    assert read_verdict(Verdict.instructions()) is None
    assert read_verdict(Approval.instructions()) is None


async def test_an_unreadable_verdict_counts_as_a_reject_and_is_recorded():
    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        if agent.startswith("generator_"):
            return f"cand-{index_of(agent)}: The answer is 42."
        (i,) = map(int, _CANDIDATE.findall(last_user_message(request)))
        if i == 1:
            return "I cannot decide. \\boxed{?"  # garbage
        return verdict(agent == "verifier_1")

    model = ScriptedModel(respond)
    solution, _ = await run(model, n=2, aspects=["logic", "facts"])
    assert solution.metadata["verdicts"] == [[None, None], [True, False]]
    assert solution.metadata["unreadable"] == 2
    assert solution.metadata["approvals"] == [0, 1]
    assert solution.answer == "cand-2: The answer is 42."


@pytest.mark.parametrize("native", [True, False])
async def test_the_verdict_schema_is_sent_natively_where_supported(native):
    model = ScriptedModel(script(), native=["structured_output"] if native else [])
    await run(model, n=2, aspects=["logic"])
    for request in model.requests:
        if agent_of(request).startswith("generator") or not native:
            assert request.response_format is None
        else:
            assert request.response_format["json_schema"]["schema"] == Verdict.json_schema()


async def test_prompts_and_choice_do_not_depend_on_completion_order():
    def reverse(request: ChatRequest) -> float:
        return 0.01 * (5 - index_of(agent_of(request)))

    def forward(request: ChatRequest) -> float:
        return 0.01 * index_of(agent_of(request))

    seen = []
    for latency in (reverse, forward):
        model = ScriptedModel(script({3: 8}, lambda i, j: i == 3 or j == 1), latency=latency)
        solution, ctx = await run(model, n=4, aspects=["logic", "facts"])
        seen.append(
            (
                solution.answer,
                sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records),
            )
        )
    assert seen[0] == seen[1] and seen[0][0] == "cand-3: The answer is 8."


async def test_a_budget_stop_during_generation_returns_the_first_candidate():
    model = ScriptedModel(script())
    ctx = Context(model, budget=Budget(max_calls=2))
    solution = await MultiAgentVerification(n=3, aspects=["logic"]).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and "budget" in solution.metadata
    assert solution.answer == "cand-1: The answer is 42."
    assert not any(r.agent.startswith("verifier") for r in ctx.ledger.records)


async def test_a_budget_stop_during_verification_returns_the_best_approved_so_far():
    # candidate 3 would win with both approvals, but its verdicts never come
    approvals = {1: {1}, 2: {1, 2}, 3: {1, 2}}
    model = ScriptedModel(script({2: 7}, lambda i, j: j in approvals[i]))
    ctx = Context(model, budget=Budget(max_calls=3 + 4))
    solution = await MultiAgentVerification(n=3, aspects=["logic", "facts"]).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and ctx.usage.calls == 7
    verified = sorted(
        int(_CANDIDATE.findall(r.messages[0]["content"])[0])
        for r in ctx.ledger.records
        if r.agent.startswith("verifier")
    )
    assert verified == [1, 1, 2, 2]  # candidate by candidate
    assert solution.answer == "cand-2: The answer is 7."


# --- MASLab's protocol (preset=maslab) ----------------------------------------------------------


def maslab_script(approve=lambda i, aspect: True):
    """Candidates as in ``script``; a critique names its candidate and aspect; the approval that
    follows it approves candidate i when ``approve(i, aspect)``."""

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        if agent.startswith("generator_"):
            return f"cand-{index_of(agent)}: The answer is 42."
        (i,) = map(int, _CANDIDATE.findall(request.messages[0]["content"]))
        (aspect,) = [a for a, text in ASPECTS.items() if text in request.messages[0]["content"]]
        if last_user_message(request) == APPROVAL_ASK:
            return json.dumps({"approve": approve(i, aspect)})
        return f"CRITIQUE of cand-{i} on {aspect}"

    return respond


def test_the_maslab_preset_sets_its_protocol_and_explicit_settings_win():
    config = MultiAgentVerification(preset="maslab").config
    assert (config.n, config.aspects, config.draw) == (2, MASLAB_ASPECTS, 2)
    assert (config.verification, config.verifier_temperature) == ("critique", 0.0)
    assert len(set(MASLAB_ASPECTS)) == 8 and set(MASLAB_ASPECTS) <= set(ASPECTS)
    assert MultiAgentVerification(preset="maslab", n=3, draw=1).config.n == 3
    # the command line passes every default along with --config preset=maslab
    every_default = MultiAgentVerification.Config().model_dump(mode="json")
    assert MultiAgentVerification({**every_default, "preset": "maslab"}).config == config
    assert MultiAgentVerification(preset="maslab").agent_names()[-1] == "verifier_2"
    for bad in ({"preset": "nope"}, {"draw": 5}, {"preset": "maslab", "draw": 9}):
        with pytest.raises(ConfigError):
            MultiAgentVerification(**bad)


async def test_the_maslab_preset_critiques_then_approves_at_temperature_0_in_10_calls():
    model = ScriptedModel(maslab_script(lambda i, aspect: i == 2))
    ctx = Context(model, sampling={"temperature": 0.7})
    solution, ctx = await run(model, ctx, preset="maslab")
    assert len(model.calls) == ctx.usage.calls == 2 + 2 * 2 * 2 == 10
    aspects = solution.metadata["aspects"]
    assert len(aspects) == len(set(aspects)) == 2 and set(aspects) <= set(MASLAB_ASPECTS)
    verifications = [r for r in model.requests if agent_of(r).startswith("verifier")]
    critiques = [r for r in verifications if len(r.messages) == 1]
    approvals = [r for r in verifications if len(r.messages) == 3]
    assert len(critiques) == len(approvals) == 4
    for request in approvals:  # the approval call continues its own critique's conversation
        prompt, critique, ask = request.messages
        j = index_of(agent_of(request))
        (i,) = map(int, _CANDIDATE.findall(prompt["content"]))
        candidate = f"cand-{i}: The answer is 42."
        assert prompt["content"] == critique_prompt(TASK, candidate, aspects[j - 1])
        assert critique == {
            "role": "assistant",
            "content": f"CRITIQUE of cand-{i} on {aspects[j - 1]}",
        }
        assert ask == {"role": "user", "content": APPROVAL_ASK}
    assert {r.temperature for r in verifications} == {0.0}
    assert {r.temperature for r in model.requests if r not in verifications} == {0.7}
    assert solution.metadata["approvals"] == [0, 2] and solution.answer.startswith("cand-2:")
    assert solution.metadata["verdicts"] == [[False, False], [True, True]]


@pytest.mark.parametrize("native", [True, False])
async def test_the_approval_schema_is_sent_natively_where_supported(native):
    model = ScriptedModel(maslab_script(), native=["structured_output"] if native else [])
    await run(model, preset="maslab")
    for request in model.requests:
        if native and request.messages[-1]["content"] == APPROVAL_ASK:
            assert request.response_format["json_schema"]["schema"] == Approval.json_schema()
        else:
            assert request.response_format is None


async def test_the_maslab_preset_draws_its_aspects_from_the_samples_seeded_stream():
    async def drawn(seed: int) -> list[str]:
        random.seed(seed + 1000)  # the global random state must not matter
        model = ScriptedModel(maslab_script())
        solution, _ = await run(model, Context(model, seed=seed), preset="maslab")
        return solution.metadata["aspects"]

    for seed in range(3):
        expected = Context("scripted:echo", seed=seed).rng.sample(MASLAB_ASPECTS, 2)
        assert await drawn(seed) == await drawn(seed) == expected
    assert len({tuple(await drawn(seed)) for seed in range(8)}) > 1


@pytest.mark.parametrize(
    ("roles", "on_b"),
    [
        ({"verifier_2": "scripted:b"}, {"verifier_2"}),
        ({"verifier": "scripted:b"}, {"verifier_1", "verifier_2"}),
        ({"generator": "scripted:b", "verifier_1": "scripted:b"}, {"generator", "verifier_1"}),
    ],
)
async def test_model_roles_route_a_roles_calls_to_another_model(roles, on_b):
    method = get_method("mav")(n=3, aspects=["logic", "facts"])
    ctx = Context(
        "scripted:a", models=TwoModels(script), model_roles=method.check_model_roles(roles)
    )
    await method.solve(TASK, ctx)
    assert len(ctx.ledger.records) == 3 + 6
    for record in ctx.ledger.records:
        group = "generator" if record.agent.startswith("generator") else record.agent
        assert record.model == ("scripted:b" if group in on_b else "scripted:a")


def test_role_names_are_checked():
    method = MultiAgentVerification(n=2, aspects=["logic", "facts"])
    method.check_model_roles({"generator_2": "scripted:echo", "verifier_2": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'verifier_3'"):
        method.check_model_roles({"verifier_3": "scripted:echo"})


def test_each_sample_starts_afresh():
    method = MultiAgentVerification(n=2, aspects=["logic"])
    first = method.run(TASK, ScriptedModel(script(approve=lambda i, j: i == 2)))
    second = method.run(TASK, ScriptedModel(script(approve=lambda i, j: i == 1)))
    assert first.solution.metadata["approvals"] == [0, 1]
    assert second.solution.metadata["approvals"] == [1, 0]
    assert second.answer == "cand-1: The answer is 42."


@pytest.mark.system
def test_the_command_line_runs_mav_end_to_end(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "mav", "--benchmark", "arith", "--model", "scripted:echo",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 80 for r in results)
    mixed, verifier = tmp_path / "mixed", tmp_path / "verifier.yaml"
    verifier.write_text('".": \'{"reasoning": "fine", "approve": true}\'\n')
    code = main(
        ["run", "--method", "mav", "--benchmark", "arith", "--model", "scripted:echo",
         "--config", "n=2", "--model-role", f"verifier_1=scripted:{verifier}",
         "--limit", "1", "--out", str(mixed), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    trace = json.loads((mixed / "traces.jsonl").read_text().splitlines()[0])
    calls = [(c["agent"], c["model"]) for c in trace["calls"]]
    assert len(calls) == 2 + 2 * 4
    assert {m for a, m in calls if a == "verifier_1"} == {f"scripted:{verifier}"}
    assert {m for a, m in calls if a != "verifier_1"} == {"scripted:echo"}
    maslab = tmp_path / "maslab"
    code = main(
        ["run", "--method", "mav", "--benchmark", "arith", "--model", "scripted:echo",
         "--config", "preset=maslab", "--limit", "1", "--out", str(maslab), "--no-cache",
         "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (maslab / "results.jsonl").read_text().splitlines()]
    assert [r["usage"]["calls"] for r in results] == [10]
    recorded = json.loads((maslab / "manifest.json").read_text())["method_config"]
    assert (recorded["n"], recorded["draw"], recorded["verification"]) == (2, 2, "critique")
