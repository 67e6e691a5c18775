"""OpenAI-compatible chat completions over two transports with one error vocabulary.

``http`` (default) speaks the wire protocol over one pooled aiohttp session per endpoint with
orjson: a fraction of the client CPU the ``openai`` package needs per call. ``sdk`` uses the
``openai`` package's ``AsyncOpenAI`` (or ``AsyncAzureOpenAI`` when ``api_version`` is set) for
what only it provides. Both map failures to the typed errors in :mod:`maslab.errors`.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import ipaddress
import math
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard
from urllib.parse import urlsplit

import aiohttp
import orjson

from maslab.errors import (
    ConnectionRefused,
    ContextTooLong,
    LLMConnectionError,
    LLMError,
    LLMTimeout,
    MalformedResponse,
    RateLimited,
    RequestRejected,
    ServerError,
    one_line,
)
from maslab.llm.endpoints import Endpoint
from maslab.llm.types import (
    ChatModelBase,
    ChatRequest,
    Completion,
    Feature,
    FunctionCall,
    TokenLogprob,
    Usage,
)
from maslab.secrets import redact, scrub

# the longest Retry-After honoured: a server cannot stall a run (or an endpoint) for longer
MAX_RETRY_AFTER = 60.0


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine: ``localhost``, or a loopback or unspecified
    address."""
    host = urlsplit(url).hostname
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


REFUSED = "connection refused: nothing listens there; start its server, or fix the URL"


def refused_here(exc: BaseException, url: str) -> bool:
    """Whether ``exc`` is a connection to ``url``, on this machine, refused: nothing listens
    there, and no retry will change that before someone starts a server."""
    refused = any(getattr(e, "errno", None) == errno.ECONNREFUSED for e in causes(exc))
    return refused and is_loopback(url)


def causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from, innermost last."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or HTTP date), at most
    :data:`MAX_RETRY_AFTER`; None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    if not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER)


def error_for_status(status: int, detail: str, model: str, retry_after: str | None) -> LLMError:
    """Typed error for a non-200 answer; ``detail`` is redacted, put on one line and cut short."""
    message = f"HTTP {status}: {one_line(redact(detail))[:200]}"
    if status == 429:
        return RateLimited(message, model=model, retry_after=parse_retry_after(retry_after))
    if status >= 500:
        return ServerError(message, model=model, status=status)
    if status in (400, 413) and says_context_too_long(detail):
        return ContextTooLong(message, model=model, status=status)
    return RequestRejected(message, model=model, status=status)


_CONTEXT_TOO_LONG = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|input is too long"
    r"|too many (input )?tokens",
    re.IGNORECASE,
)


def says_context_too_long(detail: str) -> bool:
    """Whether an error's text says the request does not fit the context window, in the words
    of OpenAI, vLLM, llama.cpp and the others (``context_length_exceeded``, "maximum context
    length", "exceed context window", "prompt is too long")."""
    return _CONTEXT_TOO_LONG.search(detail) is not None


def error_detail(body: bytes) -> str:
    """The ``error.message`` of an OpenAI-style error body, else the start of the body."""
    try:
        data = orjson.loads(body)
        return str(data["error"]["message"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return body[:2000].decode("utf-8", "replace")


def scrubbed(data: Any) -> Any:
    """A decoded reply without registered secrets, in any form :mod:`maslab.secrets` knows
    (re-decoded only when one was in it). Decoded: a key a server sent JSON-escaped
    (``\\u0073\\u006b...``) is plain text by now."""
    blob = orjson.dumps(data, default=str)
    clean = scrub(blob)
    return data if clean is blob else orjson.loads(clean)


def estimate_usage(request: ChatRequest, text: str) -> Usage:
    """Roughly four characters a token; for servers whose replies carry no ``usage``."""
    prompt = sum(len(m["content"]) for m in request.messages)
    return Usage(-(-prompt // 4), -(-len(text) // 4), estimated=True)


def as_json_object(response_format: Any) -> Any:
    """A ``json_schema`` response format in llama-cpp-python's form, ``{"type": "json_object",
    "schema": ...}``; any other format unchanged."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return {"type": "json_object", **({"schema": schema} if schema else {})}
    return response_format


def completion_from_payload(
    data: Any, model: str, latency: float, request: ChatRequest, *, source: str = ""
) -> Completion:
    """Turn a chat-completion JSON object into a :class:`Completion`, or raise MalformedResponse
    naming ``source`` (default: ``model``), the way the provider's other errors name it.

    A reply without token counts gets an estimate, marked as such, never a silent zero. Every
    provider's reply passes here, so this is where registered secrets are scrubbed from it:
    the cache, the records and everything shown after only ever see the scrubbed reply.
    """
    source = source or model
    data = scrubbed(data)
    try:
        choice = data["choices"][0]
        message = choice["message"]
        text = message.get("content") or ""
    except (KeyError, IndexError, TypeError, AttributeError):
        raise MalformedResponse("response has no choices[0].message", model=source) from None
    if not isinstance(text, str):  # content parts, a number: not a text reply
        kind = type(text).__name__
        raise MalformedResponse(f"message content is a {kind}, not text", model=source)
    calls = _tool_calls(message.get("tool_calls"), source)
    usage = data.get("usage")
    counted = [usage.get(k) for k in _COUNTED] if isinstance(usage, dict) else []
    counts = [n for n in counted if _is_count(n)]
    exact = len(counts) == 2  # both counted, each a count
    written = text + "".join(c.name + c.arguments for c in calls)
    finish = choice.get("finish_reason")
    return Completion(
        text=text,
        usage=Usage(counts[0], counts[1]) if exact else estimate_usage(request, written),
        model=str(data.get("model") or model),
        latency_s=latency,
        queued_s=queued_at_server(data.get("timings"), latency),
        finish_reason=finish if isinstance(finish, str) else None,
        tool_calls=calls,
        logprobs=_logprobs(choice.get("logprobs")),
        raw=data,
    )


def queued_at_server(timings: Any, latency: float) -> float:
    """The part of a call's ``latency`` (seconds) it waited at the server before being
    computed: the latency less the computing time a llama.cpp server reports in a reply's
    ``timings`` (``prompt_ms`` and ``predicted_ms``); 0 where the reply has no such timings."""
    if not isinstance(timings, dict):
        return 0.0
    computing = 0.0
    for key in ("prompt_ms", "predicted_ms"):
        ms = timings.get(key)
        if isinstance(ms, bool) or not isinstance(ms, int | float):
            return 0.0
        computing += ms / 1000
    return max(0.0, latency - computing)


def _tool_calls(calls: Any, source: str) -> tuple[FunctionCall, ...]:
    """The message's tool calls; arguments sent as an object (not JSON text) are re-encoded."""
    if not calls:
        return ()
    try:
        found = []
        for i, call in enumerate(calls):
            function = call["function"]
            name, arguments = function["name"], function.get("arguments") or "{}"
            if not isinstance(arguments, str):
                arguments = orjson.dumps(arguments).decode()
            if not isinstance(name, str):
                raise TypeError(name)
            found.append(FunctionCall(str(call.get("id") or f"call_{i}"), name, arguments))
    except (KeyError, TypeError, AttributeError, orjson.JSONEncodeError):
        raise MalformedResponse("unreadable message.tool_calls", model=source) from None
    return tuple(found)


def _logprobs(logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """Per-token log probabilities (``choices[0].logprobs.content``); None when absent or not
    in the OpenAI layout."""
    try:
        return tuple(
            TokenLogprob(
                str(t["token"]),
                float(t["logprob"]),
                tuple((str(a["token"]), float(a["logprob"])) for a in t.get("top_logprobs") or ()),
            )
            for t in logprobs["content"]
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


_COUNTED = ("prompt_tokens", "completion_tokens")


def _is_count(value: object) -> TypeGuard[int]:
    """A token count a server could mean: a non-negative int (``True`` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


# the largest response body read: a chat completion is far smaller; a server cannot flood memory
MAX_BODY_BYTES = 64 * 1024**2


async def _read_body(response: aiohttp.ClientResponse, source: str) -> bytes:
    """The whole body, or MalformedResponse once it passes :data:`MAX_BODY_BYTES`."""
    chunks: list[bytes] = []
    size = response.content_length or 0  # a declared length over the cap is refused unread
    if size <= MAX_BODY_BYTES:
        size = 0
        async for chunk in response.content.iter_any():
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                break
            chunks.append(chunk)
    if size > MAX_BODY_BYTES:
        raise MalformedResponse(f"response body over {MAX_BODY_BYTES >> 20} MB", model=source)
    return b"".join(chunks)


class OpenAITransport(ChatModelBase):
    """What both transports share: the endpoint, what it does natively, the body's fields."""

    def __init__(self, endpoint: Endpoint, model: str) -> None:
        self.endpoint = endpoint
        self.model = model
        self.name = f"openai:{model}@{endpoint.base_url}"

    def supports(self, feature: Feature) -> bool:
        return self.endpoint.supports(feature)

    def connection_error(self, exc: Exception, message: str) -> LLMConnectionError:
        """``exc``, a failure to connect, as a typed error: :class:`ConnectionRefused` (not
        retried) when a server on this machine refused it, else :class:`LLMConnectionError`."""
        if refused_here(exc, self.endpoint.base_url):
            return ConnectionRefused(REFUSED, model=self.name)
        return LLMConnectionError(message, model=self.name)

    def params(self, request: ChatRequest) -> dict[str, Any]:
        """The request's body fields, the response format in the form the server takes."""
        params = request.params()
        if self.endpoint.structured_output == "json_object" and "response_format" in params:
            params["response_format"] = as_json_object(params["response_format"])
        return params


class OpenAIHTTP(OpenAITransport):
    """Chat completions over a pooled aiohttp session (one per endpoint and event loop)."""

    def __init__(
        self, endpoint: Endpoint, model: str, api_key: str | None, max_concurrency: int
    ) -> None:
        super().__init__(endpoint, model)
        self.max_concurrency = max_concurrency  # the connection pool's size
        self._url = f"{endpoint.base_url}/chat/completions"
        self._headers = {"Content-Type": "application/json", **endpoint.headers}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(limit=self.max_concurrency, limit_per_host=0)
            timeout = aiohttp.ClientTimeout(total=self.endpoint.timeout)
            self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)
            self._loop = loop
        return self._session

    async def complete(self, request: ChatRequest) -> Completion:
        body = {"model": self.model, "messages": request.messages, **self.params(request)}
        started = time.perf_counter()
        try:
            async with self._client().post(
                self._url, data=orjson.dumps(body), headers=self._headers
            ) as response:
                payload = await _read_body(response, self.name)
                status, retry_after = response.status, response.headers.get("Retry-After")
        except asyncio.TimeoutError:
            raise LLMTimeout(
                f"no answer within {self.endpoint.timeout:g}s", model=self.name
            ) from None
        except aiohttp.ClientError as exc:
            raise self.connection_error(exc, f"{type(exc).__name__}: {exc}") from None
        latency = time.perf_counter() - started
        if status != 200:
            raise error_for_status(status, error_detail(payload), self.name, retry_after)
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise MalformedResponse("response body is not JSON", model=self.name) from None
        return completion_from_payload(data, self.model, latency, request, source=self.name)

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._loop is asyncio.get_running_loop():
            await session.close()


class OpenAISDK(OpenAITransport):
    """Chat completions through the ``openai`` package's async client (retries disabled there)."""

    def __init__(self, endpoint: Endpoint, model: str, api_key: str | None) -> None:
        import openai

        super().__init__(endpoint, model)
        self._openai = openai
        options: dict[str, Any] = {
            "api_key": api_key or "unused",
            "timeout": endpoint.timeout,
            "max_retries": 0,
            "default_headers": endpoint.headers or None,
        }
        self._client: openai.AsyncOpenAI
        if endpoint.api_version:
            self._client = openai.AsyncAzureOpenAI(
                azure_endpoint=endpoint.base_url, api_version=endpoint.api_version, **options
            )
        else:
            self._client = openai.AsyncOpenAI(base_url=endpoint.base_url, **options)

    async def complete(self, request: ChatRequest) -> Completion:
        openai = self._openai
        params = self.params(request)
        extra_body = {k: params.pop(k) for k in list(params) if k not in _SDK_PARAMS}
        started = time.perf_counter()
        try:
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=list(request.messages),  # type: ignore[arg-type]
                extra_body=extra_body or None,
                **params,
            )
        except openai.APITimeoutError:
            raise LLMTimeout(
                f"no answer within {self.endpoint.timeout:g}s", model=self.name
            ) from None
        except openai.APIConnectionError as exc:
            raise self.connection_error(exc, str(exc)) from None
        except openai.APIStatusError as exc:
            headers: Mapping[str, str] = exc.response.headers
            detail = error_detail(exc.response.content)
            raise error_for_status(
                exc.status_code, detail, self.name, headers.get("retry-after")
            ) from None
        except (openai.APIResponseValidationError, ValueError) as exc:
            raise MalformedResponse(f"unusable response body ({exc})", model=self.name) from None
        latency = time.perf_counter() - started
        data = response.model_dump() if hasattr(response, "model_dump") else response
        return completion_from_payload(data, self.model, latency, request, source=self.name)

    async def aclose(self) -> None:
        await self._client.close()


_SDK_PARAMS = frozenset(
    {
        "temperature", "top_p", "max_tokens", "stop", "seed",
        "tools", "tool_choice", "response_format", "logprobs", "top_logprobs",
    }
)  # fmt: skip


def openai_transport(
    endpoint: Endpoint, model: str, api_key: str | None, max_concurrency: int
) -> OpenAITransport:
    """The transport an endpoint asks for, with connections for ``max_concurrency`` requests
    in flight (the openai package's client pools its own)."""
    if endpoint.transport == "sdk":
        return OpenAISDK(endpoint, model, api_key)
    return OpenAIHTTP(endpoint, model, api_key, max_concurrency)
