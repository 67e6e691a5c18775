"""Structural tests of CoT, self-consistency, MAD and Exchange-of-Thought with scripted models."""

from __future__ import annotations

import itertools
import json

import orjson
import pytest
from helpers import TASK, TwoModels, agent_of

from maslab.cli import main
from maslab.core.answers import extract_answer
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods import mad, self_consistency  # noqa: F401  (importing registers them)
from maslab.methods.cot import cot_prompt
from maslab.methods.exchange_of_thought import PERSONAS, confidence
from maslab.methods.self_consistency import SelfConsistency


def numbered(template="reply-{n}: The answer is {n}."):
    """Every call gets a distinct, traceable reply (and a distinct answer)."""
    counter = itertools.count(1)
    return lambda request: template.format(n=next(counter))


def prompts_of(ctx, agent):
    return {r.round: r.messages[-1]["content"] for r in ctx.ledger.records if r.agent == agent}


# --- CoT ------------------------------------------------------------------------------------


async def test_cot_is_one_call_with_a_step_by_step_instruction():
    model = ScriptedModel(["6 * 7 = 42. The answer is 42."])
    solution = await get_method("cot")().solve(TASK, Context(model))
    prompt = last_user_message(model.calls[0].request)
    assert prompt.startswith(TASK.prompt()) and "step by step" in prompt
    assert solution.answer == "6 * 7 = 42. The answer is 42."
    model.assert_consumed()


# --- Self-consistency -----------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 5])
async def test_self_consistency_draws_k_independent_samples_of_one_prompt(k):
    model = ScriptedModel(numbered())
    ctx = Context(model)
    await get_method("self_consistency")(k=k).solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == k
    assert {last_user_message(c.request) for c in model.calls} == {cot_prompt(TASK)}
    # each sample draws from its own stream, so no two requests share a cache key
    assert len({(c.request.scope, c.request.draw) for c in model.calls}) == k


async def test_self_consistency_samples_run_concurrently_and_default_to_five():
    model = ScriptedModel(numbered(), latency=0.05)
    await get_method("self_consistency")().solve(TASK, Context(model))
    assert len(model.calls) == 5
    assert max(c.started for c in model.calls) < min(c.finished for c in model.calls)


async def test_self_consistency_majority_vote_over_extracted_answers():
    replies = ["The answer is 41.", "So 42. The answer is 42.", "The answer is 40.", "It is 42."]
    model = ScriptedModel(replies)
    solution = await get_method("self_consistency")(k=4).solve(TASK, Context(model))
    assert solution.answer == "So 42. The answer is 42."
    assert solution.metadata["votes"] == {"41": 1, "42": 2, "40": 1}


async def test_self_consistency_llm_aggregation_adds_one_call():
    model = ScriptedModel(numbered())
    ctx = Context(model)
    solution = await get_method("self_consistency")(k=3, aggregate="llm").solve(TASK, ctx)
    assert len(model.calls) == 3 + 1
    assert ctx.ledger.records[-1].agent == "aggregator"
    assert solution.answer == model.calls[-1].response
    assert solution.metadata == {"aggregate": "llm"}


# --- Self-consistency: MASLab's protocol (preset=maslab) -----------------------------------


def sample_then_aggregate(request) -> str:
    """Sample i says 'sample-i: The answer is 4i.'; the aggregator says which it read."""
    agent = agent_of(request)
    if agent == "aggregator":
        return f"aggregated {len(request.messages)} turn(s): The answer is 42."
    i = int(agent.rsplit("_", 1)[1])
    return f"sample-{i}: The answer is {40 + i % 3}."


def test_self_consistency_maslab_preset_sets_its_protocol_and_explicit_settings_win():
    config = SelfConsistency(preset="maslab").config
    assert (config.k, config.prompt, config.aggregate) == (5, "raw", "llm")
    assert SelfConsistency().config.prompt == "cot"  # the paper's CoT prompt stays the default
    explicit = SelfConsistency(preset="maslab", k=3).config
    assert (explicit.k, explicit.prompt, explicit.aggregate) == (3, "raw", "llm")
    # the command line passes every default along with --config preset=maslab
    every_default = SelfConsistency.Config().model_dump(mode="json")
    assert SelfConsistency({**every_default, "preset": "maslab"}).config == config
    for bad in ({"preset": "masworks"}, {"prompt": "few_shot"}):
        with pytest.raises(ConfigError):
            SelfConsistency(**bad)


@pytest.mark.parametrize(("k", "reverse"), [(5, False), (5, True), (2, False), (1, True)])
async def test_self_consistency_maslab_preset_is_k_raw_samples_then_one_aggregator(k, reverse):
    """MASLab (self_consistency_main.py, parallel_num 5): 5 calls on the bare query, then 1
    final-decision call over the task and every solution: 6 calls."""

    def latency(request) -> float:  # the samples finish in reverse order when ``reverse``
        agent = agent_of(request)
        i = 0 if agent == "aggregator" else int(agent.rsplit("_", 1)[1])
        return 0.002 * (k - i if reverse else i)

    model = ScriptedModel(sample_then_aggregate, latency=latency)
    ctx = Context(model)
    solution = await SelfConsistency(preset="maslab", k=k).solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == k + 1  # MASLab's k = 5: 6
    samples = [r for r in ctx.ledger.records if r.agent != "aggregator"]
    assert [r.messages for r in samples] == [({"role": "user", "content": TASK.prompt()},)] * k
    (aggregator,) = [r for r in ctx.ledger.records if r.agent == "aggregator"]
    shown = aggregator.messages[-1]["content"]
    assert shown.startswith(TASK.prompt()) and len(aggregator.messages) == 1
    # every sample, in sample order whatever order they finished in
    positions = [shown.index(f"sample-{i}: The answer is {40 + i % 3}.") for i in range(1, k + 1)]
    assert positions == sorted(positions)
    assert solution.answer == "aggregated 1 turn(s): The answer is 42."
    assert solution.metadata == {"aggregate": "llm"}


async def test_self_consistency_maslab_preset_prompts_do_not_depend_on_finishing_order():
    async def seen(latency) -> tuple[list, str]:
        model = ScriptedModel(sample_then_aggregate, latency=latency)
        ctx = Context(model)
        solution = await SelfConsistency(preset="maslab").solve(TASK, ctx)
        return sorted((r.agent, repr(r.messages)) for r in ctx.ledger.records), solution.answer

    def slow_first(request) -> float:
        agent = agent_of(request)
        return 0.0 if agent == "aggregator" else 0.002 * (6 - int(agent.rsplit("_", 1)[1]))

    def slow_last(request) -> float:
        agent = agent_of(request)
        return 0.0 if agent == "aggregator" else 0.002 * int(agent.rsplit("_", 1)[1])

    assert await seen(slow_first) == await seen(slow_last)


async def test_self_consistency_maslab_preset_budget_stop_votes_over_the_samples():
    model = ScriptedModel(sample_then_aggregate)
    ctx = Context(model, budget=Budget(max_calls=5))
    solution = await SelfConsistency(preset="maslab").run_sample(TASK, ctx)
    # samples 1..5 say 41, 42, 40, 41, 42: 41 and 42 tie at two, the earlier sample wins
    assert ctx.usage.calls == 5 and "budget" in solution.metadata
    assert solution.answer == "sample-1: The answer is 41."
    assert solution.metadata["votes"] == {"41": 2, "42": 2, "40": 1}


async def test_self_consistency_maslab_preset_survives_empty_samples():
    model = ScriptedModel(lambda r: "The answer is 42." if agent_of(r) == "aggregator" else "")
    ctx = Context(model)
    solution = await SelfConsistency(preset="maslab").solve(TASK, ctx)
    assert len(model.calls) == 6 and solution.answer == "The answer is 42."
    assert ctx.ledger.records[-1].messages[-1]["content"].count("--- Response") == 5


async def test_self_consistency_maslab_preset_puts_the_aggregator_on_its_own_model():
    method = SelfConsistency(preset="maslab")
    roles = method.check_model_roles({"aggregator": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: sample_then_aggregate), model_roles=roles)
    await method.solve(TASK, ctx)
    models = [(r.agent, r.model) for r in ctx.ledger.records]
    assert models[-1] == ("aggregator", "scripted:b")
    assert {m for a, m in models[:-1]} == {"scripted:a"} and len(models) == 6


# --- MAD ------------------------------------------------------------------------------------

YES = json.dumps(
    {"preference": "Yes", "supported_side": "Negative", "reason": "Six sevens.", "answer": "42"}
)
NO = json.dumps({"preference": "No", "supported_side": "", "reason": "", "answer": ""})
RULING = json.dumps({"reason": "Both agree on 42 in the end.", "answer": "\\boxed{42}"})


def mad_model(verdicts, ruling=RULING, latency=0.0):
    """Debaters give numbered arguments; the moderator's verdicts come from ``verdicts`` in
    order (the last one repeats); the judge lists candidates, then gives ``ruling``."""
    arguments = numbered("argument-{n}: The answer is {n}.")
    rounds = itertools.count()

    def respond(request):
        prompt = last_user_message(request)
        if "of the debate is over" in prompt:
            return verdicts[min(next(rounds), len(verdicts) - 1)]
        if "candidate answers" in prompt:
            return "Candidates: 1 and 2."
        if "Back to the question" in prompt:
            return ruling
        return arguments(request)

    return ScriptedModel(respond, latency=latency)


async def test_mad_stops_after_round_one_when_the_moderator_decides():
    model = mad_model([YES])
    ctx = Context(model)
    solution = await get_method("mad")().solve(TASK, ctx)
    assert len(model.calls) == 3
    assert [r.agent for r in ctx.ledger.records] == ["affirmative", "negative", "moderator"]
    assert solution.metadata["decided_by"] == "moderator" and solution.metadata["rounds"] == 1
    assert solution.answer == "Final answer:\n42" and solution.metadata["reason"] == "Six sevens."
    assert extract_answer(solution.answer, "number") == "42"


@pytest.mark.parametrize("rounds", [1, 2, 3])
async def test_mad_without_a_preference_runs_every_round_then_the_judge(rounds):
    model = mad_model([NO])
    ctx = Context(model)
    solution = await get_method("mad")(max_rounds=rounds).solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == 3 * rounds + 2
    expected = ["affirmative", "negative", "moderator"] * rounds + ["judge", "judge"]
    assert [r.agent for r in ctx.ledger.records] == expected
    assert solution.metadata["decided_by"] == "judge" and solution.metadata["judge_parsed"]
    assert extract_answer(solution.answer, "number") == "42"
    # the judge reads both sides' first-round arguments, and its second call keeps the first
    judge = [r for r in ctx.ledger.records if r.agent == "judge"]
    first = {r.agent: r.response for r in ctx.ledger.records if r.round == 1}
    assert first["affirmative"] in judge[0].messages[-1]["content"]
    assert first["negative"] in judge[0].messages[-1]["content"]
    assert judge[1].messages[-2] == {"role": "assistant", "content": "Candidates: 1 and 2."}
    assert ctx.topology is not None and set(ctx.topology.predecessors("judge")) == {
        "affirmative",
        "negative",
    }


async def test_mad_default_worst_case_is_eleven_calls():
    model = mad_model([NO])
    await get_method("mad")().solve(TASK, Context(model))
    assert len(model.calls) == 11


async def test_mad_needs_both_a_preference_and_an_answer_to_stop():
    no_answer = json.dumps({"preference": "yes", "answer": ""})
    answer_without_preference = json.dumps({"preference": "no", "answer": "41"})
    model = mad_model([no_answer, answer_without_preference, YES])
    solution = await get_method("mad")().solve(TASK, Context(model))
    assert len(model.calls) == 9
    assert solution.metadata["rounds"] == 3
    assert [v["preference"] for v in solution.metadata["verdicts"]] == [True, False, True]


async def test_mad_malformed_verdicts_mean_no_preference_and_are_recorded():
    fenced = f"Verdict:\n```json\n{YES[:-1]}, }}\n```"  # a trailing comma, inside a fence
    model = mad_model(["The negative side wins, clearly.", '{"preference": ', fenced])
    solution = await get_method("mad")().solve(TASK, Context(model))
    assert len(model.calls) == 9
    verdicts = solution.metadata["verdicts"]
    assert verdicts[:2] == [None, None] and verdicts[2]["supported_side"] == "Negative"
    assert solution.metadata["decided_by"] == "moderator"


async def test_mad_unparsable_ruling_falls_back_to_the_judges_reply():
    model = mad_model([NO], ruling="I would say 42, all things considered.")
    solution = await get_method("mad")(max_rounds=1).solve(TASK, Context(model))
    assert solution.answer == "I would say 42, all things considered."
    assert solution.metadata["judge_parsed"] is False


async def test_mad_latex_in_the_json_answer_survives_parsing():
    verdict = '{"preference": "yes", "supported_side": "affirmative", "answer": "\\boxed{42}"}'
    model = mad_model([verdict])
    solution = await get_method("mad")().solve(TASK, Context(model))
    assert solution.answer.endswith("Final answer:\n\\boxed{42}")


# Each verdict answer as a model writes it, LaTeX not JSON-escaped: strict JSON rejects the first
# five and turns the rest into control characters (\t, \f, \b, \n, \r are JSON escapes).
UNESCAPED_LATEX = [
    r"\sqrt{2}",
    r"2\pi",
    r"3 \cdot 4",
    r"\left(\frac{1}{2}\right)",
    r"(0, \infty)",
    r"5\text{ cm}",
    r"3 \times 4",
    r"\theta = \tan^{-1}(2)",
    r"\boxed{\beta}",
    r"x \neq \nu",
    r"\textbf{B} \to \rho",
]


@pytest.mark.parametrize("answer", UNESCAPED_LATEX)
async def test_mad_reads_a_verdict_with_unescaped_latex_and_stops_in_round_one(answer):
    verdict = '{"preference": "yes", "supported_side": "negative", "reason": "r", "answer": "%s"}'
    model = mad_model([verdict % answer])
    solution = await get_method("mad")().solve(TASK, Context(model))
    assert len(model.calls) == 3
    assert solution.answer == f"Final answer:\n{answer}"


async def test_mad_scores_the_decided_answer_not_a_boxed_candidate_quoted_in_the_reason():
    reason = "The affirmative's \\boxed{7} forgets a step; the negative's 12 is right."
    verdict = json.loads(YES) | {"reason": reason, "answer": "12"}
    model = mad_model([json.dumps(verdict)])
    solution = await get_method("mad")().solve(TASK, Context(model))
    assert extract_answer(solution.answer, "number") == "12"
    assert solution.metadata["reason"] == reason


async def test_mad_visibility_is_the_opponents_latest_argument_plus_own_history():
    model = mad_model([NO], latency=0.01)
    ctx = Context(model)
    await get_method("mad")(max_rounds=3).solve(TASK, ctx)
    said = {(r.agent, r.round): r.response for r in ctx.ledger.records}
    aff, neg, mod = (prompts_of(ctx, a) for a in ("affirmative", "negative", "moderator"))
    # round 1: the negative answers the affirmative's argument; the affirmative sees none
    assert said[("affirmative", 1)] in neg[1] and "argument-" not in aff[1]
    for r in (2, 3):
        # each debater sees the opponent's latest argument, not older ones
        assert said[("negative", r - 1)] in aff[r]
        assert said[("affirmative", r)] in neg[r]
        assert said[("negative", r)] not in aff[r] and said[("affirmative", r - 1)] not in neg[r]
    assert said[("negative", 1)] not in aff[3] and said[("affirmative", 1)] not in neg[3]
    for r in (1, 2, 3):
        assert said[("affirmative", r)] in mod[r] and said[("negative", r)] in mod[r]
    # own history: the affirmative's round-3 request carries its earlier arguments as turns
    last = next(r for r in ctx.ledger.records if r.agent == "affirmative" and r.round == 3)
    own = [m["content"] for m in last.messages if m["role"] == "assistant"]
    assert own == [said[("affirmative", 1)], said[("affirmative", 2)]]
    # strictly sequential: every call starts after the previous one finished
    for before, after in itertools.pairwise(model.calls):
        assert after.started >= before.finished


# --- Exchange-of-Thought --------------------------------------------------------------------

KITTY, BEN, PETER = PERSONAS
READS = {
    "memory": {KITTY: [BEN, PETER], BEN: [KITTY, PETER], PETER: [KITTY, BEN]},
    "report": {KITTY: [BEN, PETER], BEN: [KITTY], PETER: [KITTY]},
    "relay": {KITTY: [BEN], BEN: [PETER], PETER: [KITTY]},
    "debate": {KITTY: [BEN, PETER], BEN: [PETER], PETER: [BEN]},
}


@pytest.mark.parametrize("paradigm", list(READS))
async def test_eot_each_agent_sees_exactly_its_predecessors_previous_round(paradigm):
    model = ScriptedModel(numbered())  # every answer differs: they never agree
    ctx = Context(model)
    solution = await get_method("exchange_of_thought")(paradigm=paradigm, max_rounds=3).solve(
        TASK, ctx
    )
    assert len(model.calls) == 3 * (1 + 3)
    assert solution.metadata["exchange_rounds"] == 3 and not solution.metadata["agreed"]
    assert ctx.topology is not None and ctx.topology.name == paradigm
    said = {(r.agent, r.round): r.response for r in ctx.ledger.records}
    for record in ctx.ledger.records:
        prompt = record.messages[-1]["content"]
        assert record.messages[0]["content"] == PERSONAS[record.agent]  # stateless: system+user
        assert len(record.messages) == 2
        if record.round == 0:
            assert prompt == cot_prompt(TASK)
            continue
        seen = [a for a in PERSONAS if said[(a, record.round - 1)] in prompt]
        assert seen == sorted(
            [record.agent, *READS[paradigm][record.agent]], key=list(PERSONAS).index
        )
        assert not any(said[(a, r)] in prompt for a in PERSONAS for r in range(record.round - 1))
        # confidence is shown from the second exchange round on, for each friend shown
        assert prompt.count("confidence in this solution") == (
            len(READS[paradigm][record.agent]) if record.round > 1 else 0
        )


async def test_eot_stops_when_all_agents_agree():
    # round 0 disagrees, round 1 agrees on 42
    replies = ["The answer is 41.", "The answer is 42.", "The answer is 43."]
    model = ScriptedModel(replies + ["So the answer is 42."] * 3)
    ctx = Context(model)
    solution = await get_method("exchange_of_thought")().solve(TASK, ctx)
    assert len(model.calls) == 3 * 2
    assert solution.metadata["agreed"] and solution.metadata["exchange_rounds"] == 1
    assert solution.answer == "So the answer is 42."
    model.assert_consumed()


async def test_eot_initial_agreement_costs_three_calls():
    model = ScriptedModel(["The answer is 42."] * 3)
    solution = await get_method("exchange_of_thought")().solve(TASK, Context(model))
    assert len(model.calls) == 3
    assert solution.metadata["exchange_rounds"] == 0 and solution.metadata["agreed"]


async def test_eot_unparsed_answers_never_count_as_agreement():
    model = ScriptedModel(["no idea"] * 3 + ["The answer is 42."] * 3)
    solution = await get_method("exchange_of_thought")().solve(TASK, Context(model))
    assert len(model.calls) == 6 and solution.metadata["agreed"]


async def test_eot_runs_max_rounds_when_they_never_agree_then_votes():
    answers = itertools.cycle(["The answer is 42.", "The answer is 41.", "The answer is 42."])
    model = ScriptedModel(lambda request: next(answers), latency=0.01)
    ctx = Context(model)
    solution = await get_method("exchange_of_thought")().solve(TASK, ctx)
    assert len(model.calls) == 3 + 3 * 5 == 18
    assert solution.metadata["exchange_rounds"] == 5 and not solution.metadata["agreed"]
    assert solution.metadata["votes"] == {"42": 2, "41": 1}
    assert extract_answer(solution.answer, "number") == "42"
    # the three calls of a round run concurrently, rounds one after another
    for r in range(6):
        calls = model.calls[3 * r : 3 * r + 3]
        assert max(c.started for c in calls) < min(c.finished for c in calls)
        if r:
            assert min(c.started for c in calls) >= max(c.finished for c in model.calls[: 3 * r])


async def test_eot_confidence_is_the_share_of_the_most_frequent_own_answer():
    assert confidence(["42", "41", "42"]) == pytest.approx(2 / 3)
    assert confidence([None, None]) == 1.0
    # Ben always answers 7 while Kitty and Peter never repeat themselves: in round 2 Kitty reads
    # Ben's confidence 1.00 and Ben reads Kitty's 0.50 (two different answers so far)
    counter = itertools.count(1)

    def respond(request):
        if request.messages[0]["content"] == PERSONAS[BEN]:
            return "The answer is 7."
        return f"reply-{next(counter)}: The answer is {next(counter)}."

    ctx = Context(ScriptedModel(respond))
    solution = await get_method("exchange_of_thought")(paradigm="report", max_rounds=2).solve(
        TASK, ctx
    )
    round2 = {r.agent: r.messages[-1]["content"] for r in ctx.ledger.records if r.round == 2}
    assert f"{BEN}'s confidence in this solution: 1.00" in round2[KITTY]
    assert f"{KITTY}'s confidence in this solution: 0.50" in round2[BEN]
    assert solution.metadata["confidence"][BEN] == 1.0


async def test_eot_tie_goes_to_the_earliest_agent():
    replies = ["The answer is 1.", "The answer is 2.", "The answer is 3."]
    model = ScriptedModel(replies, cycle=True)
    solution = await get_method("exchange_of_thought")(max_rounds=1).solve(TASK, Context(model))
    assert solution.answer == "The answer is 1."


async def test_eot_agents_take_per_persona_models_and_sampling():
    main_model = ScriptedModel(["The answer is 42."], name="main", cycle=True)
    roles = {KITTY: "scripted:echo", PETER: {"temperature": 0.9}}
    ctx = Context(main_model, sampling={"temperature": 0.5}, model_roles=roles)
    await get_method("exchange_of_thought")(max_rounds=1).solve(TASK, ctx)
    models = {r.agent: r.model for r in ctx.ledger.records}
    assert models[BEN] == models[PETER] == "main" != models[KITTY]
    temperatures = {
        c.request.messages[0]["content"]: c.request.temperature for c in main_model.calls
    }
    assert temperatures == {PERSONAS[BEN]: 0.5, PERSONAS[PETER]: 0.9}


# --- maslab run, end to end -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cot", "self_consistency", "mad", "exchange_of_thought"])
def test_maslab_run_end_to_end_with_the_scripted_model(name, tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", name, "--benchmark", "arith", "--limit", "2", "--model",
         "scripted:echo", "--no-cache", "--quiet", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    assert len(results) == 2
    assert all(r["status"] == "ok" and r["error"] is None for r in results)


def test_self_consistency_maslab_preset_from_the_command_line(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "self_consistency", "--benchmark", "arith", "--limit", "2",
         "--model", "scripted:echo", "--config", "preset=maslab", "--no-cache", "--quiet",
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    assert [r["usage"]["calls"] for r in results] == [6, 6]
    recorded = orjson.loads((out / "manifest.json").read_bytes())["method_config"]
    assert (recorded["k"], recorded["prompt"], recorded["aggregate"]) == (5, "raw", "llm")
