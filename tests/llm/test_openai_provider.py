"""The openai provider over real HTTP against FakeOpenAIServer, on both transports."""

from __future__ import annotations

import asyncio
import time
from secrets import token_hex

import orjson
import pytest

from maslab.core.context import Context
from maslab.errors import (
    ConfigError,
    ConnectionRefused,
    ContextTooLong,
    LLMConnectionError,
    LLMError,
    LLMTimeout,
    MalformedResponse,
    RateLimited,
    RequestRejected,
    ServerError,
)
from maslab.llm.endpoints import Endpoint
from maslab.llm.openai_compat import says_context_too_long
from maslab.llm.registry import load_model
from maslab.llm.retry import RetryPolicy
from maslab.secrets import MARKER
from maslab.testing.fake_server import FakeOpenAIServer

FAST_RETRY = RetryPolicy(attempts=4, initial_wait=0.01, max_wait=0.05)
TRANSPORTS = ["http", "sdk"]


def model_for(server: FakeOpenAIServer, transport: str = "http", **endpoint: object):
    table = {"fake": [Endpoint(base_url=server.base_url, transport=transport, **endpoint)]}
    return load_model("openai:fake", endpoints=table, retry=FAST_RETRY)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_usage_totals_equal_server_totals_first_call_included(transport):
    with FakeOpenAIServer() as server:
        model = model_for(server, transport)
        ctx = Context(model, sample_id="s1")
        first = await ctx.chat("What is two plus two?", agent="a", round=0)
        assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
        await asyncio.gather(*(ctx.chat(f"question number {i}", agent="b") for i in range(7)))
        totals = ctx.usage
        assert totals.calls == 8 == server.served
        assert totals.prompt_tokens == server.served_prompt_tokens
        assert totals.completion_tokens == server.served_completion_tokens
        record = ctx.ledger.records[0]
        assert (record.sample_id, record.agent, record.round) == ("s1", "a", 0)
        assert record.response == "What is two plus two?"
        await model.aclose()


@pytest.mark.system
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_max_concurrency_caps_in_flight_requests(transport):
    with FakeOpenAIServer(latency=0.05) as server:
        model = model_for(server, transport, max_concurrency=4)
        await asyncio.gather(*(model.chat(f"q{i}") for i in range(24)))
        assert server.served == 24
        assert server.peak_in_flight == 4
        await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_429_and_500_are_retried_and_succeed(transport):
    with FakeOpenAIServer(schedule=["429", "500", "503"], retry_after=0.2) as server:
        model = model_for(server, transport)
        started = time.monotonic()
        completion = await model.chat("hello")
        assert completion.text == "hello"
        assert server.requests == 4
        assert time.monotonic() - started >= 0.2  # Retry-After honoured
        await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_permanent_failure_raises_llm_error_after_configured_attempts(transport):
    with FakeOpenAIServer(faults={"500": 1.0}) as server:
        model = model_for(server, transport)
        with pytest.raises(ServerError) as info:
            await model.chat("hello")
        assert server.requests == FAST_RETRY.attempts
        assert info.value.attempts == FAST_RETRY.attempts
        assert "after 4 attempts" in str(info.value)
        assert isinstance(info.value, LLMError)
        await model.aclose()


@pytest.mark.system
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_hanging_request_times_out(transport):
    with FakeOpenAIServer(faults={"hang": 1.0}) as server:  # every request hangs for an hour
        table = {"fake": [Endpoint(base_url=server.base_url, transport=transport, timeout=0.3)]}
        model = load_model(
            "openai:fake", endpoints=table, retry=RetryPolicy(attempts=2, initial_wait=0)
        )
        with pytest.raises(LLMTimeout):
            # the endpoint's 0.3 s, not the default 600 s: the guard (a hang's TimeoutError, no
            # LLMTimeout) trips only if a request waits longer than two minutes
            await asyncio.wait_for(model.chat("hello"), 120)
        assert server.requests == 2
        await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_malformed_and_empty_replies_are_retried_and_succeed(transport):
    with FakeOpenAIServer(schedule=["malformed", "empty_choices"]) as server:
        model = model_for(server, transport)
        completion = await model.chat("hello")
        assert completion.text == "hello" and server.requests == 3
        await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("fault", ["malformed", "empty_choices"])
async def test_unusable_bodies_are_typed_errors_after_the_policys_attempts(transport, fault):
    with FakeOpenAIServer(faults={fault: 1.0}) as server:
        model = model_for(server, transport)
        with pytest.raises(MalformedResponse) as info:
            await model.chat("hello")
        assert server.requests == FAST_RETRY.attempts == info.value.attempts
        assert info.value.model == f"openai:fake@{server.base_url}"  # like every other error
        await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_rate_limit_exhaustion_is_rate_limited_error(transport):
    with FakeOpenAIServer(faults={"429": 1.0}, retry_after=0.01) as server:
        model = model_for(server, transport)
        with pytest.raises(RateLimited) as info:
            await model.chat("hello")
        assert info.value.retry_after == pytest.approx(0.01)
        assert server.requests == FAST_RETRY.attempts
        await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_api_key_is_sent_and_never_leaks(transport, monkeypatch, caplog):
    secret = "sk-test-very-secret-0042"
    monkeypatch.setenv("MASLAB_TEST_KEY", secret)
    with FakeOpenAIServer(api_key=secret) as server:
        model = model_for(server, transport, api_key_env="MASLAB_TEST_KEY")
        ctx = Context(model)
        await ctx.chat("hello")
        monkeypatch.setenv("MASLAB_TEST_KEY", "sk-wrong-key-0043")
        wrong = model_for(server, transport, api_key_env="MASLAB_TEST_KEY")
        with pytest.raises(RequestRejected) as info:
            await Context(wrong).chat("hello")
        assert info.value.status == 401 and server.requests == 2  # 401 is not retried
        visible = " ".join(
            [str(info.value), repr(model), repr(wrong), caplog.text]
            + [str(r.to_dict()) for r in ctx.ledger.records]
        )
        assert secret not in visible and "sk-wrong-key-0043" not in visible
        await model.aclose()
        await wrong.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_echoed_key_reaches_no_error_or_completion(transport, monkeypatch):
    secret, wrong = f"zq-{token_hex(12)}", f"zq-{token_hex(12)}"  # not key-shaped: registry only
    monkeypatch.setenv("MASLAB_ECHO_KEY", secret)
    with FakeOpenAIServer(api_key=secret, echo_key=True, schedule=["500"]) as server:
        model = model_for(server, transport, api_key_env="MASLAB_ECHO_KEY")
        completion = await model.chat("hello")  # a 500 echoing the key, then an echoing reply
        assert completion.text == f"Bearer {MARKER}\nhello"
        assert secret not in orjson.dumps(completion.raw).decode()
        server.set_faults({"500": 1.0})
        with pytest.raises(ServerError) as failed:
            await model.chat("again")
        monkeypatch.setenv("MASLAB_ECHO_KEY", wrong)
        rejected = model_for(server, transport, api_key_env="MASLAB_ECHO_KEY")
        with pytest.raises(RequestRejected) as refused:
            await rejected.chat("hello")
        for error in (failed.value, refused.value):
            assert f"(sent: Bearer {MARKER})" in str(error)
            assert secret not in str(error) and wrong not in str(error)
        await model.aclose()
        await rejected.aclose()


async def test_the_endpoints_file_sets_an_aliases_retry_policy(tmp_path):
    with FakeOpenAIServer(faults={"500": 1.0}) as server:
        path = tmp_path / "endpoints.yaml"
        entry = f"  - base_url: {server.base_url}\n    retry: {{attempts: 2, initial_wait: 0}}\n"
        path.write_text(f"fake:\n{entry}")
        model = load_model("openai:fake", endpoints=path, retry=FAST_RETRY)  # the file wins
        with pytest.raises(ServerError) as info:
            await model.chat("hello")
        assert server.requests == 2 == info.value.attempts
        await model.aclose()
        path.write_text(f"fake:\n{entry}{entry.replace('attempts: 2', 'attempts: 3')}")
        with pytest.raises(ConfigError, match="'fake': its endpoints set different retry"):
            load_model("openai:fake", endpoints=path)


def test_missing_api_key_variable_names_it(monkeypatch):
    monkeypatch.delenv("MASLAB_MISSING_KEY", raising=False)
    table = {"m": [Endpoint(base_url="http://127.0.0.1:9/v1", api_key_env="MASLAB_MISSING_KEY")]}
    with pytest.raises(ConfigError, match="MASLAB_MISSING_KEY is not set"):
        load_model("openai:m", endpoints=table)


async def test_requests_are_balanced_across_endpoints_by_least_in_flight():
    with FakeOpenAIServer(latency=0.05) as a, FakeOpenAIServer(latency=0.05) as b:
        table = {
            "m": [
                Endpoint(base_url=a.base_url, max_concurrency=3),
                Endpoint(base_url=b.base_url, max_concurrency=3),
            ]
        }
        model = load_model("openai:m", endpoints=table)
        await asyncio.gather(*(model.chat(f"q{i}") for i in range(12)))
        assert a.served == b.served == 6
        assert a.peak_in_flight <= 3 and b.peak_in_flight <= 3
        await model.aclose()


async def test_model_at_url_spec_reaches_a_keyless_server():
    with FakeOpenAIServer(model="served") as server:
        model = load_model(f"openai:served@{server.base_url}")
        completion = await model.chat("ping")
        assert completion.text == "ping"
        assert server.request_log[0]["body"]["model"] == "served"
        await model.aclose()


async def test_sampling_parameters_reach_the_server():
    with FakeOpenAIServer() as server:
        model = model_for(server)
        await model.chat("hi", temperature=0.3, top_p=0.9, max_tokens=5, stop=["X"], seed=7)
        body = server.request_log[0]["body"]
        assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.3, 0.9, 5)
        assert (body["stop"], body["seed"]) == (["X"], 7)
        await model.aclose()


@pytest.mark.parametrize(
    "payload",
    [
        [],
        {"choices": "none"},
        {"choices": [{"message": "hi"}]},
        {"choices": [{"message": {"content": ["a", "b"]}}]},
        {"choices": [{"message": {"content": 42}}]},
    ],
)
def test_a_reply_that_is_not_a_text_completion_is_malformed(payload):
    from maslab.errors import MalformedResponse
    from maslab.llm.openai_compat import completion_from_payload
    from maslab.llm.types import make_request

    with pytest.raises(MalformedResponse):
        completion_from_payload(payload, "m", 0.0, make_request([{"role": "user", "content": "q"}]))


@pytest.mark.parametrize(
    "usage",
    [[1, 2], {"prompt_tokens": True, "completion_tokens": 3}, {"prompt_tokens": -5,
     "completion_tokens": 3}, {"prompt_tokens": "7", "completion_tokens": 3}],
)  # fmt: skip
def test_token_counts_a_server_cannot_mean_are_estimated(usage):
    from maslab.llm.openai_compat import completion_from_payload
    from maslab.llm.types import make_request

    reply = {"choices": [{"message": {"content": "four"}, "finish_reason": 7}], "usage": usage}
    request = make_request([{"role": "user", "content": "what is 2+2?"}])
    completion = completion_from_payload(reply, "m", 0.0, request)
    assert completion.text == "four" and completion.usage.estimated
    assert completion.usage.prompt_tokens > 0 and completion.finish_reason is None


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("2.5", 2.5), ("-3", 0.0), ("1e9", 60.0), ("inf", None), ("nan", None), ("soon", None)],
)
def test_retry_after_is_read_and_bounded(header, seconds):
    from maslab.llm.openai_compat import parse_retry_after

    assert parse_retry_after(header) == seconds


def test_a_servers_retry_after_waits_at_most_the_policys_max_wait():
    from types import SimpleNamespace

    from tenacity import RetryCallState

    from maslab.errors import RateLimited
    from maslab.llm.retry import Retrying

    inner = SimpleNamespace(name="stub")
    retrying = Retrying(inner, RetryPolicy(attempts=3, initial_wait=0, max_wait=0.5))  # type: ignore[arg-type]
    state = RetryCallState(None, None, (), {})
    state.set_exception((RateLimited, RateLimited("slow down", retry_after=60.0), None))
    assert retrying._wait(state) == 0.5


async def test_a_flood_of_a_body_is_malformed_not_out_of_memory(monkeypatch):
    from aiohttp import web

    from maslab.errors import MalformedResponse
    from maslab.llm import openai_compat

    monkeypatch.setattr(openai_compat, "MAX_BODY_BYTES", 1 << 20)

    async def flood(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()  # chunked: no Content-Length to refuse up front
        await response.prepare(request)
        for _ in range(64):
            await response.write(b"x" * 65536)
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", flood)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    table = {"flood": [Endpoint(base_url=f"http://127.0.0.1:{port}/v1")]}
    model = load_model("openai:flood", endpoints=table, retry=RetryPolicy(attempts=1))
    try:
        with pytest.raises(MalformedResponse, match="over 1 MB"):
            await model.chat("hello")
    finally:
        await model.aclose()
        await runner.cleanup()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_prompt_over_the_context_window_is_its_own_error_and_not_retried(transport):
    with FakeOpenAIServer(schedule=["context_length", "400"]) as server:
        model = model_for(server, transport)
        with pytest.raises(ContextTooLong) as full:
            await model.chat("hello")
        with pytest.raises(RequestRejected) as refused:
            await model.chat("hello")
        assert server.requests == 2  # neither retried
    assert full.value.status == 400 and "maximum context length" in str(full.value)
    assert not isinstance(refused.value, ContextTooLong)
    await model.aclose()


@pytest.mark.parametrize(
    "detail",
    [
        "This model's maximum context length is 8192 tokens. However, you requested 10240 tokens",
        "Requested tokens (9000) exceed context window of 8192",  # llama-cpp-python's engine
        '{"code": "context_length_exceeded"}',
        "prompt is too long: 210000 tokens > 200000 maximum",
        "Input is too long for requested model.",
        "This model's max context window is 4096; too many input tokens",
    ],
)
def test_the_wordings_of_a_full_context_window_are_recognised(detail):
    assert says_context_too_long(detail)


@pytest.mark.parametrize(
    "detail", ["Invalid value for 'messages'", "The model `x` does not exist", "context: bad"]
)
def test_other_refusals_are_not_taken_for_a_full_context_window(detail):
    assert not says_context_too_long(detail)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_refused_connection_on_this_machine_is_not_retried(transport, host):
    url = f"http://{host}:{closed_port()}/v1"
    table = {"down": [Endpoint(base_url=url, transport=transport)]}
    model = load_model("openai:down", endpoints=table, retry=FAST_RETRY)
    with pytest.raises(ConnectionRefused) as refused:
        await model.chat("hi")
    assert refused.value.attempts == 1 and not refused.value.retryable
    assert str(refused.value).startswith(f"openai:down@{url}: connection refused")
    assert isinstance(refused.value, LLMConnectionError)  # an endpoint failure, for the run


def test_a_refused_connection_elsewhere_is_retried_as_any_connection_error():
    from maslab.llm.openai_compat import OpenAIHTTP

    cause = ConnectionRefusedError(111, "Connect call failed")
    error = OSError("Cannot connect to host gpu1:8000")
    error.__cause__ = cause
    remote = OpenAIHTTP(Endpoint(base_url="http://gpu1:8000/v1"), "m", None, 1)
    assert type(remote.connection_error(error, "down")) is LLMConnectionError
    local = OpenAIHTTP(Endpoint(base_url="http://[::1]:8000/v1"), "m", None, 1)
    assert type(local.connection_error(error, "down")) is ConnectionRefused


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_single_slot_servers_queueing_is_told_apart_from_model_time(transport):
    # a llama.cpp-style server with one slot: three calls sent at once are computed one after
    # another, and each reply's timings say how long it was computed
    with FakeOpenAIServer(latency=0.2, slots=1) as server:
        model = model_for(server, transport)
        ctx = Context(model, sample_id="s1")
        await asyncio.gather(*(ctx.chat(f"question {i}", agent=f"a{i}") for i in range(3)))
        totals = ctx.usage
        computing = totals.latency_s - totals.queued_s
        assert computing == pytest.approx(0.6, abs=0.15)  # three calls of 0.2 s each
        assert totals.queued_s > 0.3  # ideally 0 + 0.2 + 0.4: the later two waited
        assert all(0 <= r.queued_s < r.latency_s for r in ctx.ledger.records)
        await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_without_timings_has_no_queueing_said(transport):
    with FakeOpenAIServer(latency=0.05) as server:
        model = model_for(server, transport)
        ctx = Context(model, sample_id="s1")
        await asyncio.gather(*(ctx.chat(f"question {i}") for i in range(2)))
        assert ctx.usage.queued_s == 0 and ctx.usage.latency_s > 0.09
        await model.aclose()


@pytest.mark.parametrize(
    ("timings", "queued"),
    [
        ({"prompt_ms": 100, "predicted_ms": 400.0}, 0.5),
        ({"prompt_ms": 900, "predicted_ms": 400}, 0.0),  # a clock that disagrees: never below 0
        ({"prompt_ms": 100}, 0.0),
        ({"prompt_ms": "100", "predicted_ms": 400}, 0.0),
        ({"prompt_ms": True, "predicted_ms": 400}, 0.0),
        ([100, 400], 0.0),
        (None, 0.0),
    ],
)
def test_queueing_is_the_latency_less_the_servers_computing_time(timings, queued):
    from maslab.llm.openai_compat import queued_at_server

    assert queued_at_server(timings, 1.0) == pytest.approx(queued)
