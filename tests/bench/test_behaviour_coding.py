"""behaviour_coding: the base verdict, two judges' per-message codes, their agreement (kappa)."""

from __future__ import annotations

import json
import re

import orjson
import pytest

from maslab.analysis.run_result import load_run
from maslab.api import run_config
from maslab.bench.evaluation import Score, get_evaluator
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.evaluators.behaviour_coding import (
    BEHAVIOURS,
    BehaviourCodingEvaluator,
    behaviour_agreement,
    format_behaviour_agreement,
    read_codes,
)
from maslab.evaluators.numeric import NumericEvaluator
from maslab.harness.runner import Runner
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.free_discussion import FreeDiscussion
from maslab.store.run_store import ResultRecord

TASK = Task(id="t1", question="What is 6 * 7?", gold="42", answer_type="number")
ALL_FALSE = dict.fromkeys(BEHAVIOURS, False)


def codes(*flags: str) -> dict[str, bool]:
    return {**ALL_FALSE, **dict.fromkeys(flags, True)}


def coded_message(request: ChatRequest) -> str:
    """The text of the message a judge is asked to code."""
    pattern = r"The message to code, from \S+:\n\n(.*?)\n\nCode only"
    return re.search(pattern, last_user_message(request), re.S)[1]


async def discuss(replies: list[str]) -> Context:
    """A 3-agent, 1-round free discussion whose turns say ``replies``."""
    ctx = Context(ScriptedModel(replies))
    await FreeDiscussion(rounds=1).solve(TASK, ctx)
    return ctx


def test_it_is_registered_and_checks_its_options():
    assert get_evaluator("behaviour_coding") is BehaviourCodingEvaluator
    judge = ScriptedModel()
    with pytest.raises(ConfigError, match="base must be another evaluator"):
        BehaviourCodingEvaluator(judge_a=judge, judge_b=judge, base="behaviour_coding")
    with pytest.raises(ConfigError, match="not for numeric"):
        BehaviourCodingEvaluator(judge_a=judge, judge_b=judge, judge=judge)
    with pytest.raises(ConfigError, match="llm_judge needs a judge model"):
        BehaviourCodingEvaluator(judge_a=judge, judge_b=judge, base="llm_judge")
    assert isinstance(BehaviourCodingEvaluator(judge_a=judge, judge_b=judge).base, NumericEvaluator)


def test_read_codes_takes_six_booleans_or_nothing():
    full = json.dumps(codes("challenges", "asks_question"))
    assert read_codes(f"Here you go:\n```json\n{full}\n```") == codes("challenges", "asks_question")
    assert read_codes(json.dumps({**ALL_FALSE, "synthesizes": "true"})) == codes("synthesizes")
    maybe = json.dumps({**ALL_FALSE, "coordinates": "maybe"})
    for garbage in ("", "no idea", "{", json.dumps({"challenges": True}), maybe, "[true]"):
        assert read_codes(garbage) is None


async def test_every_message_is_coded_by_both_judges_as_scoring_and_the_verdict_is_the_bases():
    ctx = await discuss(["I say 41.", "Are you sure? The answer is 42.", "Agreed, 42."])
    judge_a = ScriptedModel(lambda r: json.dumps(codes("proposes_solution")))
    judge_b = ScriptedModel(
        lambda r: json.dumps(
            codes("challenges", "asks_question")
            if "sure" in coded_message(r)
            else codes("proposes_solution")
        )
    )
    evaluator = BehaviourCodingEvaluator(judge_a=judge_a, judge_b=judge_b)
    answer = "Agreed, the answer is 42."
    score = await evaluator.score(TASK, answer, ctx=ctx)
    base = await NumericEvaluator().score(TASK, answer)
    kept = {k: v for k, v in score.details.items() if k != "behaviour"}  # the base's details
    assert score.model_copy(update={"details": kept}) == base and score.correct

    assert len(judge_a.calls) == len(judge_b.calls) == 3  # one per message per judge
    scoring = [r for r in ctx.ledger.records if r.purpose == "scoring"]
    assert sorted(r.agent for r in scoring) == ["judge_a"] * 3 + ["judge_b"] * 3
    assert ctx.usage.calls == 3 and ctx.ledger.totals(purpose="scoring").calls == 6
    assert all(c.request.temperature == 0 for c in judge_a.calls + judge_b.calls)

    behaviour = score.details["behaviour"]
    assert behaviour["flags"] == list(BEHAVIOURS)
    assert [(m["sender"], m["round"], m["turn"]) for m in behaviour["messages"]] == [
        ("participant_1", 0, 0), ("participant_2", 0, 1), ("participant_3", 0, 2),
    ]  # fmt: skip
    assert [m["a"] for m in behaviour["messages"]] == [codes("proposes_solution")] * 3
    assert behaviour["messages"][1]["b"] == codes("challenges", "asks_question")
    orjson.dumps(score.details)  # JSON-able, as the record keeps it

    wrong = await evaluator.score(TASK, "I say 41.", ctx=ctx)
    assert not wrong.correct and wrong.extracted == "41"


async def test_judges_read_the_question_and_the_earlier_messages_never_the_gold():
    ctx = await discuss(["first: 17", "second: 18", "third: 19"])
    judge = ScriptedModel(lambda r: json.dumps(ALL_FALSE))
    task = TASK.model_copy(update={"gold": "4242", "instruction": "Say 'The answer is N'."})
    await BehaviourCodingEvaluator(judge_a=judge, judge_b=judge).score(task, "x", ctx=ctx)
    prompts = {coded_message(c.request): last_user_message(c.request) for c in judge.calls}
    assert len(judge.calls) == 6 and set(prompts) == {"first: 17", "second: 18", "third: 19"}
    assert "first" not in prompts["first: 17"].split("The message to code")[0]
    assert "first: 17" in prompts["second: 18"] and "second" not in prompts["second: 18"].split(
        "The message to code")[0]  # fmt: skip
    assert "first: 17" in prompts["third: 19"] and "second: 18" in prompts["third: 19"]
    for call in judge.calls:
        text = "\n".join(m["content"] for m in call.request.messages)
        assert "What is 6 * 7?" in text
        assert "4242" not in text and "Say 'The answer is N'" not in text


async def test_garbage_judge_replies_leave_messages_uncoded_and_never_crash():
    ctx = await discuss(["one", "two", "three"])
    replies = iter(["nonsense", "{", json.dumps(codes("coordinates"))])
    judge_a = ScriptedModel(lambda r: next(replies))
    judge_b = ScriptedModel(lambda r: json.dumps(codes("coordinates")))
    score = await BehaviourCodingEvaluator(judge_a=judge_a, judge_b=judge_b).score(
        TASK, "no number here", ctx=ctx
    )
    assert score.unparsed  # the base's verdict, unchanged
    messages = score.details["behaviour"]["messages"]
    assert [m["a"] for m in messages] == [None, None, codes("coordinates")]
    assert all(m["b"] == codes("coordinates") for m in messages)
    record = ResultRecord(task_id="t1", status="ok", score=score)
    agreement = behaviour_agreement([record])
    assert (agreement.coded, agreement.excluded) == (1, 2)
    assert agreement.flags["coordinates"].both_correct == 1


async def test_without_a_context_only_the_base_scores():
    judge = ScriptedModel([])
    score = await BehaviourCodingEvaluator(judge_a=judge, judge_b=judge).score(TASK, "42")
    assert score.correct and score.details["behaviour"]["messages"] == []


def record_of(pairs: list[tuple[dict[str, bool] | None, dict[str, bool] | None]]) -> ResultRecord:
    messages = [{"sender": "p", "round": 0, "turn": i, "kind": "message", "a": a, "b": b}
                for i, (a, b) in enumerate(pairs)]  # fmt: skip
    details = {"behaviour": {"flags": list(BEHAVIOURS), "messages": messages}}
    score = Score(value=1.0, correct=True, extracted="42", details=details)
    return ResultRecord(task_id=f"t{len(pairs)}", status="ok", score=score)


def test_kappa_of_a_hand_counted_table():
    # challenges: both 20, only A 5, only B 10, neither 15 (n = 50):
    # observed 35/50 = 0.7; A says yes 25/50, B 30/50; expected 0.5·0.6 + 0.5·0.4 = 0.5;
    # kappa = (0.7 − 0.5) / (1 − 0.5) = 0.4
    table = (
        [(codes("challenges"), codes("challenges"))] * 20
        + [(codes("challenges"), ALL_FALSE)] * 5
        + [(ALL_FALSE, codes("challenges"))] * 10
        + [(ALL_FALSE, ALL_FALSE)] * 15
    )
    uncoded = [(None, ALL_FALSE), (codes("challenges"), None), (None, None)]
    errored = ResultRecord(task_id="e", status="error", error="boom")
    result = behaviour_agreement([record_of(table[:30]), errored, record_of(table[30:] + uncoded)])
    assert (result.coded, result.excluded) == (50, 3)
    challenges = result.flags["challenges"]
    assert (challenges.both_correct, challenges.only_a, challenges.only_b,
            challenges.both_wrong) == (20, 5, 10, 15)  # fmt: skip
    assert challenges.kappa == pytest.approx(0.4)
    assert challenges.percent_agreement == pytest.approx(70.0)
    never = result.flags["synthesizes"]  # neither judge ever flags it: perfect agreement
    assert (never.both_wrong, never.n, never.kappa) == (50, 50, 1.0)
    text = format_behaviour_agreement(result)
    assert "50 messages coded by both, 3 excluded" in text
    assert re.search(r"challenges\s+20\s+5\s+10\s+15\s+70\.0%\s+0\.400", text)


def judge_script(tmp_path, name: str, patterns: dict[str, dict[str, bool]]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps({k: json.dumps(v) for k, v in patterns.items()}))
    return f"scripted:{path}"


@pytest.mark.system
def test_cli_run_codes_every_message_as_scoring_usage(tmp_path):
    judge_a = judge_script(tmp_path, "a", {".": codes("proposes_solution")})
    judge_b = judge_script(
        tmp_path, "b",
        {"from participant_1:": codes("proposes_solution"), ".": codes("agrees_or_defers")},
    )  # fmt: skip
    out = tmp_path / "run"
    argv = ["run", "--method", "free_discussion", "--benchmark", "arith", "--model",
            "scripted:echo", "--limit", "2", "--out", str(out), "--no-cache", "--quiet",
            "--evaluator", "behaviour_coding", "--evaluator-option", f"judge_a={judge_a}",
            "--evaluator-option", f"judge_b={judge_b}"]  # fmt: skip
    assert main(argv) == 0
    run = load_run(out)
    assert run.manifest.evaluator == "behaviour_coding"
    for record in run.records:
        assert record.status == "ok"
        assert record.usage["calls"] == 9  # the method's N·R
        assert record.scoring_usage["calls"] == 18  # 9 messages × 2 judges
        messages = record.score.details["behaviour"]["messages"]
        assert len(messages) == 9
        assert record.score.details["behaviour"]["judges"] == {"a": judge_a, "b": judge_b}
    traces = [orjson.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    scoring = [c for t in traces for c in t["calls"] if c["purpose"] == "scoring"]
    assert sorted({c["agent"] for c in scoring}) == ["judge_a", "judge_b"]
    result = behaviour_agreement(run.records)
    assert (result.coded, result.excluded) == (18, 0)
    proposes = result.flags["proposes_solution"]  # B agrees on participant_1's 3 turns per task
    assert (proposes.both_correct, proposes.only_a, proposes.only_b) == (6, 12, 0)
    agrees = result.flags["agrees_or_defers"]
    assert (agrees.only_b, agrees.both_wrong) == (12, 6)


def test_evaluator_options_are_checked_before_a_run(tmp_path):
    base = dict(method="free_discussion", benchmark="arith", model="scripted:echo",
                out=tmp_path / "o", cache=False, evaluator="behaviour_coding")  # fmt: skip
    with pytest.raises(ConfigError, match="behaviour_coding needs judge_a, judge_b"):
        run_config(**base)
    with pytest.raises(ConfigError, match="has no option 'judges'"):
        run_config(**base, evaluator_options=["judge_a=scripted:echo", "judge_b=scripted:echo",
                                              "judges=2"])  # fmt: skip
    config = run_config(**base, evaluator_options={"judge_a": "scripted:echo",
                                                   "judge_b": "scripted:echo"})  # fmt: skip
    assert config.evaluator_options == {"judge_a": "scripted:echo", "judge_b": "scripted:echo"}
    runner = Runner(config)  # the judges come from the run's pool (its endpoints and cache)
    assert runner.evaluator.judges["a"].model is runner.models.get("scripted:echo")
    with pytest.raises(ConfigError, match="has no option 'judge_a'"):
        run_config(**{**base, "evaluator": "numeric"}, evaluator_options=["judge_a=x"])


def test_the_cli_names_a_missing_judge(tmp_path, capsys):
    argv = ["run", "--method", "free_discussion", "--benchmark", "arith", "--model",
            "scripted:echo", "--out", str(tmp_path / "o"), "--no-cache", "--quiet",
            "--evaluator", "behaviour_coding",
            "--evaluator-option", "judge_a=scripted:echo"]  # fmt: skip
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "behaviour_coding needs judge_b: --evaluator-option judge_b=..." in captured.err
    assert not (tmp_path / "o").exists()
