"""Triage signals: each fires on a transcript scripted to trigger it and on no clean one; a run
stores them; ``maslab triage`` ranks a seeded run's planted problem samples first."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

import maslab
from maslab.analysis.trajectory import (
    final_answer,
    final_answers,
    round_answers,
    turns,
    vote_tally,
)
from maslab.analysis.triage import ANSWER_SIGNALS, SIGNALS, rank, signals, token_outliers
from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import CHANGED_AFTER_SOLVED, STRICT, Score
from maslab.cli import main
from maslab.core.context import Context
from maslab.errors import ConfigError, LLMError, ServerError
from maslab.harness.samples import trace as trace_line
from maslab.llm import registry
from maslab.llm.cache import Cached, ResponseCache
from maslab.llm.registry import register_provider
from maslab.llm.retry import Retrying, RetryPolicy
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import ChatRequest
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace

PER_SAMPLE = [name for name in SIGNALS if name != "token_outlier"]
DEBATERS = ("debater_1", "debater_2", "debater_3")


def said(agent: str, answer: str | None, round: int | None = 0, **fields: Any) -> dict:
    """A message with its extracted answer; its text differs for every agent and round."""
    text = f"{agent} in round {round} reasons through every step with care"
    content = fields.pop("content", f"{text} and concludes {answer}." if answer else f"{text}.")
    return {"sender": agent, "content": content, "round": round, "answer": answer, **fields}


def trace_of(
    *messages: dict,
    failed_calls: int = 0,
    retried: int = 0,
    truncated: int = 0,
    answers: bool = True,
    **fields: Any,
) -> Trace:
    """A trace of ``messages`` whose model-written ones each have a call (kind message or
    aggregate), the first of which took ``retried`` requests more and the first ``truncated``
    of which were cut at max_tokens; ``failed_calls`` more calls that failed (at their one
    attempt: a 400); ``fields`` set the trace's other fields."""
    calls = [
        {"agent": m["sender"], "error": None, "attempts": 1, "finish_reason": "stop"}
        for m in messages
        if m.get("model", True)
    ]
    if retried:
        calls[0]["attempts"] += retried
    for call in calls[:truncated]:
        call["finish_reason"] = "length"
    calls += [{"agent": "debater_1", "error": "RequestRejected: 400", "attempts": 1}] * failed_calls
    line = {
        "task_id": "t1",
        "repeat": 0,
        "calls": calls,
        "messages": [
            {"kind": "message", **{k: v for k, v in m.items() if k not in ("answer", "model")}}
            for m in messages
        ],
    }
    if answers:
        line["answers"] = [m["answer"] for m in messages]
    return Trace.model_validate({**line, **fields})


def debate(final: tuple[str, ...] = ("42", "42", "42"), opening: tuple[str, ...] | None = None):
    """Three debaters over two rounds: their opening answers, then their final ones."""
    return [
        *(said(a, x, 0) for a, x in zip(DEBATERS, opening or final, strict=True)),
        *(said(a, x, 1) for a, x in zip(DEBATERS, final, strict=True)),
    ]


def record(answer: str | None = None, status: str = "ok", extracted: str | None = "42",
           details: dict[str, Any] | None = None, **fields: Any) -> ResultRecord:  # fmt: skip
    score = None if status == "error" else Score(value=1.0, correct=True, extracted=extracted,
                                                 details=details or {})  # fmt: skip
    return ResultRecord(task_id="t1", status=status, answer=answer, gold="42", score=score,
                        **fields)  # fmt: skip


def tool(name: str, result: str = "ok", turn: int = 0, error: bool = False, **arguments: Any):
    """A call on the environment by ``agent``, as a trace's ``tools`` holds it."""
    return {"turn": turn, "agent": "agent", "name": name, "arguments": arguments,
            "result": result, "error": error}  # fmt: skip


def fired(values: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in values.items() if value > 0}


# --- each signal on its scripted transcript -----------------------------------------------------


def test_no_signal_fires_on_a_clean_debate():
    values = signals(record(said("debater_1", "42", 1)["content"]), trace_of(*debate()))
    assert list(values) == PER_SAMPLE  # every per-sample signal computed, none fired
    assert fired(values) == {}


SCRIPTED: dict[str, tuple[ResultRecord, Trace, float]] = {
    "final_disagreement": (record(), trace_of(*debate(("42", "41", "42"))), 1),
    "answer_flips": (record(), trace_of(*debate(opening=("41", "42", "42"))), 1),
    "repetition": (
        record(),
        trace_of(
            said("debater_1", "42", 0, content="I add the numbers: 40 plus 2 is 42."),
            said("debater_2", "42", 0),
            said("debater_1", "42", 1, content="I add the numbers:  40 plus 2 is 42!"),
            said("debater_2", "42", 1),
        ),
        1,
    ),
    # every agent says 42 but the aggregator's verdict, the final answer, says 40: no agent holds it
    "minority_consensus": (
        record("The verdict is 40.", extracted="40"),
        trace_of(
            *debate(), said("aggregator", "40", 2, kind="aggregate", content="The verdict is 40.")
        ),
        1,
    ),
    "unparsed": (record(extracted=None), trace_of(*debate()), 1),
    # scored right on its last number, but nothing in the instructed form
    "strict_flexible_disagree": (
        record(details={STRICT: {"extracted": None, "correct": False}}),
        trace_of(*debate()),
        1,
    ),
    "budget_stop": (record(status="budget"), trace_of(*debate()), 1),
    "retries": (record(), trace_of(*debate(), retried=2), 2),
    "failed_calls": (record(), trace_of(*debate(), failed_calls=2), 2),
    "truncated": (record(), trace_of(*debate(), truncated=2), 2),
    "errors": (record(status="error", error="ServerError: 503"), trace_of(*debate()), 1),
    "tool_failures": (
        record(),
        trace_of(
            said("action_1", None, 1, content='{"tool": "mul", "arguments": {}}'),
            said(
                "executor",
                None,
                1,
                kind="observation",
                model=False,
                content="error: unknown tool 'mul'; available: add",
            ),
            said("action_2", None, 2, content='{"tool": "python", "arguments": {}}'),
            said(
                "python",
                None,
                2,
                kind="observation",
                model=False,
                content="status: timeout\nstdout:\nstarted",
            ),
            said(
                "python",
                None,
                3,
                kind="observation",
                model=False,
                content="status: ok\nstdout:\n42",
            ),
            said("solver", "42", 4),
        ),
        2,
    ),
    # the bridge's counts of a sample's programs, as its trace carries them
    "program_calls_refused": (record(), trace_of(*debate(), program_calls_refused=3), 3),
    "program_calls_failed": (record(), trace_of(*debate(), program_calls_failed=2), 2),
    "tool_errors": (
        record(),
        trace_of(
            *debate(), tools=[tool("put", key="a"), tool("take", "error: nothing", error=True)]
        ),
        1,
    ),
    # an unknown function is an errored call too
    "unknown_function": (
        record(),
        trace_of(*debate(), tools=[tool("rm", "error: Unknown function 'rm'", error=True)]),
        1,
    ),
    "repeated_call": (
        record(),
        trace_of(*debate(), tools=[tool("ls", "[a]", a=True), tool("ls", "[a]", a=True)]),
        1,
    ),
    # the evaluator's count, as bfcl_state records it in the score's details
    CHANGED_AFTER_SOLVED: (record(details={CHANGED_AFTER_SOLVED: 2}), trace_of(*debate()), 2),
}
ALSO = {"unknown_function": {"tool_errors": 1.0}}
"""The signals a scripted transcript fires besides its own."""


def test_every_per_sample_signal_has_a_scripted_transcript():
    assert sorted(SCRIPTED) == sorted(PER_SAMPLE)


@pytest.mark.parametrize("name", SCRIPTED)
def test_each_signal_fires_on_its_scripted_transcript_and_alone(name):
    sample, trace, value = SCRIPTED[name]
    assert fired(signals(sample, trace)) == {name: value, **ALSO.get(name, {})}


def test_no_tool_signal_fires_on_calls_that_change_nothing_twice_or_err_otherwise():
    calls = [
        tool("ls", "[]", a=True),
        tool("put", key="a"),
        tool("ls", "[a]", a=True),  # the same call, but the state changed in between
        tool("ls", "[a]", turn=1, a=True),  # the same call and result, at the next turn
        tool("ls", "[a]", turn=1, a=False),
        tool("cd", "error: bad arguments for cd: unknown function", turn=1, error=True),
    ]
    values = signals(record(), trace_of(*debate(), tools=calls))
    assert fired(values) == {"tool_errors": 1}  # an error naming no unknown function
    assert fired(signals(record(), trace_of(*debate(), tools=calls[:-1]))) == {}


def test_disagreement_counts_distinct_final_answers_and_a_minority_winner():
    values = signals(record(), trace_of(*debate(("42", "41", "40"))))
    assert fired(values) == {"final_disagreement": 2, "minority_consensus": 1}


def test_answer_signals_are_left_out_of_traces_recorded_before_answers():
    values = signals(record(), trace_of(*debate(("42", "41", "40")), answers=False))
    assert set(values) == set(PER_SAMPLE) - set(ANSWER_SIGNALS)  # not computable, not 0
    assert set(signals(record(), None)) == {
        "unparsed",
        "strict_flexible_disagree",
        "budget_stop",
        "errors",
        CHANGED_AFTER_SOLVED,
    }


# --- trajectory views ---------------------------------------------------------------------------


def test_round_answers_keep_each_agents_last_answer_per_round_without_posted_messages():
    trace = trace_of(
        said("debater_2", "7", 1),
        said("debater_1", "5", 0),
        said("debater_1", None, 0),  # a later message without an answer keeps the earlier one
        said("sandbox", "9", 1, kind="observation", model=False),  # posted: no agent's answer
        said("debater_2", "8", 1),
    )
    assert round_answers(trace) == {0: {"debater_1": "5"}, 1: {"debater_2": "8"}}
    assert final_answers(trace) == {"debater_2": "8"}


def test_messages_without_a_round_join_the_round_before_them():
    trace = trace_of(said("a", "1", None), said("b", "2", None), said("a", "3", 2),
                     said("b", "4", None))  # fmt: skip
    assert round_answers(trace) == {0: {"a": "1", "b": "2"}, 2: {"a": "3", "b": "4"}}
    values = signals(record(), trace)
    assert values["answer_flips"] == 2 and values["final_disagreement"] == 1


def test_one_agent_and_an_empty_transcript_read_as_clean():
    one = trace_of(said("solver", "42", None))
    assert final_answers(one) == {"solver": "42"} and fired(signals(record(), one)) == {}
    empty = trace_of()
    assert round_answers(empty) == {} and turns(empty) == [] and final_answer(empty, "x") is None
    assert fired(signals(record(), empty)) == {}


def test_the_final_answer_is_that_of_the_message_chosen_else_the_vote():
    trace = trace_of(*debate(("41", "42", "42")))
    chosen = trace.messages[3].content  # debater_1's last message
    assert final_answer(trace, chosen) == "41"
    assert final_answer(trace, "a text no message has") == "42"
    assert fired(signals(record(chosen), trace)) == {"final_disagreement": 1,
                                                     "minority_consensus": 1}  # fmt: skip


def test_vote_tally_counts_answers_most_first_ties_in_order_of_appearance():
    assert vote_tally(["b", "a", None, "b", "a", "c"]) == [("b", 2), ("a", 2), ("c", 1)]
    assert vote_tally([None]) == []


# --- token outliers and ranking -----------------------------------------------------------------


def test_token_outliers_flag_far_larger_samples_only():
    z = token_outliers([1000, 1100, 900, 1050, 950, 1000, 30_000])
    assert all(v == 0 for v in z[:-1]) and z[-1] > 3.5
    assert token_outliers([500] * 9 + [40_000])[-1] > 3.5  # MAD 0: mean absolute deviation
    assert token_outliers([500] * 9 + [900]) == [0.0] * 10  # not twice the median
    assert token_outliers([500] * 5) == [0.0] * 5 and token_outliers([7]) == [0.0]


def _sample(task: str, repeat: int = 0, tokens: int = 1000, **values: float) -> ResultRecord:
    return ResultRecord(task_id=task, repeat=repeat, status="ok",
                        usage={"prompt_tokens": tokens},
                        signals={name: 0.0 for name in PER_SAMPLE} | values)  # fmt: skip


def test_rank_orders_by_signals_fired_then_task_and_repeat():
    samples = [
        _sample("c", retries=5),
        _sample("b", 1, errors=1, retries=1),
        _sample("b", 0, repetition=1),
        _sample("a"),
        _sample("d", tokens=90_000),
        *(_sample(f"e{i}") for i in range(5)),
    ]
    ranked = rank((s, None) for s in samples)
    assert [f.record.key for f in ranked] == [("b", 1), ("b", 0), ("c", 0), ("d", 0)]
    assert ranked[0].score == 2 and set(ranked[-1].fired) == {"token_outlier"}
    by_retries = rank(((s, None) for s in samples), signal="retries", top=1)
    assert [f.record.key for f in by_retries] == [("c", 0)]
    with pytest.raises(ConfigError, match="unknown signal 'loops'; the signals are final_disa"):
        rank([], signal="loops")


# --- a seeded run -------------------------------------------------------------------------------

TASKS = 8
DISAGREE, ERROR, LOOP, VERBOSE = 1, 3, 5, 6  # the planted problem samples, by task index


def _agent(request: ChatRequest) -> str:
    return request.scope.rsplit("\x1f", 1)[-1]


class Planted:
    """Three debaters answering arith tasks right, in words that change each round, except on
    the planted tasks: they disagree, one call fails, one debater loops, one writes an essay."""

    def __init__(self) -> None:
        self.tasks = get_benchmark("arith")().load(limit=TASKS)

    def respond(self, request: ChatRequest) -> str:
        prompt = request.messages[-1]["content"]
        i = next(i for i, t in enumerate(self.tasks) if t.question in prompt)
        agent, gold = _agent(request), int(self.tasks[i].gold)
        r = sum(m["role"] == "user" for m in request.messages) - 1
        n = DEBATERS.index(agent)
        if i == ERROR and r == 1 and n == 1:
            raise LLMError("the model refused this request", model="planted")
        if i == LOOP and n == 2:
            return f"I keep returning to the same point and my answer is \\boxed{{{gold}}}."
        answer = gold + n if i == DISAGREE else gold
        essay = " ".join(["padding"] * 3000) if i == VERBOSE and n == 0 else ""
        return f"{agent} in round {r} checks each step of the sum: \\boxed{{{answer}}}. {essay}"

    def provider(self, name: str, settings: object) -> ScriptedModel:
        return ScriptedModel(self.respond, name=f"planted:{name}")


@pytest.fixture
def seeded(monkeypatch, tmp_path) -> tuple[Planted, maslab.RunResult]:
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    planted = Planted()
    register_provider("planted")(planted.provider)
    run = maslab.evaluate("llm_debate", "arith", "planted:debate", limit=TASKS, cache=False,
                          out=tmp_path / "run", progress=False)  # fmt: skip
    return planted, run


def test_a_run_stores_signals_in_its_results_and_answers_in_its_traces(seeded):
    planted, run = seeded
    results = [orjson.loads(line) for line in (run.dir / "results.jsonl").read_bytes().splitlines()]
    assert len(results) == TASKS
    assert all(set(r["signals"]) == set(PER_SAMPLE) for r in results)
    by_task = {r["task_id"]: fired(r["signals"]) for r in results}
    assert by_task[planted.tasks[DISAGREE].id] == {"final_disagreement": 2,
                                                   "minority_consensus": 1}  # fmt: skip
    assert by_task[planted.tasks[ERROR].id] == {"errors": 1, "failed_calls": 1}
    assert by_task[planted.tasks[LOOP].id] == {"repetition": 1}
    for trace in map(orjson.loads, (run.dir / "traces.jsonl").read_bytes().splitlines()):
        assert len(trace["answers"]) == len(trace["messages"])
        assert None not in trace["answers"]  # every debater's message has a boxed answer


def test_triage_ranks_the_planted_samples_first(seeded, capsys):
    planted, run = seeded
    capsys.readouterr()
    assert main(["triage", str(run.dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f"{TASKS} samples, 4 where any signal fired")
    assert lines[1].split() == ["task", "rep", "status", "ok", "signals", "fired"]
    rows = [line.split() for line in lines[2:]]
    planted_ids = [planted.tasks[i].id for i in (DISAGREE, ERROR, LOOP, VERBOSE)]
    assert [row[0] for row in rows] == planted_ids  # 2 signals each, then 1, ties by task id
    assert rows[1][2] == "error" and rows[3][5] == "token_outlier"

    assert main(["triage", str(run.dir), "--signal", "repetition", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "1 where repetition fired" in out and planted.tasks[LOOP].id in out


def test_triage_computes_signals_of_a_run_recorded_before_them(tmp_path, capsys):
    store = RunStore(tmp_path / "old")
    store.open(Manifest(method="llm_debate", benchmark="arith", model="scripted:echo",
                        evaluator="numeric", task_ids=["t1", "t2"]))  # fmt: skip
    looping = debate()
    looping[3]["content"] = looping[0]["content"]  # debater_1 repeats its opening
    for task, messages in (("t1", debate()), ("t2", looping)):
        line = trace_of(*messages, answers=False, task_id=task)
        store.append(record().model_copy(update={"task_id": task}), line)
    store.close()
    assert main(["triage", str(tmp_path / "old")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "2 samples, 1 where any signal fired" in lines[0]
    assert lines[1] == (
        "not computable on 2 of 2 samples (recorded before maslab stored what they need): "
        "final_disagreement, answer_flips, minority_consensus"
    )
    assert lines[3].split() == ["t2", "0", "ok", "✓", "1", "repetition", "1"]


def test_an_unknown_signal_is_a_one_line_error_listing_the_names(tmp_path, capsys):
    assert main(["triage", str(tmp_path), "--signal", "loops"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "final_disagreement" in err
    assert "token_outlier" in err


async def test_retries_count_the_requests_the_retry_layer_sent_again(tmp_path):
    pending = [ServerError("busy", status=503), ServerError("busy", status=503)]

    def answer(request: ChatRequest) -> str:
        if pending:
            raise pending.pop(0)
        return "The answer is \\boxed{42}."

    cache = ResponseCache(tmp_path / "cache.sqlite")
    stack = Retrying(ScriptedModel(answer, name="flaky"), RetryPolicy(initial_wait=0, max_wait=0))
    for attempts in (3, 1):  # then replayed from the cache: no request sent again
        ctx = Context(Cached(stack, cache, namespace="flaky"), sample_id="t1")
        await ctx.agent("debater_1").reply("What is 6 x 7?", round=0)
        line = trace_line("t1", 0, None, ctx)
        assert [call.attempts for call in line.calls] == [attempts]
        assert fired(signals(record(), line)) == ({"retries": 2} if attempts == 3 else {})
