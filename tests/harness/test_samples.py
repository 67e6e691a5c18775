"""One sample solved and scored (maslab.harness.samples): its record counts the replies cut at
max_tokens, and the run's summary reports them and the strict verdicts beside the score."""

from __future__ import annotations

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.llm.types import ChatRequest
from maslab.store.run_store import RunStore
from maslab.testing import Reply, last_user_message
from maslab.testing.fake_server import FakeOpenAIServer

TASKS = get_benchmark("arith")().load("test")[:3]


def respond(request: ChatRequest) -> str | Reply:
    """The first task: its gold as the last number of a hedge, cut at max_tokens; the others:
    the gold boxed, as the instruction asks."""
    prompt = last_user_message(request)
    task = next(task for task in TASKS if task.question in prompt)
    if task is TASKS[0]:
        return Reply(f"It is around {task.gold}, but I cannot decide", finish_reason="length")
    return rf"So \boxed{{{task.gold}}}."


def test_a_run_counts_replies_cut_at_max_tokens_and_reports_strict_beside_flexible(
    tmp_path, capsys
):
    out = tmp_path / "run"
    with FakeOpenAIServer(respond) as server:
        code = main(
            [
                "run", "--method", "cot", "--benchmark", "arith", "--limit", "3", "--quiet",
                "--model", f"openai:fake@{server.base_url}", "--out", str(out), "--no-cache",
            ]
        )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    records = {r.task_id: r for r in RunStore(out).results()}
    hedged, *boxed = (records[task.id] for task in TASKS)
    assert hedged.correct and hedged.truncated_calls == 1
    assert hedged.signals["truncated"] == hedged.signals["strict_flexible_disagree"] == 1
    for record in boxed:
        assert record.correct and record.truncated_calls == 0
        assert record.signals["truncated"] == record.signals["strict_flexible_disagree"] == 0
    assert "accuracy 100.0% [" in printed
    assert "strict 66.7% [" in printed and "66.7% of samples in the instructed form" in printed
    assert "0.33 replies cut at max_tokens per sample, in 1 of 3 samples (33.3%)" in printed
