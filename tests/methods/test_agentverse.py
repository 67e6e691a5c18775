"""AgentVerse with scripted models: the call formula and its bounds, who sees what, the
consensus and evaluator stops, defensive parsing, budget stops, model roles, per-task state
and the command line."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable

import pytest
from helpers import TASK, TwoModels, agent_of, method_runner, prompts_of, records_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.agentverse import (
    GENERIC_EXPERTS,
    AgentVerse,
    Recruits,
    Verdict,
    read_experts,
    read_verdict,
)

# agree(turn, round, critic index) -> whether that critic says [Agree]; turns and rounds 1-based
Agree = Callable[[int, int, int], bool]


def never(turn: int, rnd: int, critic: int) -> bool:
    return False


def always(turn: int, rnd: int, critic: int) -> bool:
    return True


def script(agree: Agree = never, pass_at: int | None = None, *, experts_json: bool = True):
    """Solutions are 'sol-i: The answer is i' (i counts solver calls from 0); critic j's review
    names the solution it saw; the evaluator passes at turn ``pass_at`` (never for None)."""
    counts: Counter[str] = Counter()
    state = {"turn": 0, "solutions": 0}

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        prompt = last_user_message(request)
        if agent == "recruiter":
            state["turn"] += 1
            counts.clear()  # critique rounds restart every turn
            t = state["turn"]
            names = [f"expert-{t}-{k}" for k in range(1, 6)]
            if experts_json:
                return json.dumps({"experts": names})
            return "Here is the team:\n" + "\n".join(f"{k}. {n}" for k, n in enumerate(names, 1))
        if agent == "solver":
            i = state["solutions"]
            state["solutions"] += 1
            return f"sol-{i}: The answer is {i}."
        if agent.startswith("critic_"):
            j = int(agent.removeprefix("critic_"))
            counts[agent] += 1
            seen = re.search(r"sol-\d+", prompt)
            text = f"review by {agent} of {seen.group(0) if seen else '?'}"
            return f"{text} [Agree]" if agree(state["turn"], counts[agent], j) else text
        if agent == "evaluator":
            ok = state["turn"] == pass_at
            return json.dumps({"correct": ok, "advice": f"advice-{state['turn']}"})
        raise AssertionError(f"unexpected agent {agent}")

    return respond


def prompt_of(record) -> str:
    return record.messages[-1]["content"]


run = method_runner(AgentVerse, TASK)


def test_defaults_are_maslabs():
    cfg = AgentVerse().config
    assert (cfg.experts, cfg.max_turns, cfg.max_criticizing_rounds) == (2, 3, 3)
    assert AgentVerse().agent_names() == ("critic_1",)
    assert AgentVerse(experts=4).agent_names() == ("critic_1", "critic_2", "critic_3")
    assert get_method("agentverse") is AgentVerse
    assert AgentVerse.roles == ("recruiter", "solver", "critic", "evaluator")
    for bad in ({"experts": 1}, {"max_turns": 0}, {"max_criticizing_rounds": 0}, {"x": 1}):
        with pytest.raises(ConfigError):
            AgentVerse(**bad)


@pytest.mark.parametrize(
    ("experts", "rounds", "turns"), [(2, 3, 3), (2, 1, 1), (3, 2, 2), (4, 3, 1), (2, 2, 4)]
)
async def test_without_consensus_or_pass_every_turn_costs_n_r_plus_3(experts, rounds, turns):
    model = ScriptedModel(script(never, None))
    solution, ctx = await run(
        model, experts=experts, max_criticizing_rounds=rounds, max_turns=turns
    )
    assert len(model.calls) == ctx.usage.calls == turns * (experts * rounds + 3)
    discussion = [*(f"critic_{j}" for j in range(1, experts)), "solver"] * rounds
    per_turn = ["recruiter", "solver", *discussion, "evaluator"]
    agents = [r.agent for r in ctx.ledger.records]
    for t in range(turns):  # concurrent critics may record in any order within a round
        chunk = agents[t * len(per_turn) : (t + 1) * len(per_turn)]
        assert sorted(chunk) == sorted(per_turn) and chunk[:2] == ["recruiter", "solver"]
        assert {r.round for r in ctx.ledger.records[t * len(per_turn) :][: len(per_turn)]} == {t}
    last = turns * (rounds + 1) - 1
    assert solution.answer == f"sol-{last}: The answer is {last}."
    assert solution.metadata["passed"] is False
    assert [log["rounds"] for log in solution.metadata["turns"]] == [rounds] * turns


@pytest.mark.parametrize(
    ("experts", "rounds", "turns", "consensus_at", "pass_at"),
    [(2, 3, 3, 1, 1), (2, 3, 3, 2, 3), (3, 3, 3, 3, 2), (4, 2, 2, 1, 2), (3, 3, 1, 2, 1)],
)
async def test_consensus_at_round_c_and_a_pass_at_turn_tau_cost_tau_times_2_plus_nc(
    experts, rounds, turns, consensus_at, pass_at
):
    def agree(turn, rnd, critic):
        return rnd >= consensus_at

    model = ScriptedModel(script(agree, pass_at))
    solution, ctx = await run(
        model, experts=experts, max_criticizing_rounds=rounds, max_turns=turns
    )
    assert ctx.usage.calls == pass_at * (2 + experts * consensus_at)
    assert solution.metadata["passed"] is True
    logs = solution.metadata["turns"]
    assert len(logs) == pass_at
    assert all(
        log["consensus"] and log["rounds"] == consensus_at and log["revisions"] == consensus_at - 1
        for log in logs
    )
    assert [log["correct"] for log in logs] == [False] * (pass_at - 1) + [True]


async def test_the_bounds_at_the_defaults_are_4_and_27():
    model = ScriptedModel(script(always, 1))
    _, ctx = await run(model)
    assert ctx.usage.calls == 4
    model = ScriptedModel(script(never, None))
    _, ctx = await run(model)
    assert ctx.usage.calls == 27


async def test_consensus_needs_every_critic_of_the_same_round():
    # critic_1 agrees in round 1 only, critic_2 in round 2 only: no consensus until round 3,
    # where both agree (MASLab's never-cleared list would block even that)
    def agree(turn, rnd, critic):
        return rnd == 3 or rnd == critic

    model = ScriptedModel(script(agree, 1))
    solution, ctx = await run(model, experts=3)
    log = solution.metadata["turns"][0]
    assert (log["rounds"], log["revisions"], log["consensus"]) == (3, 2, True)
    assert ctx.usage.calls == 1 + 1 + 3 * 2 + 2 + 1
    assert solution.answer == "sol-2: The answer is 2."


async def test_after_a_disagreement_a_later_unanimous_round_still_stops_the_discussion():
    def agree(turn, rnd, critic):
        return rnd >= 2

    model = ScriptedModel(script(agree, None))
    solution, ctx = await run(model, max_turns=1)
    assert solution.metadata["turns"][0]["consensus"] is True
    assert [r.agent for r in ctx.ledger.records] == [
        "recruiter", "solver", "critic_1", "solver", "critic_1", "evaluator"
    ]  # fmt: skip


async def test_critics_see_the_current_solution_only_and_the_solver_the_objections():
    def agree(turn, rnd, critic):
        return critic == 1  # critic_1 always agrees, critic_2 never

    model = ScriptedModel(
        script(agree, None), latency=lambda r: 0.02 if agent_of(r) == "critic_1" else 0.0
    )  # critic_1 finishes last: prompts must not follow finishing order
    _, ctx = await run(model, experts=3, max_turns=1, max_criticizing_rounds=2)
    for name in ("critic_1", "critic_2"):
        for k, record in enumerate(records_of(ctx, name)):
            prompt = prompt_of(record)
            assert len(record.messages) == 2  # its system message and this prompt only
            assert record.messages[0]["role"] == "system"
            assert f"expert-1-{int(name[-1]) + 1}" in record.messages[0]["content"]
            assert TASK.prompt() in prompt and f"sol-{k}:" in prompt
            assert "review by" not in prompt  # never another critic's review
            assert re.findall(r"sol-\d+", prompt) == [f"sol-{k}"]
    solver = records_of(ctx, "solver")
    assert "expert-1-1" in solver[0].messages[0]["content"]
    assert "sol-" not in prompt_of(solver[0])
    for k, record in enumerate(solver[1:]):
        prompt = prompt_of(record)
        assert len(record.messages) == 2 and f"sol-{k}:" in prompt
        assert f"review by critic_2 of sol-{k}" in prompt
        assert "review by critic_1" not in prompt  # an agreeing review is not passed on
    evaluator = prompt_of(records_of(ctx, "evaluator")[0])
    assert "sol-2:" in evaluator and "sol-1:" not in evaluator
    assert all(f"expert-1-{k}" in evaluator for k in (1, 2, 3))


async def test_reviews_reach_the_solver_in_critic_order_whatever_finished_first():
    model = ScriptedModel(
        script(never, None),
        latency=lambda r: {"critic_1": 0.03, "critic_2": 0.01}.get(agent_of(r), 0.0),
    )
    _, ctx = await run(model, experts=4, max_turns=1, max_criticizing_rounds=1)
    prompt = prompt_of(records_of(ctx, "solver")[1])
    places = [prompt.index(f"review by critic_{j}") for j in (1, 2, 3)]
    assert places == sorted(places)


async def test_a_failed_evaluation_feeds_its_advice_into_the_next_turn():
    model = ScriptedModel(script(always, 2))
    solution, ctx = await run(model)
    recruits = [prompt_of(r) for r in records_of(ctx, "recruiter")]
    assert "advice" not in recruits[0] and "advice-1" in recruits[1]
    drafts = [prompt_of(r) for r in records_of(ctx, "solver")]
    assert "sol-" not in drafts[0]
    assert "sol-0:" in drafts[1] and "advice-1" in drafts[1]  # the last solution and the advice
    second = records_of(ctx, "solver")[1]
    assert "expert-2-1" in second.messages[0]["content"]  # the newly recruited solver
    assert "expert-2-2" in records_of(ctx, "critic_1")[1].messages[0]["content"]
    assert solution.answer == "sol-1: The answer is 1." and len(solution.metadata["turns"]) == 2


async def test_the_evaluator_judges_the_last_turn_but_cannot_change_the_answer():
    model = ScriptedModel(script(always, None))
    solution, ctx = await run(model, max_turns=2)
    assert [r.agent for r in ctx.ledger.records][-1] == "evaluator"
    assert solution.answer == "sol-1: The answer is 1." and solution.metadata["passed"] is False


def test_expert_descriptions_are_read_defensively():
    assert read_experts('{"experts": ["a", "b", "c"]}', 2) == (["a", "b"], "json")
    assert read_experts("Team:\n1. A chemist\n2) **A physicist**\n- extra", 2) == (
        ["A chemist", "A physicist"],
        "text",
    )
    assert read_experts('{"experts": "a geologist"}', 2) == (
        ["a geologist", GENERIC_EXPERTS[0]],
        "fallback",
    )
    assert read_experts("no idea", 3) == (list(GENERIC_EXPERTS), "fallback")


def test_verdicts_are_read_defensively():
    verdict, parsed = read_verdict('Sure. {"correct": "true", "advice": "fine"}')
    assert (verdict.correct, verdict.advice, parsed) == (True, "fine", True)
    verdict, parsed = read_verdict("Correctness: 1\nResponse: the steps hold.")
    assert verdict.correct and not parsed
    verdict, parsed = read_verdict("Correctness: 0\nResponse: recheck step 2.")
    assert not verdict.correct and verdict.advice.startswith("Correctness: 0") and not parsed
    assert read_verdict('{"advice": "no flag"}')[0].correct is False
    # a reply that only repeats the shape it was shown is no pass
    verdict, parsed = read_verdict(Verdict.instructions())
    assert not verdict.correct and not parsed


async def test_garbage_replies_never_crash_and_are_recorded():
    model = ScriptedModel(["", "draft", "hmm", "", "???"], name="m")
    solution, ctx = await run(model, max_turns=1, max_criticizing_rounds=1)
    assert solution.answer == "" and ctx.usage.calls == 5
    log = solution.metadata["turns"][0]
    assert log["recruit"] == "fallback" and log["verdict_parsed"] is False
    assert log["correct"] is False and log["consensus"] is False


async def test_text_lists_of_experts_work_without_json():
    model = ScriptedModel(script(always, 1, experts_json=False))
    solution, ctx = await run(model)
    assert solution.metadata["turns"][0]["recruit"] == "text"
    assert "expert-1-1" in records_of(ctx, "solver")[0].messages[0]["content"]


@pytest.mark.parametrize("native", [True, False])
async def test_the_schemas_are_sent_natively_where_supported(native):
    model = ScriptedModel(script(always, 1), native=["structured_output"] if native else [])
    await run(model)
    formats = {agent_of(r): r.response_format for r in model.requests}
    assert formats["solver"] is None and formats["critic_1"] is None
    prompts = {agent_of(r): last_user_message(r) for r in model.requests}
    assert prompts["recruiter"].endswith(f"solution first.\n\n{Recruits.instructions()}")
    assert prompts["evaluator"].endswith(f"final answer.\n\n{Verdict.instructions()}")
    if native:
        assert formats["recruiter"]["json_schema"]["schema"] == Recruits.json_schema()
        assert formats["evaluator"]["json_schema"]["schema"] == Verdict.json_schema()
    else:
        assert formats["recruiter"] is None and formats["evaluator"] is None


async def test_a_budget_stop_returns_the_latest_solution():
    model = ScriptedModel(script(never, None))
    ctx = Context(model, budget=Budget(max_calls=2))
    solution = await AgentVerse().run_sample(TASK, ctx)
    assert solution.answer == "sol-0: The answer is 0." and "budget" in solution.metadata
    assert ctx.usage.calls == 2
    model = ScriptedModel(script(never, None))
    ctx = Context(model, budget=Budget(max_calls=4))  # recruit, draft, critique, revision
    solution = await AgentVerse().run_sample(TASK, ctx)
    assert solution.answer == "sol-1: The answer is 1." and "budget" in solution.metadata
    model = ScriptedModel(script(never, None))
    ctx = Context(model, budget=Budget(max_calls=1))
    solution = await AgentVerse().run_sample(TASK, ctx)
    assert solution.answer == "" and "budget" in solution.metadata


async def test_model_roles_route_critics_and_the_evaluator_to_another_model():
    method = get_method("agentverse")(experts=3, max_turns=1)
    roles = method.check_model_roles({"critic": "scripted:b", "evaluator": "scripted:b"})
    pool = TwoModels(lambda: script(lambda t, r, c: r == 2, 2))
    ctx = Context("scripted:a", models=pool, model_roles=roles)
    await method.solve(TASK, ctx)
    models = {r.agent: {x.model for x in records_of(ctx, r.agent)} for r in ctx.ledger.records}
    assert models == {
        "recruiter": {"scripted:a"},
        "solver": {"scripted:a"},
        "critic_1": {"scripted:b"},
        "critic_2": {"scripted:b"},
        "evaluator": {"scripted:b"},
    }
    method = get_method("agentverse")(experts=3, max_turns=1)
    roles = method.check_model_roles({"critic_2": "scripted:b"})
    pool = TwoModels(lambda: script(lambda t, r, c: r == 2, 2))
    ctx = Context("scripted:a", models=pool, model_roles=roles)
    await method.solve(TASK, ctx)
    assert {r.model for r in ctx.ledger.records if r.agent == "critic_2"} == {"scripted:b"}
    assert {r.model for r in ctx.ledger.records if r.agent != "critic_2"} == {"scripted:a"}
    with pytest.raises(ConfigError):
        method.check_model_roles({"critic_3": "scripted:b"})


def test_each_task_starts_afresh():
    method = AgentVerse()
    first = method.run(TASK, ScriptedModel(script(never, None)))
    second = method.run(TASK, ScriptedModel(script(never, None)))
    assert first.answer == second.answer
    assert first.solution.metadata == second.solution.metadata
    recruit = prompt_of(records_of(second.context, "recruiter")[0])
    draft = prompt_of(records_of(second.context, "solver")[0])
    assert "advice" not in recruit and "sol-" not in draft


def test_the_command_line_runs_agentverse_end_to_end(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "agentverse", "--benchmark", "arith", "--model", "scripted:echo",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # an echoed critique repeats the [Agree] instruction: consensus at once; the echoed
    # evaluation is no verdict: three turns of 2 + N = 4 calls
    assert len(results) == 2 and all(r["usage"]["calls"] == 12 for r in results)
    mixed, judge = tmp_path / "mixed", tmp_path / "judge.yaml"
    judge.write_text('".": \'{"correct": true, "advice": "Right."}\'\n')
    code = main(
        ["run", "--method", "agentverse", "--benchmark", "arith", "--model", "scripted:echo",
         "--model-role", f"evaluator=scripted:{judge}",
         "--limit", "1", "--out", str(mixed), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    trace = json.loads((mixed / "traces.jsonl").read_text().splitlines()[0])
    assert [(c["agent"], c["model"]) for c in trace["calls"]] == [
        ("recruiter", "scripted:echo"),
        ("solver", "scripted:echo"),
        ("critic_1", "scripted:echo"),
        ("evaluator", f"scripted:{judge}"),
    ]  # the evaluator passed the first turn


# --- MASLab's protocol (preset=maslab) ----------------------------------------------------------

ITEM = re.compile(
    r"\[(expert-\d-\d|Evaluator)\]\n(review by critic_\d of sol-\d+|sol-\d+|advice-\d)"
)


def items(prompt: str) -> list[str]:
    """The history items a prompt shows, oldest first, as 'author: item'."""
    return [f"{who}: {what}" for who, what in ITEM.findall(prompt)]


def shared_script(agree: Agree = never, pass_at: int | None = None):
    """As ``script``, but a critic's review names the last solution its prompt shows."""
    respond = script(agree, pass_at)

    def reply(request: ChatRequest) -> str:
        text = respond(request)
        if agent_of(request).startswith("critic_"):
            last = re.findall(r"sol-\d+", last_user_message(request))[-1]
            text = re.sub(r"of (sol-\d+|\?)", f"of {last}", text)
        return text

    return reply


def test_the_maslab_preset_sets_its_protocol_and_explicit_settings_win():
    config = AgentVerse(preset="maslab").config
    assert (config.experts, config.max_turns, config.max_criticizing_rounds) == (2, 3, 3)
    assert (config.context, config.solver_window, config.critic_window) == ("shared", 5, 3)
    assert AgentVerse().config.context == "current"
    explicit = AgentVerse(preset="maslab", experts=3, critic_window=1).config
    assert (explicit.experts, explicit.critic_window, explicit.context) == (3, 1, "shared")
    every_default = AgentVerse.Config().model_dump(mode="json")
    assert AgentVerse({**every_default, "preset": "maslab"}).config == config
    for bad in ({"preset": "nope"}, {"context": "all"}, {"solver_window": 0}):
        with pytest.raises(ConfigError):
            AgentVerse(**bad)


async def test_the_maslab_preset_costs_maslabs_27_calls_at_most():
    model = ScriptedModel(shared_script(never, None))
    solution, ctx = await run(model, preset="maslab")
    # MASLab's agentverse_main.py at cnt_agents 2, max_turn 3, max_criticizing_rounds 3: per
    # turn a role assignment, a draft, 3 x (1 critic + 1 revision), an evaluation: 9; x 3 = 27
    assert len(model.calls) == ctx.usage.calls == (1 + 1 + 3 * (1 + 1) + 1) * 3 == 27
    assert solution.answer == "sol-11: The answer is 11."
    model = ScriptedModel(shared_script(always, 1))
    _, ctx = await run(model, preset="maslab")
    assert ctx.usage.calls == 1 + 1 + 1 + 1  # consensus at once, passed at once: 4
    # a disagreement, then agreement: the discussion ends (MASLab's never-cleared list of
    # disagreeing reviews would run all three rounds: 9 calls a turn)
    model = ScriptedModel(shared_script(lambda turn, rnd, critic: rnd >= 2, None))
    solution, ctx = await run(model, preset="maslab")
    assert ctx.usage.calls == 3 * (1 + 1 + 1 + 1 + 1 + 1) == 18
    assert all(log["consensus"] and log["rounds"] == 2 for log in solution.metadata["turns"])


async def test_the_shared_context_shows_the_last_5_and_3_history_items():
    model = ScriptedModel(shared_script(never, None))
    _, ctx = await run(model, preset="maslab", max_turns=2)
    solver = [items(prompt_of(r)) for r in records_of(ctx, "solver")]
    critic = [items(prompt_of(r)) for r in records_of(ctx, "critic_1")]
    s = [f"expert-1-1: sol-{i}" for i in range(4)] + ["expert-2-1: sol-4"]
    rv = [f"expert-1-2: review by critic_1 of sol-{i}" for i in range(3)]
    advice = "Evaluator: advice-1"
    assert solver[:4] == [
        [],  # the first draft: no history yet
        [s[0], rv[0]],
        [s[0], rv[0], s[1], rv[1]],
        [rv[0], s[1], rv[1], s[2], rv[2]],  # the last 5
    ]
    assert critic[:3] == [[s[0]], [s[0], rv[0], s[1]], [s[1], rv[1], s[2]]]  # the last 3
    # the next turn's draft reads the last 5 items, the evaluator's advice last
    assert solver[4] == [rv[1], s[2], rv[2], "expert-1-1: sol-3", advice]
    assert critic[3] == ["expert-1-1: sol-3", advice, s[4]]
    assert all(items(p) == [] for p in prompts_of(ctx, "recruiter"))
    assert "advice-1" in prompts_of(ctx, "recruiter")[1]


async def test_the_shared_context_does_not_depend_on_completion_order():
    outcomes = []
    for slow in ("critic_1", "critic_2"):
        model = ScriptedModel(
            shared_script(never, None), latency=lambda r, slow=slow: 0.01 * (agent_of(r) == slow)
        )
        solution, ctx = await run(model, preset="maslab", experts=3, max_turns=1)
        calls = sorted((r.agent, repr(r.messages)) for r in ctx.ledger.records)
        outcomes.append((calls, solution.answer))
        revision = items(prompt_of(records_of(ctx, "solver")[1]))
        assert revision == [
            "expert-1-1: sol-0",
            "expert-1-2: review by critic_1 of sol-0",
            "expert-1-3: review by critic_2 of sol-0",
        ]  # in critic order, whichever finished first
    assert outcomes[0] == outcomes[1]


async def test_the_maslab_preset_routes_roles_to_other_models():
    method = AgentVerse(preset="maslab", experts=3, max_turns=1)
    roles = method.check_model_roles({"critic_2": "scripted:b", "solver": "scripted:b"})
    ctx = Context(
        "scripted:a", models=TwoModels(lambda: shared_script(never, None)), model_roles=roles
    )
    await method.solve(TASK, ctx)
    on_b = {r.agent for r in ctx.ledger.records if r.model == "scripted:b"}
    assert on_b == {"critic_2", "solver"}


async def test_the_maslab_preset_budget_stop_returns_the_latest_solution():
    model = ScriptedModel(shared_script(never, None))
    ctx = Context(model, budget=Budget(max_calls=6))  # recruit, draft, 2 x (critique, revision)
    solution = await AgentVerse(preset="maslab").run_sample(TASK, ctx)
    assert solution.answer == "sol-2: The answer is 2." and "budget" in solution.metadata


def test_the_maslab_preset_runs_on_the_command_line(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "agentverse", "--benchmark", "arith", "--model", "scripted:echo",
         "--config", "preset=maslab", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # an echoed critique repeats the [Agree] instruction and no echo is a verdict: 3 x 4 calls
    assert len(results) == 2 and all(r["usage"]["calls"] == 12 for r in results)


async def test_the_maslab_preset_survives_garbage_replies():
    model = ScriptedModel(["", "", "", "", "not a verdict"] * 3, name="m")
    solution, ctx = await run(model, preset="maslab", max_criticizing_rounds=1)
    assert ctx.usage.calls == 3 * 5 and solution.answer == ""
    assert [log["recruit"] for log in solution.metadata["turns"]] == ["fallback"] * 3
    later_draft = prompt_of(records_of(ctx, "solver")[2])  # turn 2's draft reads the history
    assert "[Evaluator]\nnot a verdict" in later_draft and f"[{GENERIC_EXPERTS[0]}]" in later_draft
