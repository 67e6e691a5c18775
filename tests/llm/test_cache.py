"""The SQLite response cache: draw-indexed keys, exact replay, cached calls not counted as spend."""

from __future__ import annotations

import itertools

import pytest

from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.cache import Cached, ResponseCache
from maslab.llm.endpoints import Endpoint
from maslab.llm.pool import ModelPool
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import Completion
from maslab.testing.fake_server import FakeOpenAIServer


def numbered_answers():
    counter = itertools.count(1)
    return lambda request: f"reply {next(counter)}: The answer is {next(counter) % 3}."


async def test_identical_requests_in_one_sample_are_distinct_entries(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    model = Cached(ScriptedModel(numbered_answers()), cache, namespace="scripted:counter")
    ctx = Context(model, sample_id="t1")
    fresh = [(await ctx.chat("same question")).text for _ in range(5)]
    assert len(set(fresh)) == 5
    assert cache.stats()["entries"] == 5
    assert [r.draw for r in ctx.ledger.records] == [0, 1, 2, 3, 4]

    replay_ctx = Context(model, sample_id="t1")
    replay = [(await replay_ctx.chat("same question")).text for _ in range(5)]
    assert replay == fresh
    assert cache.stats()["entries"] == 5
    assert replay_ctx.usage.cached_calls == 5
    assert replay_ctx.usage.prompt_tokens == 0 and replay_ctx.usage.completion_tokens == 0
    assert replay_ctx.usage.cached_prompt_tokens == ctx.usage.prompt_tokens > 0


async def test_different_parameters_or_models_do_not_share_entries(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    a = Cached(ScriptedModel(numbered_answers()), cache, namespace="a")
    b = Cached(ScriptedModel(numbered_answers()), cache, namespace="b")
    await a.chat("q", temperature=0.0)
    await a.chat("q", temperature=0.5)
    await b.chat("q", temperature=0.0)
    assert cache.stats()["entries"] == 3
    assert cache.clear() == 3 and cache.stats()["entries"] == 0


async def test_second_identical_run_makes_no_http_request(tmp_path):
    task = Task(id="q1", question="What is 6 * 7?", answer_type="number")
    with FakeOpenAIServer(numbered_answers()) as server:
        endpoints = {"fake": [Endpoint(base_url=server.base_url)]}
        debate = get_method("llm_debate")()

        async def run() -> tuple[str, list[str]]:
            pool = ModelPool(endpoints=endpoints, cache=tmp_path / "cache.sqlite")
            ctx = Context(
                "openai:fake", models=pool, sample_id=task.id, sampling={"temperature": 1}
            )
            solution = await debate.solve(task, ctx)
            await pool.aclose()
            return solution.answer, [m.content for m in ctx.transcript]

        first = await run()
        assert server.requests == 6
        second = await run()
        assert server.requests == 6
        assert second == first


async def test_an_alias_pointed_at_another_server_replays_nothing_it_said_before(tmp_path):
    """An alias is a name: what was cached from one server is no answer of another's, nor of
    another model on the same server. Replicas of one alias still share entries."""
    cache = tmp_path / "cache.sqlite"

    async def ask(endpoints: list[Endpoint]) -> str:
        pool = ModelPool(endpoints={"qwen": endpoints}, cache=cache)
        try:
            return (await pool.get("openai:qwen").chat("q", temperature=0.0)).text
        finally:
            await pool.aclose()

    with (
        FakeOpenAIServer(lambda request: "from a") as a,
        FakeOpenAIServer(lambda request: "from b") as b,
    ):
        assert await ask([Endpoint(base_url=a.base_url)]) == "from a"
        assert await ask([Endpoint(base_url=a.base_url)]) == "from a" and a.requests == 1
        assert await ask([Endpoint(base_url=b.base_url)]) == "from b" and b.requests == 1
        served = [Endpoint(base_url=b.base_url, model="qwen-72b")]
        assert await ask(served) == "from b" and b.requests == 2
        replicas = [Endpoint(base_url=b.base_url), Endpoint(base_url=a.base_url)]
        await ask(replicas)
        requests = a.requests + b.requests
        await ask(list(reversed(replicas)))  # the same replicas, listed the other way round
        assert a.requests + b.requests == requests


def test_an_existing_cache_only_refuses_a_missing_file_and_creates_nothing(tmp_path):
    typo = tmp_path / "typo.sqlite"
    with pytest.raises(ConfigError, match=r"typo\.sqlite: no response cache there"):
        ResponseCache(typo, create=False)
    assert not typo.exists()


def test_clearing_the_cache_shrinks_its_file(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    for index in range(200):
        cache.put(f"key {index}", Completion(text="x" * 4000, model="m"))
    full = cache.stats()
    assert full["entries"] == 200 and full["bytes"] > 800_000  # the WAL counted too
    assert cache.clear() == 200
    cleared = cache.stats()
    assert cleared["entries"] == 0 and cleared["bytes"] < 50_000
    assert (tmp_path / "cache.sqlite").stat().st_size < 50_000
