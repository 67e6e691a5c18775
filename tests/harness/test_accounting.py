"""Every token a server served is in the run's records: budget stops, failed calls, scoring
calls, replies without usage, resumed runs. Budget stops are counted and score the method's
best answer so far."""

from __future__ import annotations

import itertools
from pathlib import Path

import orjson
import pytest

from maslab.analysis.stats import summarize
from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import Method
from maslab.core.task import Solution, Task
from maslab.errors import BudgetExceeded, SampleEnded
from maslab.store.run_store import RunStore
from maslab.testing import ScriptedModel
from maslab.testing.fake_server import FakeOpenAIServer

SPENT = ("prompt_tokens", "completion_tokens")


def served(server: FakeOpenAIServer) -> int:
    return server.served_prompt_tokens + server.served_completion_tokens


def recorded(out: Path) -> int:
    """Newly spent tokens in a run directory: results (method and scoring) and superseded."""
    store = RunStore(out)
    rows = [*store.results(), *store.superseded()]
    return int(sum(r.usage.get(k, 0) + r.scoring_usage.get(k, 0) for r in rows for k in SPENT))


def run(server: FakeOpenAIServer, out: Path, method: str, *extra: str) -> int:
    return main(
        [
            "run", "--method", method, "--benchmark", "arith", "--limit", "3",
            "--model", f"openai:fake@{server.base_url}", "--out", str(out), "--quiet",
            "--cache", str(out.parent / "cache.sqlite"), *extra,
        ]
    )  # fmt: skip


def slow_after_first(first: float = 0.01, rest: float = 0.2) -> object:
    """Latency: the first request of each batch returns at once, the others later."""
    counter = itertools.count()
    return lambda: first if next(counter) % 5 == 0 else rest


@pytest.mark.system
def test_calls_in_flight_at_a_budget_stop_are_recorded(tmp_path):
    with FakeOpenAIServer(lambda r: "The answer is 3.", latency=0.05) as server:
        assert run(server, tmp_path / "run", "llm_debate", "--max-calls", "4") == 0
        assert served(server) == recorded(tmp_path / "run") > 0
    results = RunStore(tmp_path / "run").results()
    assert all(r.status == "budget" and r.usage["calls"] == 4 for r in results)
    # the answer is the vote over round 0, the last complete round
    assert all(r.score is not None and r.score.extracted == "3" for r in results)


def test_sibling_calls_of_a_failed_call_are_recorded(tmp_path):
    answers = lambda r: "The answer is 3."  # noqa: E731
    with FakeOpenAIServer(answers, latency=slow_after_first(), schedule={1: "400"}) as server:
        assert run(server, tmp_path / "run", "self_consistency", "--limit", "1") == 1
        store = RunStore(tmp_path / "run")
        (failed,) = store.results()
        assert failed.status == "error" and failed.usage["failed_calls"] == 1
        assert failed.usage["calls"] == 5
        assert served(server) == recorded(tmp_path / "run") > 0


@pytest.mark.system
def test_a_resumed_run_keeps_the_spend_of_superseded_attempts(tmp_path):
    answers = lambda r: "The answer is 3."  # noqa: E731
    out = tmp_path / "run"
    with FakeOpenAIServer(answers, latency=slow_after_first(), schedule={1: "400"}) as server:
        assert run(server, out, "self_consistency", "--concurrency", "1") == 1
        server.set_faults(None)
        assert run(server, out, "self_consistency", "--concurrency", "1") == 0
        store = RunStore(out)
        assert [r.status for r in store.results()] == ["ok"] * 3
        (superseded,) = store.superseded()
        assert superseded.status == "error" and superseded.usage["prompt_tokens"] > 0
        assert served(server) == recorded(out)
        assert summarize(store.results(), superseded=store.superseded()).total_served_tokens == (
            served(server)
        )


def test_judge_calls_are_scoring_calls_of_the_sample(tmp_path):
    def answers(request):
        text = request.messages[-1]["content"]
        if "Reply with one word" in text:
            return "CORRECT"
        if "What final answer" in text:
            return "3"
        return "The answer is 3."

    out = tmp_path / "run"
    with FakeOpenAIServer(answers, latency=0.02) as server:
        url = f"openai:fake@{server.base_url}"
        extra = ("--evaluator", "llm_judge", "--judge-model", url, "--concurrency", "2")
        assert run(server, out, "self_consistency", *extra) == 0
        assert server.peak_in_flight <= 2
        assert served(server) == recorded(out)
    results = RunStore(out).results()
    assert all(r.scoring_usage["calls"] == 2 and r.usage["calls"] == 5 for r in results)
    calls = [c for t in RunStore(out).traces() for c in t.calls]
    assert sum(c.purpose == "scoring" and c.agent == "judge" for c in calls) == 6


def test_a_reply_without_usage_gets_a_marked_estimate(tmp_path):
    with FakeOpenAIServer(lambda r: "The answer is 3.", report_usage=False) as server:
        assert run(server, tmp_path / "run", "cot") == 0
    for r in RunStore(tmp_path / "run").results():
        assert r.usage["estimated_calls"] == r.usage["calls"] == 1
        assert r.usage["prompt_tokens"] > 0 and r.usage["completion_tokens"] > 0


def test_headline_cost_does_not_depend_on_the_cache(tmp_path, capsys):
    with FakeOpenAIServer(lambda r: "The answer is 3.") as server:
        assert run(server, tmp_path / "a", "cot") == 0
        assert run(server, tmp_path / "b", "cot") == 0  # every call replayed
    a, b = (summarize(RunStore(tmp_path / d).results()) for d in "ab")
    assert a.mean_tokens == b.mean_tokens > 0
    assert b.mean_spent_tokens == 0 and a.mean_spent_tokens == a.mean_tokens


class CatchesItsBudget(Method):
    """Answers with what it has when its budget runs out, as collab_pair does."""

    async def solve(self, task: Task, ctx: Context) -> Solution:
        try:
            await ctx.chat("one")
            await ctx.chat("two")
        except BudgetExceeded:
            return Solution(answer="what I have")
        return Solution(answer="finished")


async def test_a_caught_budget_stop_still_counts_as_one():
    ctx = Context(ScriptedModel(), budget=Budget(max_calls=1))
    solution = await CatchesItsBudget().run_sample(Task(id="t", question="q"), ctx)
    assert solution.answer == "what I have" and "budget" in solution.metadata
    assert ctx.budget_stop is not None and ctx.budget_stop.kind == "calls"


async def test_no_new_call_starts_once_the_sample_has_ended():
    ctx = Context(ScriptedModel())
    await ctx.chat("before")
    await ctx.settle()
    with pytest.raises(SampleEnded):
        await ctx.chat("after")
    scored = await ctx.chat("judge me", purpose="scoring")  # scoring still may
    assert scored.text and ctx.usage.calls == 1
    assert ctx.ledger.totals(purpose="scoring").calls == 1


def test_compare_refuses_runs_on_different_data(tmp_path, capsys):
    with FakeOpenAIServer(lambda r: "The answer is 3.") as server:
        assert run(server, tmp_path / "easy", "cot") == 0
        assert run(server, tmp_path / "hard", "cot", "--bench-option", "difficulty=5") == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "easy"), str(tmp_path / "hard")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "dataset_hash" in err and "--pair-by-id" in err
    assert main(["compare", str(tmp_path / "easy"), str(tmp_path / "hard"), "--pair-by-id"]) == 0
    assert "paired by task id although" in capsys.readouterr().out


def test_manifest_keeps_benchmark_options(tmp_path):
    with FakeOpenAIServer(lambda r: "The answer is 3.") as server:
        assert run(server, tmp_path / "r", "cot", "--bench-option", "difficulty=5") == 0
    manifest = orjson.loads((tmp_path / "r" / "manifest.json").read_bytes())
    assert manifest["benchmark_options"] == {"difficulty": 5, "size": 200, "seed": 0}
