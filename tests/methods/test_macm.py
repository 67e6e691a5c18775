"""MACM (arXiv 2404.04735) with scripted models: the call formula, who sees what (conditions,
verdicts, the plan, the Executor's conversation), the vote and its tie-break attempts, garbage
replies, budget stops, completion order, model roles and the command line."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable

import pytest
from helpers import TASK, TwoModels, agent_of, method_runner, prompts_of, records_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.kit.plans import Plan
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.macm import (
    DEFAULT_OBJECTIVE,
    DEFAULT_STEP,
    EXECUTOR_SYSTEM,
    MACM,
    Analysis,
    NewCondition,
    Sufficiency,
    Verdict,
    analysis_prompt,
    check_prompt,
    execute_prompt,
    final_prompt,
    plan_prompt,
    propose_prompt,
    sufficiency_prompt,
)

STATEMENT = re.compile(r"Statement:\nFrom known conditions 1, 2: C(\d+)\.(\d+)\n")

Accept = Callable[[int, int, int], bool]  # attempt, round, check (1-based) -> verdict
Enough = Callable[[int, int], bool]  # attempt, round -> sufficient


def index_of(agent: str) -> int:
    return int(agent.rsplit("_", 1)[1])


def asks(prompt: str, reply: type) -> bool:
    return prompt.endswith(reply.instructions())


def script(
    answer: Callable[[int], object] = lambda a: 42,
    accept: Accept = lambda a, r, c: True,
    enough: Enough = lambda a, r: False,
) -> Callable[[ChatRequest], str]:
    """Attempt a: the Thinker gives conditions G<a>.1, G<a>.2 and objective OBJ<a>, proposes
    C<a>.<r> in round r and plans S<a>.1, S<a>.2; the Judge's check c of C<a>.<r> says
    ``accept(a, r, c)`` and its round-r sufficiency check ``enough(a, r)``; the Executor works
    ('WORK<a>') and answers ``answer(a)``."""
    count: dict[tuple[str, ...], int] = defaultdict(int)

    def respond(request: ChatRequest) -> str:
        agent, prompt = agent_of(request), last_user_message(request)
        a = index_of(agent)
        if asks(prompt, Analysis):
            return json.dumps({"conditions": [f"G{a}.1", f"G{a}.2"], "objective": f"OBJ{a}"})
        if asks(prompt, NewCondition):
            count[agent, "proposal"] += 1
            r = count[agent, "proposal"]
            return json.dumps({"based_on": "1, 2", "reason": f"R{a}.{r}", "condition": f"C{a}.{r}"})
        if asks(prompt, Plan):
            return json.dumps({"steps": [f"S{a}.1", f"S{a}.2"]})
        if asks(prompt, Verdict):
            (shown, r) = map(int, STATEMENT.search(prompt).groups())
            assert shown == a  # a Judge checks its own attempt's proposal
            count[agent, "check", str(r)] += 1
            correct = accept(a, r, count[agent, "check", str(r)])
            return json.dumps({"reasoning": "redone", "correct": correct})
        if asks(prompt, Sufficiency):
            count[agent, "enough"] += 1
            sufficient = enough(a, count[agent, "enough"])
            return json.dumps({"reasoning": "so", "sufficient": sufficient})
        assert agent.startswith("executor_")
        if len(request.messages) == 2:
            return f"WORK{a}"
        return f"The answer is {answer(a)}."

    return respond


def expected_calls(rounds: int, checks: int, voters: int, accept: Accept, enough: Enough) -> int:
    """The docstring's formula: per attempt 4 + Σ_{i≤k} (2 + j_i)."""
    total = 0
    for a in range(1, voters + 1):
        total += 4
        for r in range(1, rounds + 1):
            j = next((c for c in range(1, checks + 1) if not accept(a, r, c)), checks)
            total += 2 + j
            if enough(a, r):
                break
    return total


run = method_runner(MACM, TASK)


def test_defaults_names_and_structure():
    method = MACM()
    assert get_method("macm") is MACM
    config = method.config
    assert (config.mining_rounds, config.checks, config.min_voters, config.max_voters) == (
        5, 1, 5, 7,
    )  # fmt: skip
    small = MACM(min_voters=1, max_voters=2)
    assert small.agent_names() == (
        "thinker_1", "thinker_2", "judge_1", "judge_2", "executor_1", "executor_2",
    )  # fmt: skip
    assert sorted(small.structure().edges) == sorted([
        ("thinker_1", "judge_1"), ("judge_1", "thinker_1"), ("thinker_1", "executor_1"),
        ("thinker_2", "judge_2"), ("judge_2", "thinker_2"), ("thinker_2", "executor_2"),
    ])  # fmt: skip
    for bad in ({"mining_rounds": 0}, {"checks": 0}, {"min_voters": 0}, {"min_voters": 8}):
        with pytest.raises(ConfigError):
            MACM(**bad)


async def test_solve_sets_the_declared_structure():
    method = MACM(min_voters=2, max_voters=3)
    ctx = Context(ScriptedModel(["unused"]), budget=Budget(max_calls=0))
    solution = await method.run_sample(TASK, ctx)  # stops at the first call
    assert ctx.topology is not None and solution.answer == ""
    assert ctx.topology.to_dict() == method.structure().to_dict()
    assert set(ctx.topology.nodes) == set(method.agent_names())


CASES = [
    # (config, accept, enough, calls by hand)
    ({"min_voters": 1, "max_voters": 1}, lambda a, r, c: True, lambda a, r: False, 4 + 5 * 3),
    ({"min_voters": 1, "max_voters": 1}, lambda a, r, c: True, lambda a, r: True, 7),
    (
        {"mining_rounds": 3, "checks": 2, "min_voters": 2, "max_voters": 2},
        lambda a, r, c: True,
        lambda a, r: r == 2,
        2 * (4 + 2 * 4),
    ),
    (  # round 1: check 2 rejects; round 2: all 3 pass; attempt 1 is sufficient at round 3
        {"mining_rounds": 4, "checks": 3, "min_voters": 2, "max_voters": 3},
        lambda a, r, c: not (r == 1 and c == 2),
        lambda a, r: a == 1 and r == 3,
        (4 + 4 + 5 + 5) + (4 + 4 + 5 + 5 + 5),
    ),
    ({}, lambda a, r, c: True, lambda a, r: r == 1, 5 * 7),  # the default's least: 35
]


@pytest.mark.parametrize(("config", "accept", "enough", "calls"), CASES)
async def test_calls_follow_the_formula(config, accept, enough, calls):
    model = ScriptedModel(script(accept=accept, enough=enough))
    solution, ctx = await run(model, **config)
    cfg = MACM(**config).config
    voters = cfg.min_voters  # every attempt answers 42: no tie
    formula = expected_calls(cfg.mining_rounds, cfg.checks, voters, accept, enough)
    assert len(model.calls) == ctx.usage.calls == formula == calls
    assert solution.metadata["voters"] == voters and not solution.metadata["tied"]
    assert solution.answer == "The answer is 42." and solution.metadata["unreadable"] == 0


async def test_the_default_at_most_is_133_calls_when_the_vote_stays_tied():
    answers = {1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3, 7: 4}
    model = ScriptedModel(script(answer=answers.get))
    solution, _ = await run(model)
    assert len(model.calls) == 7 * (4 + 5 * 3) == 133
    assert solution.metadata["voters"] == 7 and solution.metadata["tied"]
    assert solution.metadata["votes"] == {"1": 2, "2": 2, "3": 2, "4": 1}
    assert solution.answer == "The answer is 1."  # still tied at V_max: the earliest


async def test_a_tie_adds_attempts_one_at_a_time_until_it_breaks():
    answers = {1: 5, 2: 5, 3: 7, 4: 7, 5: 9, 6: 7}
    model = ScriptedModel(script(answer=answers.get, enough=lambda a, r: True))
    solution, ctx = await run(model)
    assert solution.answer == "The answer is 7." and solution.metadata["voters"] == 6
    assert solution.metadata["votes"] == {"5": 2, "7": 3, "9": 1}
    assert len(model.calls) == 6 * 7 and not records_of(ctx, "thinker_7")
    # the sixth attempt starts only after the first five have answered
    first_five_done = max(c.finished for c in model.calls if index_of(agent_of(c.request)) <= 5)
    sixth = [c for c in model.calls if agent_of(c.request).endswith("_6")]
    assert min(c.started for c in sixth) >= first_five_done
    # no tie: no extra attempt
    model = ScriptedModel(script(answer={1: 5, 2: 5, 3: 7, 4: 9, 5: 1}.get))
    solution, _ = await run(model)
    assert solution.metadata["voters"] == 5 and solution.answer == "The answer is 5."


async def test_who_sees_what():
    # round 1 accepted, round 2 rejected, round 3 accepted, never sufficient
    model = ScriptedModel(script(accept=lambda a, r, c: r != 2))
    solution, ctx = await run(model, mining_rounds=3, min_voters=2, max_voters=2)
    given = ["G1.1", "G1.2"]
    lists = [given, [*given, "C1.1"], [*given, "C1.1"]]  # the known conditions of each round
    final = [*given, "C1.1", "C1.3"]

    def proposal(r: int) -> NewCondition:
        return NewCondition(based_on="1, 2", reason=f"R1.{r}", condition=f"C1.{r}")

    thinker = prompts_of(ctx, "thinker_1")
    assert thinker == [
        f"{analysis_prompt(TASK)}\n\n{Analysis.instructions()}",
        *(f"{propose_prompt(known, 'OBJ1')}\n\n{NewCondition.instructions()}" for known in lists),
        f"{plan_prompt(final, 'OBJ1')}\n\n{Plan.instructions()}",
    ]
    assert TASK.question in thinker[0] and TASK.instruction not in thinker[0]
    assert all(TASK.question not in p for p in thinker[1:])  # after the analysis: conditions
    checks = [f"{check_prompt(lists[r - 1], proposal(r))}\n\n{Verdict.instructions()}"
              for r in (1, 2, 3)]  # fmt: skip
    after = [[*given, "C1.1"], [*given, "C1.1"], final]  # with the round's accepted condition
    enough = [f"{sufficiency_prompt(k, 'OBJ1')}\n\n{Sufficiency.instructions()}" for k in after]
    assert prompts_of(ctx, "judge_1") == [checks[0], enough[0], checks[1], enough[1],
                                          checks[2], enough[2]]  # fmt: skip
    assert "Reason given: R1.2" in checks[1]
    # Thinker and Judge calls are fresh conversations; the Executor's two are one
    for record in ctx.ledger.records:
        if not record.agent.startswith("executor"):
            assert [m["role"] for m in record.messages] == ["system", "user"]
    work, answer = records_of(ctx, "executor_1")
    worked = execute_prompt(final, "OBJ1", ["S1.1", "S1.2"])
    assert list(work.messages) == [
        {"role": "system", "content": EXECUTOR_SYSTEM},
        {"role": "user", "content": worked},
    ]
    assert list(answer.messages) == [
        *work.messages,
        {"role": "assistant", "content": "WORK1"},
        {"role": "user", "content": final_prompt(TASK)},
    ]
    assert TASK.instruction in final_prompt(TASK) and TASK.question not in worked
    # an attempt never sees another's conditions
    for record in ctx.ledger.records:
        other = "1" if record.agent.endswith("_2") else "2"
        assert all(f"{tag}{other}." not in repr(record.messages) for tag in "GCS")
    first = solution.metadata["attempts"][0]
    assert first["given"] == given and first["added"] == ["C1.1", "C1.3"]
    assert [r["verdicts"] for r in first["rounds"]] == [[True], [False], [True]]
    assert [r["accepted"] for r in first["rounds"]] == [True, False, True]
    assert first["steps"] == ["S1.1", "S1.2"] and first["objective"] == "OBJ1"


async def test_the_first_rejection_ends_the_checks_and_sufficiency_ends_mining():
    accept: Accept = lambda a, r, c: c != 2  # noqa: E731
    model = ScriptedModel(script(accept=accept, enough=lambda a, r: r == 2))
    solution, ctx = await run(model, checks=3, min_voters=1, max_voters=1)
    rounds = solution.metadata["attempts"][0]["rounds"]
    assert [r["verdicts"] for r in rounds] == [[True, False], [True, False]]
    assert [r["sufficient"] for r in rounds] == [False, True]
    assert solution.metadata["attempts"][0]["added"] == []
    assert len(records_of(ctx, "judge_1")) == 2 * (2 + 1)


async def test_options_reach_the_thinker_and_the_final_answer_format_only():
    task = Task(
        id="c1",
        question="Which is 6 * 7?",
        choices=("41", "42"),
        answer_type="choice",
        instruction="Answer with the letter.",
    )
    model = ScriptedModel(script(answer=lambda a: "(B)", enough=lambda a, r: True))
    solution, ctx = await run(model, task=task, min_voters=1, max_voters=1)
    analysis = prompts_of(ctx, "thinker_1")[0]
    assert "(A) 41\n(B) 42" in analysis and "Answer with the letter." not in analysis
    asked = prompts_of(ctx, "executor_1")[1]
    assert asked == final_prompt(task)
    assert "(A) 41\n(B) 42" in asked and "Answer with the letter." in asked
    assert "Which is 6 * 7?" not in asked
    assert solution.metadata["extracted"] == ["B"]


async def test_garbage_replies_take_the_documented_fallbacks():
    def respond(request: ChatRequest) -> str:
        prompt = last_user_message(request)
        if asks(prompt, Analysis):
            return "I would rather not use JSON."
        if asks(prompt, NewCondition):
            return '{"based_on": "1", "reason": "r", "condition": "C"}'
        if asks(prompt, Verdict):
            return '{"reasoning": "hmm", "correct": '  # cut off
        if asks(prompt, Sufficiency):
            return "maybe"
        if asks(prompt, Plan):
            return "First think, then compute."
        if len(request.messages) == 2:
            return "6 * 7 = 42, so the answer is 42."
        return ""  # an empty final answer

    model = ScriptedModel(respond)
    solution, ctx = await run(model, mining_rounds=2, min_voters=1, max_voters=1)
    attempt = solution.metadata["attempts"][0]
    assert attempt["given"] == [TASK.question] and attempt["objective"] == DEFAULT_OBJECTIVE
    assert (
        attempt["rounds"]
        == [{"proposal": "C", "verdicts": [None], "accepted": False, "sufficient": None}] * 2
    )  # an unreadable verdict rejects, an unreadable sufficiency continues mining
    assert attempt["added"] == [] and attempt["steps"] == [DEFAULT_STEP]
    assert attempt["unreadable"] == [
        "analysis", "verdict 1", "sufficiency 1", "verdict 2", "sufficiency 2", "plan", "answer",
    ]  # fmt: skip
    assert solution.answer == "6 * 7 = 42, so the answer is 42."  # the worked text's answer
    assert solution.metadata["unreadable"] == 7
    assert len(model.calls) == 4 + 2 * 3
    executor = prompts_of(ctx, "executor_1")[0]
    assert execute_prompt([TASK.question], DEFAULT_OBJECTIVE, [DEFAULT_STEP]) == executor


async def test_empty_replies_everywhere_do_not_crash():
    model = ScriptedModel(lambda request: "")
    solution, ctx = await run(model, mining_rounds=3, min_voters=2, max_voters=3)
    # an unreadable proposal is discarded unjudged: 4 + 3 * 2 per attempt, no tie to break
    assert len(model.calls) == 2 * (4 + 3 * 2)
    assert solution.answer == "" and solution.metadata["voters"] == 2
    attempt = solution.metadata["attempts"][1]
    assert [r["proposal"] for r in attempt["rounds"]] == [None] * 3
    assert attempt["unreadable"][:3] == ["analysis", "proposal 1", "sufficiency 1"]
    assert not any(asks(p, Verdict) for p in prompts_of(ctx, "judge_1"))


@pytest.mark.parametrize(
    ("max_calls", "answer"),
    [
        (8, ""),  # stopped before the Executor worked: no answer yet
        (9, "WORK1: The answer is 41."),  # the worked text stands in for the final answer
        (10, "The answer is 42."),
    ],
)
async def test_a_budget_stop_answers_with_the_vote_so_far(max_calls, answer):
    def respond(request: ChatRequest) -> str:
        said = script()(request)
        return "WORK1: The answer is 41." if said == "WORK1" else said

    model = ScriptedModel(respond)
    ctx = Context(model, budget=Budget(max_calls=max_calls))
    method = MACM(mining_rounds=2, min_voters=1, max_voters=1)  # 4 + 2 * 3 = 10 calls
    solution = await method.run_sample(TASK, ctx)
    assert solution.answer == answer and ctx.usage.calls == max_calls
    assert (ctx.budget_stop is not None) == (max_calls < 10)


async def test_a_budget_stop_votes_over_the_attempts_that_answered():
    answers = {1: 5, 2: 8, 3: 8}

    def latency(request: ChatRequest) -> float:  # attempt 2 answers first, attempt 3 last
        return {1: 0.005, 2: 0.0, 3: 0.05}[index_of(agent_of(request))]

    model = ScriptedModel(script(answer=answers.get, enough=lambda a, r: True), latency=latency)
    ctx = Context(model, budget=Budget(max_calls=2 * 7 + 3))
    method = MACM(min_voters=3, max_voters=3)
    solution = await method.run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and not records_of(ctx, "executor_3")
    assert solution.answer == "The answer is 5."  # 5 against 8: attempt 1 is the earliest
    assert solution.metadata["attempts"] == [1, 2]
    model = ScriptedModel(script(answer=answers.get, enough=lambda a, r: True))
    solution, _ = await run(model, min_voters=3, max_voters=3)
    assert solution.answer == "The answer is 8."  # unstopped, attempt 3 decides


async def test_prompts_and_answer_do_not_depend_on_completion_order():
    answers = {1: 5, 2: 7, 3: 9, 4: 7}  # a three-way tie, broken by attempt 4

    def slow_first(request: ChatRequest) -> float:
        return 0.002 * (4 - index_of(agent_of(request)))

    def slow_last(request: ChatRequest) -> float:
        return 0.002 * index_of(agent_of(request))

    seen = []
    for latency in (slow_first, slow_last):
        accept: Accept = lambda a, r, c: (a + r) % 2 == 0  # noqa: E731
        model = ScriptedModel(
            script(answer=answers.get, accept=accept, enough=lambda a, r: r == a), latency=latency
        )
        solution, ctx = await run(model, mining_rounds=3, min_voters=3, max_voters=4)
        seen.append(
            (
                solution.answer,
                solution.metadata,
                sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records),
            )
        )
    assert seen[0] == seen[1]
    assert seen[0][0] == "The answer is 7." and seen[0][1]["voters"] == 4


@pytest.mark.parametrize("native", [True, False])
async def test_json_replies_are_asked_natively_where_supported(native):
    model = ScriptedModel(script(enough=lambda a, r: True), native=["structured_output"] * native)
    await run(model, min_voters=1, max_voters=1)
    schemas = [
        r.response_format["json_schema"]["schema"] if r.response_format else None
        for r in model.requests
    ]
    expected = [Analysis, NewCondition, Verdict, Sufficiency, Plan]
    assert schemas == [*(m.json_schema() if native else None for m in expected), None, None]


@pytest.mark.parametrize(
    ("roles", "on_b"),
    [
        ({"judge": "scripted:b"}, {"judge_1", "judge_2"}),
        ({"executor_2": "scripted:b"}, {"executor_2"}),
        ({"thinker": "scripted:b", "executor_1": "scripted:b"},
         {"thinker_1", "thinker_2", "executor_1"}),
    ],
)  # fmt: skip
async def test_model_roles_put_each_role_or_agent_on_its_own_model(roles, on_b):
    method = get_method("macm")(mining_rounds=2, min_voters=2, max_voters=2)
    ctx = Context(
        "scripted:a", models=TwoModels(script), model_roles=method.check_model_roles(roles)
    )
    solution = await method.solve(TASK, ctx)
    assert len(ctx.ledger.records) == 2 * (4 + 2 * 3)
    assert solution.answer == "The answer is 42."
    for record in ctx.ledger.records:
        assert record.model == ("scripted:b" if record.agent in on_b else "scripted:a")
    with pytest.raises(ConfigError, match="no role or agent 'judge_3'"):
        method.check_model_roles({"judge_3": "scripted:b"})


@pytest.mark.system
def test_the_command_line_runs_macm_on_gsm8k(tmp_path):
    data, answers, out = tmp_path / "gsm8k.jsonl", tmp_path / "macm.yaml", tmp_path / "run"
    rows = [
        {"question": "Tom has 3 boxes of 6 pencils. How many pencils?", "answer": "#### 18"},
        {"question": "Maria reads 15 pages a day. How many in 6 days?", "answer": "#### 90"},
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    replies = {
        "set out its conditions": '{"conditions": ["given"], "objective": "asked"}',
        "Derive one new condition": '{"based_on": "1", "reason": "r", "condition": "new"}',
        "Check carefully": '{"reasoning": "ok", "correct": true}',
        "Decide whether the objective": '{"reasoning": "ok", "sufficient": true}',
        "Design one solution": '{"steps": ["compute"]}',
        "Carry out the steps": "Worked.",
        "final answer": "The answer is 18.",
    }
    answers.write_text(json.dumps(replies))
    code = main(
        ["run", "--method", "macm", "--benchmark", "gsm8k", "--data", str(data),
         "--model", f"scripted:{answers}", "--limit", "2", "--out", str(out), "--no-cache",
         "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["usage"]["calls"] for r in results] == [5 * 7, 5 * 7]
    assert [r["score"]["correct"] for r in results] == [True, False]
    trace = json.loads((out / "traces.jsonl").read_text().splitlines()[0])
    assert {c["agent"] for c in trace["calls"]} == {
        f"{role}_{a}" for role in ("thinker", "judge", "executor") for a in range(1, 6)
    }
