import asyncio
import json
import select
import socket
import threading
import time
import urllib.error
import urllib.request

import aiohttp
import pytest
from aiohttp import web

from maslab.llm.scripted import Script, count_prompt_tokens, count_tokens
from maslab.testing.fake_server import FakeOpenAIServer

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2 + 2? Answer, please."},
]


@pytest.fixture
async def session():
    async with aiohttp.ClientSession() as session:
        yield session


async def post(session, server, body=None, *, headers=None, path="/chat/completions"):
    """POST a chat request; returns (status, headers, raw text)."""
    data = json.dumps({"messages": MESSAGES} if body is None else body)
    async with session.post(server.base_url + path, data=data, headers=headers) as resp:
        return resp.status, resp.headers, await resp.text()


async def chat(session, server, prompt, **params):
    """A successful completion's JSON for one user prompt."""
    body = {"messages": [{"role": "user", "content": prompt}], **params}
    status, _, text = await post(session, server, body)
    assert status == 200, text
    return json.loads(text)


async def test_echo_with_exact_usage(session):
    with FakeOpenAIServer() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        status, _, text = await post(session, server, {"messages": MESSAGES, "model": "m1"})
    assert status == 200
    data = json.loads(text)
    content = MESSAGES[-1]["content"]
    assert data["object"] == "chat.completion"
    assert data["id"] and isinstance(data["created"], int)
    assert data["model"] == "m1"
    assert data["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
    ]
    prompt, completion = count_prompt_tokens(MESSAGES), count_tokens(content)
    assert data["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    assert (server.requests, server.served) == (1, 1)
    assert server.request_log == [{"body": {"messages": MESSAGES, "model": "m1"}, "fault": None}]


async def test_default_model_name(session):
    with FakeOpenAIServer(model="tiny") as server:
        assert (await chat(session, server, "hi"))["model"] == "tiny"


async def test_list_script_then_script_error(session):
    with FakeOpenAIServer(["first", "second"]) as server:
        answers = [(await chat(session, server, "q"))["choices"][0]["message"]["content"]]
        answers.append((await chat(session, server, "q"))["choices"][0]["message"]["content"])
        status, _, text = await post(session, server)
    assert answers == ["first", "second"]
    assert status == 500
    assert "script" in json.loads(text)["error"]["message"]
    assert (server.requests, server.served) == (3, 2)


async def test_pattern_script_and_script_instance(session):
    script = Script({r"capital of France": "Paris", r"\d\+\d": lambda r: "4"}, default="?")
    with FakeOpenAIServer(script) as server:
        texts = [
            (await chat(session, server, p))["choices"][0]["message"]["content"]
            for p in ("The capital of France?", "2+2", "something else")
        ]
    assert texts == ["Paris", "4", "?"]


async def test_models_route(session):
    with FakeOpenAIServer(model="tiny") as server:
        async with session.get(server.base_url + "/models") as resp:
            assert resp.status == 200
            data = await resp.json()
    assert [m["id"] for m in data["data"]] == ["tiny"]
    assert server.requests == 0


@pytest.mark.parametrize(
    "body", ["not json", "[1, 2]", "{}", '{"messages": []}', '{"messages": [{"role": "user"}]}']
)
async def test_bad_request_bodies(session, body):
    with FakeOpenAIServer() as server:
        async with session.post(server.base_url + "/chat/completions", data=body) as resp:
            assert resp.status == 400
            assert "error" in await resp.json()
    assert (server.requests, server.served, server.request_log) == (1, 0, [])


async def test_fault_429_has_retry_after(session):
    with FakeOpenAIServer(schedule=["429"], retry_after=2.5) as server:
        status, headers, text = await post(session, server)
    assert status == 429
    assert headers["Retry-After"] == "2.5"
    assert json.loads(text)["error"]["code"] == "rate_limit_exceeded"


@pytest.mark.parametrize("kind", ["500", "503"])
async def test_fault_server_errors(session, kind):
    with FakeOpenAIServer(schedule={1: kind}) as server:
        status, _, text = await post(session, server)
    assert status == int(kind)
    assert json.loads(text)["error"]["type"] == "server_error"
    assert server.fault_counts == {kind: 1}
    assert server.served == 0


@pytest.mark.parametrize(
    ("fault", "code"), [("400", "invalid_value"), ("context_length", "context_length_exceeded")]
)
async def test_faults_400_are_rejected_requests(session, fault, code):
    with FakeOpenAIServer(schedule={1: fault}) as server:
        status, _, text = await post(session, server)
    assert status == 400
    assert json.loads(text)["error"]["code"] == code
    assert server.fault_counts == {fault: 1} and server.served == 0


async def test_fault_malformed_body_is_not_json(session):
    with FakeOpenAIServer(schedule=["malformed"]) as server:
        status, headers, text = await post(session, server)
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


async def test_fault_empty_choices(session):
    with FakeOpenAIServer(schedule=["empty_choices"]) as server:
        status, _, text = await post(session, server)
    assert status == 200
    data = json.loads(text)
    assert data["object"] == "chat.completion"
    assert data["choices"] == []
    assert (server.served, server.served_prompt_tokens) == (0, 0)


class PatientRunner(web.AppRunner):
    """A runner that gives handlers an hour to finish at shutdown (the server's gives them 1 s)."""

    def __init__(self, app: web.Application, **kwargs) -> None:
        super().__init__(app, **{**kwargs, "shutdown_timeout": 3600})


async def arrived(server: FakeOpenAIServer, requests: int) -> None:
    """Wait until the server holds ``requests`` requests (a guard against a hang: 60 s)."""
    async with asyncio.timeout(60):
        while server.in_flight < requests:
            await asyncio.sleep(0.01)


async def test_hang_times_out_client_and_stop_wakes_it(session, monkeypatch):
    # stop returns only by waking the hanging handler: its runner would wait an hour for it, and
    # stop gives up (raising TimeoutError) after 10 s
    monkeypatch.setattr(web, "AppRunner", PatientRunner)
    server = FakeOpenAIServer(schedule=["hang"]).start()
    try:
        posting = asyncio.ensure_future(post(session, server))
        await arrived(server, 1)
        with pytest.raises(asyncio.TimeoutError):  # it hangs: no answer comes
            await asyncio.wait_for(posting, 0.3)
        assert server.in_flight == 1
    finally:
        server.stop()
    assert server.fault_counts == {"hang": 1}
    assert server.in_flight == 0
    server.stop()  # twice is harmless


async def test_hang_ends_by_dropping_the_connection(session):
    with FakeOpenAIServer(schedule=["hang"], hang_s=0.1) as server:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await post(session, server)
        assert (await chat(session, server, "still here"))["choices"]


async def test_schedule_by_request_number(session):
    with FakeOpenAIServer(schedule={2: "500", 4: "429"}) as server:
        statuses = [(await post(session, server))[0] for _ in range(5)]
        assert statuses == [200, 500, 200, 429, 200]
        server.set_faults(schedule=[None, "503"])
        statuses = [(await post(session, server))[0] for _ in range(3)]
        assert statuses == [200, 503, 200]
        server.set_faults(faults={"500": 1.0})
        assert (await post(session, server))[0] == 500
    assert server.fault_counts == {"500": 2, "429": 1, "503": 1}
    assert [e["fault"] for e in server.request_log] == [
        None, "500", None, "429", None, None, "503", None, "500"
    ]  # fmt: skip


async def test_schedule_wins_over_rates(session):
    with FakeOpenAIServer(faults={"500": 1.0}, schedule=["429"]) as server:
        statuses = [(await post(session, server))[0] for _ in range(2)]
    assert statuses == [429, 500]


async def test_fault_rates_are_deterministic_per_seed(session):
    async def statuses(seed):
        with FakeOpenAIServer(faults={"429": 0.3, "503": 0.2}, seed=seed) as server:
            out = [(await post(session, server))[0] for _ in range(40)]
        assert server.fault_counts == {"429": out.count(429), "503": out.count(503)}
        return out

    first, again, other = await statuses(7), await statuses(7), await statuses(8)
    assert first == again
    assert first != other
    assert 0 < first.count(429) < 40 and 0 < first.count(503) < 40 and 200 in first


def test_invalid_fault_configuration():
    with pytest.raises(ValueError, match="unknown fault"):
        FakeOpenAIServer(faults={"418": 0.5})
    with pytest.raises(ValueError, match="unknown fault"):
        FakeOpenAIServer(schedule=["timeout"])
    with pytest.raises(ValueError, match="rates"):
        FakeOpenAIServer(faults={"429": 0.7, "500": 0.7})


async def test_latency_is_applied(session):
    with FakeOpenAIServer(latency=0.2) as server:
        started = time.monotonic()
        await chat(session, server, "slow")
        assert time.monotonic() - started >= 0.2
    with FakeOpenAIServer(latency=(0.1, 0.15)) as server:
        started = time.monotonic()
        await chat(session, server, "slow")
        assert time.monotonic() - started >= 0.1


@pytest.mark.system
async def test_peak_in_flight_concurrent_and_sequential(session):
    with FakeOpenAIServer(latency=0.2) as server:
        await asyncio.gather(*(chat(session, server, f"q{i}") for i in range(10)))
        assert (server.peak_in_flight, server.in_flight, server.served) == (10, 0, 10)
        server.reset_stats()
        assert (server.peak_in_flight, server.requests) == (0, 0)
        for i in range(3):
            await chat(session, server, f"s{i}")
        assert (server.peak_in_flight, server.requests) == (1, 3)


async def test_arrival_times_bracket_the_requests(session):
    with FakeOpenAIServer() as server:
        assert (server.first_arrival, server.last_arrival) == (None, None)
        before = time.time()
        await chat(session, server, "one")
        await chat(session, server, "two")
        first, last = server.first_arrival, server.last_arrival
        assert first is not None and last is not None
        assert before <= first <= last <= time.time()
        server.reset_stats()
        assert (server.first_arrival, server.last_arrival) == (None, None)


def test_hundreds_of_connections_queue_while_the_loop_is_busy():
    """Handshakes complete in the kernel's accept queue even while the server's loop is busy
    (aiohttp's default backlog of 128 would leave the rest waiting on SYN retransmits)."""
    with FakeOpenAIServer() as server:
        busy = threading.Event()
        # hold the loop (nothing is accepted) for longer than the handshakes may take: they must
        # complete while it is held, whatever the machine's load
        server._loop.call_soon_threadsafe(busy.wait, 120)
        sockets = []
        try:
            for _ in range(400):
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", server.port))
                sockets.append(s)
            pending, deadline = list(sockets), time.monotonic() + 60
            while pending and time.monotonic() < deadline:
                _, writable, _ = select.select([], pending, [], 0.1)
                pending = [s for s in pending if s not in writable]
            assert not pending, f"{len(pending)} of 400 connections never completed"
        finally:
            busy.set()
            for s in sockets:
                s.close()


async def test_peak_in_flight_counts_faulted_requests(session):
    with FakeOpenAIServer(latency=0.2, faults={"503": 1.0}) as server:
        await asyncio.gather(*(post(session, server) for _ in range(4)))
    assert (server.peak_in_flight, server.served, server.fault_counts) == (4, 0, {"503": 4})


async def test_served_tokens_match_reported_usage(session):
    with FakeOpenAIServer(schedule={2: "500"}) as server:
        prompts = ["one", "two words", "three, with punctuation!", "four"]
        results = [await post(session, server, {"messages": [{"role": "user", "content": p}]})
                   for p in prompts]  # fmt: skip
    usages = [json.loads(text)["usage"] for status, _, text in results if status == 200]
    assert len(usages) == 3
    assert server.served_prompt_tokens == sum(u["prompt_tokens"] for u in usages)
    assert server.served_completion_tokens == sum(u["completion_tokens"] for u in usages)


async def test_api_key_is_enforced(session):
    with FakeOpenAIServer(api_key="sk-test") as server:
        assert (await post(session, server))[0] == 401
        status, _, text = await post(session, server, headers={"Authorization": "Bearer nope"})
        assert status == 401
        assert json.loads(text)["error"]["code"] == "invalid_api_key"
        async with session.get(server.base_url + "/models") as resp:
            assert resp.status == 401
        status, _, _ = await post(session, server, headers={"Authorization": "Bearer sk-test"})
        assert status == 200
    assert (server.requests, server.served) == (3, 1)


async def test_echo_key_repeats_the_authorization_header(session):
    with FakeOpenAIServer(api_key="sk-test", echo_key=True, schedule=[None, "500", None]) as server:
        status, _, text = await post(session, server, headers={"Authorization": "Bearer nope"})
        assert status == 401 and "(sent: Bearer nope)" in json.loads(text)["error"]["message"]
        good = {"Authorization": "Bearer sk-test"}
        status, _, text = await post(session, server, headers=good)
        assert status == 500 and "(sent: Bearer sk-test)" in json.loads(text)["error"]["message"]
        status, _, text = await post(session, server, headers=good)
        reply = json.loads(text)
        content = reply["choices"][0]["message"]["content"]
        assert content == f"Bearer sk-test\n{MESSAGES[-1]['content']}"
        assert reply["usage"]["completion_tokens"] == count_tokens(content)


async def test_max_tokens_truncates_with_length_reason(session):
    text = "Hello, big world of tokens"
    with FakeOpenAIServer(Script([text], cycle=True)) as server:
        data = await chat(session, server, "x", max_tokens=3)
        assert data["choices"][0]["message"]["content"] == "Hello, big"
        assert data["choices"][0]["finish_reason"] == "length"
        assert data["usage"]["completion_tokens"] == 3
        data = await chat(session, server, "x", max_tokens=50)
        assert data["choices"][0]["finish_reason"] == "stop"
        assert data["choices"][0]["message"]["content"] == text


async def test_stop_strings_cut_the_text(session):
    with FakeOpenAIServer() as server:
        data = await chat(session, server, "alpha beta\nEND gamma", stop=["gamma", "\nEND"])
        assert data["choices"][0]["message"]["content"] == "alpha beta"
        assert data["usage"]["completion_tokens"] == 2
        data = await chat(session, server, "alpha beta gamma", stop="gamma", max_tokens=1)
        assert data["choices"][0]["message"]["content"] == "alpha"
        assert data["choices"][0]["finish_reason"] == "length"
    assert server.request_log[0]["body"]["stop"] == ["gamma", "\nEND"]


def test_sync_use_with_urllib():
    with FakeOpenAIServer(["sync answer"], schedule={2: "429"}) as server:
        body = json.dumps({"messages": MESSAGES}).encode()
        request = urllib.request.Request(
            server.base_url + "/chat/completions",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            data = json.loads(resp.read())
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=5)
        assert err.value.code == 429
        assert err.value.headers["Retry-After"] == "1"
        err.value.close()
    assert data["choices"][0]["message"]["content"] == "sync answer"
    assert (server.requests, server.served) == (2, 1)


def test_restart_after_stop():
    server = FakeOpenAIServer()
    with server:
        first = server.base_url
    with pytest.raises(RuntimeError):
        _ = server.base_url
    with server, urllib.request.urlopen(server.base_url + "/models", timeout=5) as resp:
        assert resp.status == 200
    assert first.startswith("http://127.0.0.1:")
