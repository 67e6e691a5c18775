"""The LangGraph and AutoGen AgentChat examples (``examples/external/``) run as ``--method
external`` on arith against the fake server: exact call counts under the agents' names, replay
from the cache, a budget stop, and 16 samples in flight with no call on the wrong sample."""

from __future__ import annotations

from pathlib import Path

import pytest

import maslab
from maslab.store.run_store import RunStore
from maslab.testing.fake_server import FakeOpenAIServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "external"
SYSTEMS = {"langgraph_pair": "langgraph", "autogen_pair": "autogen_agentchat"}


@pytest.fixture(params=sorted(SYSTEMS))
def entry(request: pytest.FixtureRequest) -> str:
    pytest.importorskip(SYSTEMS[request.param], reason="the framework is not installed")
    return f"{EXAMPLES / request.param}.py:solve"


def run(server: FakeOpenAIServer, entry: str, out: Path, limit: int = 4, **options):
    return maslab.evaluate(
        "external", "arith", f"openai:fake@{server.base_url}", limit=limit, out=out,
        config={"entry": entry}, progress=False, **{"cache": False, **options},
    )  # fmt: skip


def answer(request) -> str:
    return "So the answer is \\boxed{7}."


def test_each_call_is_the_samples_under_its_agents_name(entry, tmp_path):
    with FakeOpenAIServer(answer) as server:
        result = run(server, entry, tmp_path / "run")
        assert server.served == 8
    assert [r.usage["calls"] for r in result.records] == [2] * 4
    assert {r.answer for r in result.records} == {"So the answer is \\boxed{7}."}
    for trace in RunStore(result.dir).traces():
        assert [c.agent for c in trace.calls] == ["solver", "checker"]


def test_a_rerun_replays_from_the_cache(entry, tmp_path):
    cache = str(tmp_path / "cache.sqlite")
    with FakeOpenAIServer(answer) as server:
        run(server, entry, tmp_path / "first", cache=cache)
        again = run(server, entry, tmp_path / "second", cache=cache)
        assert server.served == 8  # the second run sent nothing
    assert all(r.usage["cached_calls"] == 2 for r in again.records)


def test_a_budget_stop_ends_each_sample(entry, tmp_path):
    with FakeOpenAIServer(answer) as server:
        result = run(server, entry, tmp_path / "run", max_calls=1)
        assert server.served == 4
    assert [r.status for r in result.records] == ["budget"] * 4


def test_sixteen_samples_in_flight(entry, tmp_path):
    # a second per call: every sample's first call is under way before any ends
    with FakeOpenAIServer(answer, latency=1.0) as server:
        result = run(server, entry, tmp_path / "run", limit=16, concurrency=16)
        assert server.peak_in_flight == 16
    questions = {t.id: t.question for t in maslab.get_benchmark("arith")().load(limit=16)}
    for trace in RunStore(result.dir).traces():
        assert questions[trace.task_id] in trace.calls[0].messages[-1].content
    assert sum(r.usage["calls"] for r in result.records) == 32
