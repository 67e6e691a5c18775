"""A sample's front door: an OpenAI-compatible chat-completions server on 127.0.0.1 through
which a system written with any OpenAI client (AutoGen, LangGraph, plain ``openai``...) makes
its calls as the sample's own (the ``external`` method).

:func:`front_door` serves one sample, for as long as the ``async with`` lasts, and gives its
:class:`ClientConfig`: the base URL, a key that only this sample's door accepts, and the model
names it routes (``model``: the sample's model; each model role's name: that role's model and
sampling; each alias of the run's endpoints file: that alias's servers). Each request becomes
a call of the sample's context (:meth:`~maslab.core.context.Context.chat`): budgeted, cached
and replayed by draw, retried,
gated under the run's concurrency and the endpoints' caps, traced and counted, under the agent
name the client sends (the body's ``user``, else the ``X-Agent`` header, else the model name).

Chat completions with tools, JSON mode and streaming (``stream: true``, server-sent events) are
served; ``GET /v1/models`` lists the names; any other route is a 404 in OpenAI's error form. A
budget stop answers 429 ``insufficient_quota`` with ``x-should-retry: false`` (the OpenAI SDK
then does not retry), and is kept: :attr:`FrontDoor.stopped` says why the sample must end. A
call the model failed for good answers 502, also not to be retried (maslab retried already).
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from maslab.core.context import Context
from maslab.errors import BudgetExceeded, LLMError, SampleEnded
from maslab.llm.wire import (
    completion_body,
    error_response,
    json_response,
    parse_chat,
    stream_events,
)

DEFAULT_MODEL = "default"
"""The model name that routes to the sample's own model."""
AGENT_HEADER = "X-Agent"
NOT_RETRIED = {"x-should-retry": "false"}


@dataclass(frozen=True)
class ClientConfig(Mapping[str, Any]):
    """What an OpenAI client needs to reach the sample's door, as attributes and as a mapping:
    ``base_url``, ``api_key``, ``model`` (the sample's model) and ``models`` (every name the
    door routes: ``model`` and each model role's)."""

    base_url: str
    api_key: str
    model: str = DEFAULT_MODEL
    models: tuple[str, ...] = (DEFAULT_MODEL,)

    def __getitem__(self, key: str) -> Any:
        if key not in _FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Any:
        return iter(_FIELDS)

    def __len__(self) -> int:
        return len(_FIELDS)


_FIELDS = ("base_url", "api_key", "model", "models")


@dataclass
class FrontDoor:
    """The door of one sample: its context, key and routes, and the stop it met (if any)."""

    ctx: Context
    key: str = field(default_factory=lambda: f"sk-maslab-{secrets.token_hex(16)}")
    stopped: BaseException | None = None
    _numbers: itertools.count[int] = field(default_factory=itertools.count)

    def routes(self) -> dict[str, str | None]:
        """Model name -> the spec it routes to (None: the sample's model): ``default``, each
        model role, and each alias of the run's endpoints file (``openai:<alias>``)."""
        aliases = {alias: f"openai:{alias}" for alias in self.ctx.models.endpoints or {}}
        roles = {name: entry.get("model") for name, entry in self.ctx.model_roles.items()}
        return {**aliases, DEFAULT_MODEL: None, **roles}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        if denied := self._denied(request):
            return denied
        try:
            body, chat = parse_chat(await request.read())
        except ValueError as exc:
            return error_response(400, f"invalid request body: {exc}", "invalid_request_error")
        name = str(body.get("model") or DEFAULT_MODEL)
        routes = self.routes()
        if name not in routes:
            listed = ", ".join(routes)
            return error_response(404, f"no model '{name}' here (the models: {listed})",
                                  "invalid_request_error", "model_not_found")  # fmt: skip
        agent = str(body.get("user") or request.headers.get(AGENT_HEADER) or name)
        sampling = self._sampling(name)
        try:
            completion = await self.ctx.chat(
                list(chat.messages), model=routes[name], agent=agent,
                **{**sampling, **chat.params()},
            )  # fmt: skip
        except (BudgetExceeded, SampleEnded) as exc:
            self.stopped = self.stopped or exc
            return error_response(429, f"the sample's budget is spent: {exc}", "insufficient_quota",
                                  "insufficient_quota", NOT_RETRIED)  # fmt: skip
        except LLMError as exc:
            return error_response(502, f"the model failed: {exc}", "server_error", None,
                                  NOT_RETRIED)  # fmt: skip
        usage = {"prompt_tokens": completion.usage.prompt_tokens,
                 "completion_tokens": completion.usage.completion_tokens}  # fmt: skip
        answer = completion_body(
            f"maslab-{next(self._numbers)}", name, completion.text,
            completion.finish_reason or ("tool_calls" if completion.tool_calls else "stop"),
            completion.tool_calls, usage,
        )  # fmt: skip
        if not body.get("stream"):
            return json_response(answer)
        events = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await events.prepare(request)
        await events.write(stream_events(answer))
        await events.write_eof()
        return events

    async def models(self, request: web.Request) -> web.Response:
        if denied := self._denied(request):
            return denied
        listed = [{"id": name, "object": "model", "created": 0, "owned_by": "maslab"}
                  for name in self.routes()]  # fmt: skip
        return json_response({"object": "list", "data": listed})

    def _denied(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") == f"Bearer {self.key}":
            return None
        return error_response(401, "this door takes only its sample's key",
                              "invalid_request_error", "invalid_api_key")  # fmt: skip

    def _sampling(self, name: str) -> dict[str, Any]:
        """A role's sampling settings (its ``temperature``...), under the request's own."""
        entry = self.ctx.model_roles.get(name, {})
        return {k: v for k, v in entry.items() if k != "model"}


async def _not_found(request: web.Request) -> web.Response:
    return error_response(404, f"no route {request.method} {request.path} here (this is a "
                          "sample's chat-completions door)", "invalid_request_error",
                          "unknown_url")  # fmt: skip


@contextlib.asynccontextmanager
async def front_door(ctx: Context) -> AsyncIterator[tuple[FrontDoor, ClientConfig]]:
    """Serve ``ctx``'s door on 127.0.0.1 while the block runs; the door and what a client
    needs to reach it."""
    door = FrontDoor(ctx)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", door.chat)
    app.router.add_get("/v1/models", door.models)
    app.router.add_route("*", "/{tail:.*}", _not_found)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        yield door, ClientConfig(f"http://127.0.0.1:{port}/v1", door.key,
                                 models=tuple(door.routes()))  # fmt: skip
    finally:
        await runner.cleanup()
