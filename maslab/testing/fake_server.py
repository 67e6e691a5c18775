"""A fake OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

It answers from a :class:`~maslab.llm.scripted.Script` (text, or a
:class:`~maslab.llm.scripted.Reply` with tool calls; the script sees the request's tools and
response format), can add latency and inject faults (rate limits, server errors, hangs, broken
bodies), and counts what it served::

    with FakeOpenAIServer(["4"], faults={"429": 0.2}, seed=1) as server:
        client = OpenAI(base_url=server.base_url, api_key="x")
        ...
        assert server.served == 1

The server runs on its own event loop in a daemon thread, so it works from synchronous code and
from async tests alike. Request numbers (for ``schedule``) count chat-completion requests from
construction or from the last :meth:`FakeOpenAIServer.set_faults` call. Every chat-completion
request waits out the latency; faults apply to authorized, well-formed requests.
``first_arrival`` and ``last_arrival`` are the wall-clock times (``time.time()``) of the first
and latest chat request since the last :meth:`FakeOpenAIServer.reset_stats`, for benchmarks that
time a client in another process. The listening socket takes a backlog of :data:`BACKLOG`
connections, so a client opening hundreds at once is not held back by refused handshakes.

``echo_key=True`` plays a careless server that echoes the request's ``Authorization`` header:
in 401 and 5xx error messages and at the start of every completion, so tests can check that a
key never persists.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from maslab.llm.scripted import (
    _TOKEN,
    Reply,
    Script,
    ScriptError,
    ScriptSource,
    as_reply,
    count_prompt_tokens,
    count_tokens,
    echo,
)
from maslab.llm.types import ChatRequest
from maslab.llm.wire import completion_body, error_response, json_response, parse_chat

BACKLOG = 2048  # pending connections the listening socket queues (aiohttp's default is 128)
FAULTS = ("429", "500", "503", "400", "context_length", "hang", "malformed", "empty_choices")

Latency = float | tuple[float, float] | Callable[[], float]
Schedule = Mapping[int, str] | Sequence[str | None]


def _limit(text: str, stop: Sequence[str] | None, max_tokens: int | None) -> tuple[str, str]:
    """Cut ``text`` at the first stop string, then to ``max_tokens``; returns the finish reason."""
    cuts = [i for s in stop or () if s and (i := text.find(s)) >= 0]
    if cuts:
        text = text[: min(cuts)]
    tokens = list(_TOKEN.finditer(text))
    if max_tokens is not None and len(tokens) > max_tokens:
        return (text[: tokens[max_tokens - 1].end()] if max_tokens > 0 else ""), "length"
    return text, "stop"


def _schedule(schedule: Schedule | None) -> dict[int, str]:
    if isinstance(schedule, Mapping):
        return {n: kind for n, kind in schedule.items() if kind is not None}
    return {i + 1: kind for i, kind in enumerate(schedule or ()) if kind is not None}


class FakeOpenAIServer:
    """OpenAI-compatible ``/v1/chat/completions`` and ``/v1/models`` on an ephemeral port.

    ``faults`` maps fault kinds (:data:`FAULTS`) to per-request rates; ``schedule`` forces faults
    by 1-based request number and wins over rates. ``latency`` is seconds, a uniform ``(lo, hi)``
    range, or a callable. Random draws use ``random.Random(seed)``. ``report_usage=False``
    leaves token counts out of replies (as some servers do); ``served_*`` still count them.
    ``echo_key`` echoes the Authorization header in errors and completions. ``slots`` serves at
    most that many requests at once, as llama.cpp's server does with ``--parallel``: the others
    wait their turn before their latency starts, and every reply reports its computing time in
    llama.cpp's ``timings`` (``prompt_ms`` and ``predicted_ms``).
    """

    def __init__(
        self,
        script: Script | ScriptSource = echo,
        *,
        latency: Latency = 0.0,
        faults: Mapping[str, float] | None = None,
        schedule: Schedule | None = None,
        retry_after: float = 1.0,
        hang_s: float = 3600.0,
        seed: int = 0,
        model: str = "fake-model",
        api_key: str | None = None,
        report_usage: bool = True,
        echo_key: bool = False,
        slots: int | None = None,
    ) -> None:
        self.script = script if isinstance(script, Script) else Script(script)
        self.latency = latency
        self.retry_after = retry_after
        self.hang_s = hang_s
        self.model = model
        self.api_key = api_key
        self.report_usage = report_usage
        self.echo_key = echo_key
        self.slots = slots
        self._slots: asyncio.Semaphore | None = None
        self.port: int | None = None
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self.in_flight = 0
        self.set_faults(faults, schedule)
        self.reset_stats()

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the server is not running; call start() or use it in a with block")
        return f"http://127.0.0.1:{self.port}/v1"

    # -- control (called from any thread) --

    def set_faults(
        self, faults: Mapping[str, float] | None = None, schedule: Schedule | None = None
    ) -> None:
        """Replace fault rates and schedule; request numbering restarts at 1."""
        rates = dict(faults or {})
        forced = _schedule(schedule)
        unknown = (set(rates) | set(forced.values())) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULTS)}")
        if any(not 0 <= r <= 1 for r in rates.values()) or sum(rates.values()) > 1:
            raise ValueError(f"fault rates must be in [0, 1] and sum to at most 1, got {rates}")
        with self._lock:
            self._rates, self._forced, self._numbered = rates, forced, 0

    def reset_stats(self) -> None:
        """Zero the counters and logs (``in_flight`` keeps counting open requests)."""
        with self._lock:
            self.requests = self.served = 0
            self.served_prompt_tokens = self.served_completion_tokens = 0
            self.peak_in_flight = self.in_flight
            self.first_arrival: float | None = None
            self.last_arrival: float | None = None
            self._fault_counts: dict[str, int] = {}
            self._request_log: list[dict[str, Any]] = []

    @property
    def fault_counts(self) -> dict[str, int]:
        """Faults applied so far, by kind."""
        with self._lock:
            return dict(self._fault_counts)

    @property
    def request_log(self) -> list[dict[str, Any]]:
        """``{"body": parsed JSON, "fault": kind or None}`` per well-formed chat request."""
        with self._lock:
            return list(self._request_log)

    def start(self) -> FakeOpenAIServer:
        """Start serving in a background thread (no-op when running)."""
        if self._thread is not None:
            return self
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="FakeOpenAIServer", daemon=True
        )
        self._thread.start()
        try:
            future = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
            self.port = future.result(timeout=10)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Wake hanging handlers, shut the server down and join its thread (idempotent)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = self._thread = None
        self.port = None
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- server side (on the background loop) --

    async def _serve(self) -> int:
        self._stopping = asyncio.Event()
        self._slots = None if self.slots is None else asyncio.Semaphore(self.slots)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0, backlog=BACKLOG).start()
        return self._runner.addresses[0][1]

    async def _shutdown(self) -> None:
        assert self._stopping is not None and self._runner is not None
        self._stopping.set()
        await self._runner.cleanup()

    async def _wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``, returning early when the server stops."""
        assert self._stopping is not None
        if seconds > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), seconds)

    def _arrive(self) -> str | None:
        """Count a chat request and draw its fault, in arrival order."""
        now = time.time()
        with self._lock:
            self.requests += 1
            self.first_arrival = self.first_arrival or now
            self.last_arrival = now
            self._numbered += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            return self._forced.get(self._numbered) or self._draw_fault()

    def _delay(self) -> float:
        if callable(self.latency):
            return self.latency()
        if isinstance(self.latency, tuple):
            return self._rng.uniform(*self.latency)
        return self.latency

    def _draw_fault(self) -> str | None:
        if not self._rates:
            return None
        draw = self._rng.random()
        for kind, rate in self._rates.items():
            draw -= rate
            if draw < 0:
                return kind
        return None

    def _echo(self, request: web.Request) -> str:
        """`` (sent: <Authorization header>)`` when echoing keys, else nothing."""
        return f" (sent: {request.headers.get('Authorization', '')})" if self.echo_key else ""

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        if self.api_key is None or request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        message = f"Incorrect API key.{self._echo(request)}"
        return error_response(401, message, "invalid_request_error", "invalid_api_key")

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": self.model, "object": "model", "created": 0, "owned_by": "maslab"}
        return self._unauthorized(request) or json_response({"object": "list", "data": [model]})

    async def _chat(self, request: web.Request) -> web.Response:
        fault = self._arrive()
        try:
            async with self._slots or contextlib.nullcontext():
                started = time.monotonic()
                await self._wait(self._delay())
                computing = time.monotonic() - started
            return await self._answer(request, fault, computing)
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _answer(
        self, request: web.Request, fault: str | None, computing: float
    ) -> web.Response:
        if denied := self._unauthorized(request):
            return denied
        try:
            body, chat = parse_chat(await request.read())
        except ValueError as e:
            return error_response(400, f"invalid request body: {e}", "invalid_request_error")
        with self._lock:
            self._request_log.append({"body": body, "fault": fault})
            if fault:
                self._fault_counts[fault] = self._fault_counts.get(fault, 0) + 1
        if fault:
            return await self._fault(request, fault)
        try:
            reply = as_reply(self.script.respond(chat))
        except ScriptError as e:
            return error_response(500, f"the fake server's script failed: {e}", "server_error")
        if self.echo_key:
            auth = request.headers.get("Authorization", "")
            reply = Reply(f"{auth}\n{reply.text}", reply.tool_calls, reply.finish_reason)
        return self._completion(body.get("model") or self.model, chat, reply, computing)

    def _completion(
        self, model: str, chat: ChatRequest, reply: Reply, computing: float
    ) -> web.Response:
        text, finish = _limit(reply.text, chat.stop, chat.max_tokens)
        if reply.tool_calls or reply.finish_reason:
            finish = reply.finish
        written = Reply(text, reply.tool_calls).written
        prompt, completion = count_prompt_tokens(chat.messages), count_tokens(written)
        with self._lock:
            self.served += 1
            self.served_prompt_tokens += prompt
            self.served_completion_tokens += completion
            number = self.served
        usage = {"prompt_tokens": prompt, "completion_tokens": completion}
        body = completion_body(f"fake-{number}", model, text, finish, reply.tool_calls,
                               usage if self.report_usage else None)  # fmt: skip
        if self.slots is not None:  # llama.cpp's split of the computing time; here all of it
            body["timings"] = {"prompt_ms": 0.0, "predicted_ms": computing * 1000}
        return json_response(body)

    async def _fault(self, request: web.Request, kind: str) -> web.Response:
        if kind == "429":
            headers = {"Retry-After": f"{self.retry_after:g}"}
            message = "Rate limit reached (injected by the fake server)."
            return error_response(429, message, "requests", "rate_limit_exceeded", headers)
        if kind == "400":  # a request the server refuses: a client must not retry it
            message = "Invalid value for 'messages' (injected by the fake server)."
            return error_response(400, message, "invalid_request_error", "invalid_value")
        if kind == "context_length":  # a 400 too, which ends the sample like a budget
            message = "This model's maximum context length is exceeded (injected)."
            return error_response(400, message, "invalid_request_error", "context_length_exceeded")
        if kind == "500":
            message = f"The server had an error (injected).{self._echo(request)}"
            return error_response(500, message, "server_error")
        if kind == "503":
            message = f"The engine is currently overloaded (injected).{self._echo(request)}"
            return error_response(503, message, "server_error")
        if kind == "malformed":
            return web.Response(body=b'{"id": "chatcmpl-', content_type="application/json")
        if kind == "empty_choices":
            usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            body = {"id": "chatcmpl-fake-empty", "object": "chat.completion", "created": 0}
            return json_response({**body, "model": self.model, "choices": [], "usage": usage})
        await self._wait(self.hang_s)  # "hang": drop the connection without an answer
        if request.transport is not None:
            request.transport.close()
        return web.Response()
