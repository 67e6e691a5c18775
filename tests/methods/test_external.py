"""``external``: a two-agent system written with the ``openai`` SDK, run through each sample's
front door against the fake server: exact call counts, agents named by the client, replay from
the cache, a budget stop, 16 samples in flight with no call attributed to the wrong sample,
streaming, tools, model roles, and the door's refusals."""

from __future__ import annotations

import textwrap
from pathlib import Path

import httpx
import openai
import pytest

import maslab
from maslab.core.context import Context
from maslab.errors import ConfigError
from maslab.kit.front_door import front_door
from maslab.llm.pool import ModelPool
from maslab.llm.scripted import Reply
from maslab.llm.types import FunctionCall
from maslab.store.run_store import RunStore
from maslab.testing.fake_server import FakeOpenAIServer

SYSTEM = '''
import openai

def solve(task, client):
    """A solver and a checker, each a call with its own name."""
    api = openai.OpenAI(base_url=client.base_url, api_key=client.api_key, max_retries=0)
    draft = api.chat.completions.create(
        model=client.model, user="solver",
        messages=[{"role": "user", "content": task.prompt()}],
    ).choices[0].message.content
    checked = api.chat.completions.create(
        model=client["model"], user="checker",
        messages=[{"role": "user", "content": "Check: " + draft}],
    ).choices[0].message.content
    return checked

async def solve_async(task, client):
    api = openai.AsyncOpenAI(base_url=client.base_url, api_key=client.api_key, max_retries=0)
    first = await api.chat.completions.create(
        model=client.model, user="solver",
        messages=[{"role": "user", "content": task.prompt()}],
    )
    return first.choices[0].message.content
'''


@pytest.fixture
def system(tmp_path: Path) -> Path:
    path = tmp_path / f"mas_{tmp_path.name}.py"  # a module name of its own in every test
    path.write_text(textwrap.dedent(SYSTEM))
    return path


def run(server: FakeOpenAIServer, system: Path, out: Path, entry: str = "solve", **options):
    return maslab.evaluate(
        "external", "arith", f"openai:fake@{server.base_url}", limit=4, out=out,
        config={"entry": f"{system}:{entry}"}, progress=False, cache=options.pop("cache", False),
        **options,
    )  # fmt: skip


def test_a_two_agent_system_makes_its_calls_as_the_samples(system, tmp_path):
    with FakeOpenAIServer(lambda request: "The answer is 7.") as server:
        result = run(server, system, tmp_path / "run")
        assert server.served == 8  # two calls per sample
    assert [r.usage["calls"] for r in result.records] == [2, 2, 2, 2]
    assert all(r.status == "ok" and r.answer == "The answer is 7." for r in result.records)
    trace = next(iter(RunStore(result.dir).traces()))
    assert [c.agent for c in trace.calls] == ["solver", "checker"]
    assert trace.calls[1].messages[-1].content == "Check: The answer is 7."


def test_a_run_again_replays_from_the_cache(system, tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeOpenAIServer(lambda request: "The answer is 7.") as server:
        run(server, system, tmp_path / "first", cache=str(cache))
        assert server.served == 8
        again = run(server, system, tmp_path / "second", cache=str(cache))
        assert server.served == 8  # no request reached the server
    assert all(r.usage["cached_calls"] == 2 for r in again.records)


def test_an_async_system(system, tmp_path):
    with FakeOpenAIServer(lambda request: "The answer is 7.") as server:
        result = run(server, system, tmp_path / "run", entry="solve_async")
        assert server.served == 4
    assert {r.answer for r in result.records} == {"The answer is 7."}


def test_a_budget_stop_refuses_the_next_call_and_ends_the_sample(system, tmp_path):
    with FakeOpenAIServer(lambda request: "The answer is 7.") as server:
        result = run(server, system, tmp_path / "run", max_calls=1)
        assert server.served == 4  # the checker's call never reached the model
    assert [r.status for r in result.records] == ["budget"] * 4
    assert all("calls" in (r.metadata.get("budget") or "") for r in result.records)


def test_sixteen_samples_in_flight_keep_their_own_calls(system, tmp_path):
    with FakeOpenAIServer(lambda request: "The answer is 7.", latency=1.0) as server:
        result = maslab.evaluate(
            "external", "arith", f"openai:fake@{server.base_url}", limit=16, concurrency=16,
            config={"entry": f"{system}:solve"}, out=tmp_path / "run", cache=False,
            progress=False,
        )  # fmt: skip
        assert server.peak_in_flight == 16  # sync systems too: each on a thread of its own
    questions = {t.id: t.question for t in maslab.get_benchmark("arith")().load(limit=16)}
    traces = RunStore(result.dir).traces()
    for trace in traces:
        assert questions[trace.task_id] in trace.calls[0].messages[-1].content
    assert sum(r.usage["calls"] for r in result.records) == 32


async def test_the_door_streams_routes_roles_and_refuses_strangers():
    calls = [FunctionCall("c1", "add", '{"a": 1}')]
    with FakeOpenAIServer(lambda request: Reply("", calls) if request.tools else "hi") as server:
        endpoints = {"fast": [{"base_url": server.base_url, "model": "fast-model"}]}
        ctx = Context(
            f"openai:fake@{server.base_url}",
            model_roles={"critic": {"model": f"openai:critic@{server.base_url}"}},
            sample_id="s", seed=0, models=ModelPool(endpoints=endpoints),
        )  # fmt: skip
        async with front_door(ctx) as (_, client):
            api = openai.AsyncOpenAI(base_url=client.base_url, api_key=client.api_key,
                                     max_retries=0)  # fmt: skip
            assert set(client.models) == {"default", "critic", "fast"}
            await api.chat.completions.create(  # an alias of the run's endpoints file
                model="fast", user="quick", messages=[{"role": "user", "content": "x"}]
            )
            assert server.request_log[-1]["body"]["model"] == "fast-model"
            stream = await api.chat.completions.create(
                model="default", messages=[{"role": "user", "content": "x"}], stream=True
            )
            text = "".join([c.choices[0].delta.content or "" async for c in stream])
            assert text == "hi"
            tool = await api.chat.completions.create(
                model="critic", user="critic", messages=[{"role": "user", "content": "add"}],
                tools=[{"type": "function", "function": {"name": "add", "parameters": {}}}],
            )  # fmt: skip
            assert tool.choices[0].message.tool_calls[0].function.name == "add"
            assert tool.choices[0].finish_reason == "tool_calls"
            with pytest.raises(openai.NotFoundError, match="no model 'gpt-9'"):
                await api.chat.completions.create(model="gpt-9", messages=[{"role": "user",
                                                  "content": "x"}])  # fmt: skip
            stranger = openai.AsyncOpenAI(base_url=client.base_url, api_key="sk-other",
                                          max_retries=0)  # fmt: skip
            with pytest.raises(openai.AuthenticationError):
                await stranger.chat.completions.create(
                    model="default", messages=[{"role": "user", "content": "x"}]
                )
            async with httpx.AsyncClient() as http:
                found = await http.get(client.base_url.removesuffix("/v1") + "/v1/embeddings")
            assert found.status_code == 404 and found.json()["error"]["code"] == "unknown_url"
            await api.chat.completions.create(  # JSON mode reaches the model as asked
                model="default", messages=[{"role": "user", "content": "x"}],
                response_format={"type": "json_object"},
            )  # fmt: skip
            assert server.request_log[-1]["body"]["response_format"] == {"type": "json_object"}
        with pytest.raises(openai.APIConnectionError):  # the door ended with its block
            await api.chat.completions.create(
                model="default", messages=[{"role": "user", "content": "x"}]
            )
        assert [(r.agent, r.model) for r in ctx.ledger.records][:3] == [
            ("quick", "openai:fast"),
            ("default", f"openai:fake@{server.base_url}"),
            ("critic", f"openai:critic@{server.base_url}"),
        ]
        await ctx.models.aclose()


def test_no_entry_or_a_missing_one_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="external needs your system's function"):
        maslab.evaluate("external", "arith", "scripted:echo", limit=1, out=tmp_path / "a")
    with pytest.raises(ConfigError, match="external entry nowhere_xyz:solve"):
        maslab.evaluate("external", "arith", "scripted:echo", limit=1, out=tmp_path / "b",
                        config={"entry": "nowhere_xyz:solve"})  # fmt: skip
