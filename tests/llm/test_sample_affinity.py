"""Sample affinity: a load-balanced alias keeps every request of one sample on one endpoint (so
its prefix cache hits), and leaves that endpoint only while it is paused or full, or for good
once it refuses its credentials."""

from __future__ import annotations

import asyncio
import time

import pytest

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.errors import RateLimited, RequestRejected
from maslab.llm.balancing import Balanced, Limited
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, make_request
from maslab.testing import FakeOpenAIServer, ScriptedModel

ANSWER = "Adding step by step gives 42. The answer is 42."


@pytest.mark.system
def test_every_request_of_a_sample_lands_on_one_server_and_samples_spread(tmp_path):
    tasks = get_benchmark("arith")().load(limit=12)
    endpoints = tmp_path / "endpoints.yaml"
    with (
        FakeOpenAIServer(lambda r: ANSWER, latency=0.02) as one,
        FakeOpenAIServer(lambda r: ANSWER, latency=0.02) as two,
    ):
        endpoints.write_text(
            "fake:\n"
            + "".join(f"  - base_url: {s.base_url}\n    max_concurrency: 64\n" for s in (one, two))
        )
        command = ["run", "--method", "llm_debate", "--benchmark", "arith", "--limit", "12",
                   "--model", "openai:fake", "--endpoints", str(endpoints), "--concurrency",
                   "16", "--no-cache", "--out", str(tmp_path / "run"), "--quiet"]  # fmt: skip
        assert main(command) == 0
        served = {
            name: [str(entry["body"]["messages"]) for entry in server.request_log]
            for name, server in (("one", one), ("two", two))
        }
    assert sum(map(len, served.values())) == 12 * 3 * 2  # tasks x agents x rounds
    for task in tasks:
        where = {name for name, bodies in served.items() for b in bodies if task.question in b}
        assert len(where) == 1, f"{task.id} was served by {where}"
    assert all(served.values())  # the samples spread over both servers


class Held(ChatModelBase):
    """Answers once ``release`` is set, so requests stay in flight as long as a test wants."""

    name = "held"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def complete(self, request: ChatRequest) -> Completion:
        await self.release.wait()
        return Completion("ok")


def two_endpoints(*models: ChatModelBase, cap: int = 4) -> Balanced:
    return Balanced("openai:fake", [Limited(m, cap) for m in models])


def sample(name: str) -> ChatRequest:
    return ChatRequest(make_request("2+2?").messages, affinity=name)


def homes(balanced: Balanced, count: int) -> dict[str, Limited]:
    """The endpoint each of ``count`` samples goes to when all endpoints are free."""
    return {f"s{i}": balanced.pick(sample(f"s{i}")) for i in range(count)}


def test_a_sample_keeps_its_endpoint_and_samples_spread():
    balanced = two_endpoints(ScriptedModel(), ScriptedModel())
    picked = homes(balanced, 16)
    assert set(picked.values()) == set(balanced.endpoints)
    assert homes(two_endpoints(ScriptedModel(), ScriptedModel()), 16).keys() == picked.keys()
    assert all(balanced.pick(sample(key)) is home for key, home in picked.items())


async def test_a_paused_endpoint_sends_its_samples_elsewhere_until_the_pause_ends():
    def limited(request: ChatRequest) -> str:
        raise RateLimited("slow down", retry_after=60)

    first, second = ScriptedModel(limited), ScriptedModel()
    balanced = two_endpoints(first, second)
    key = next(k for k, home in homes(balanced, 16).items() if home is balanced.endpoints[0])
    with pytest.raises(RateLimited):
        await balanced.complete(sample(key))  # the 429 pauses the sample's endpoint
    assert (await balanced.complete(sample(key))).text == "2+2?"
    assert len(second.calls) == 1
    balanced.endpoints[0].paused_until = time.monotonic()  # the pause is over
    assert balanced.pick(sample(key)) is balanced.endpoints[0]


@pytest.mark.parametrize("status", [401, 403])
async def test_an_endpoint_that_refuses_its_key_loses_its_samples_and_their_call(status):
    def refuse(request: ChatRequest) -> str:
        raise RequestRejected("bad key", status=status)

    first, second = ScriptedModel(refuse), ScriptedModel()
    balanced = two_endpoints(first, second)
    key = next(k for k, home in homes(balanced, 16).items() if home is balanced.endpoints[0])
    assert (await balanced.complete(sample(key))).text == "2+2?"  # refused, then sent on
    assert (await balanced.complete(sample(key))).text == "2+2?"  # straight to the other now
    assert len(second.calls) == 2 and balanced.endpoints[0].refused
    assert all(p is balanced.endpoints[1] for p in homes(balanced, 16).values())


async def test_a_request_every_endpoint_refuses_fails_and_a_bad_request_is_not_moved():
    def refuse(request: ChatRequest) -> str:
        raise RequestRejected("bad key", status=401)

    balanced = two_endpoints(ScriptedModel(refuse), ScriptedModel(refuse))
    for _ in range(2):
        with pytest.raises(RequestRejected):
            await balanced.complete(sample("s0"))

    def too_long(request: ChatRequest) -> str:
        raise RequestRejected("context too long", status=400)

    first, second = ScriptedModel(too_long), ScriptedModel()
    balanced = two_endpoints(first, second)
    key = next(k for k, home in homes(balanced, 16).items() if home is balanced.endpoints[0])
    with pytest.raises(RequestRejected, match="context too long"):
        await balanced.complete(sample(key))  # the request is at fault, not the endpoint
    assert not second.calls and not balanced.endpoints[0].refused


async def test_a_full_endpoint_sends_its_samples_to_the_least_loaded_one():
    held, other = Held(), ScriptedModel()
    balanced = two_endpoints(held, other, cap=2)
    key = next(k for k, home in homes(balanced, 16).items() if home is balanced.endpoints[0])
    waiting = [asyncio.ensure_future(balanced.complete(sample(key))) for _ in range(2)]
    await asyncio.sleep(0)
    assert balanced.endpoints[0].in_flight == 2  # full
    await balanced.complete(sample(key))
    assert len(other.calls) == 1
    held.release.set()
    assert [c.text for c in await asyncio.gather(*waiting)] == ["ok", "ok"]


async def test_requests_without_a_sample_go_to_the_least_loaded_endpoint():
    held, other = Held(), ScriptedModel()
    balanced = two_endpoints(held, other)
    waiting = asyncio.ensure_future(balanced.chat("first"))  # to the first endpoint: a tie
    await asyncio.sleep(0)
    await balanced.chat("second")
    assert [c.request.messages[0]["content"] for c in other.calls] == ["second"]
    held.release.set()
    await waiting


def test_the_affinity_is_neither_in_the_cache_key_nor_on_the_wire():
    plain, pinned = make_request("2+2?"), sample("s1")
    assert plain.fingerprint("m") == pinned.fingerprint("m")
    assert plain.params() == pinned.params()
