"""The model-access contract: requests, completions and the ``ChatModel`` protocol."""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

import orjson

Feature = Literal["structured_output", "tools"]
"""What a model may do natively: JSON constrained by a schema (``response_format``), and
function calling (``tools``). Methods ask ``model.supports(feature)`` and fall back to text."""


class WireFunction(TypedDict):
    name: str
    arguments: str  # a JSON object, as text


class WireToolCall(TypedDict):
    """One tool call of an assistant message, in the OpenAI wire format."""

    id: str
    type: Literal["function"]
    function: WireFunction


class _Turn(TypedDict):
    role: str
    content: str


class ChatMessage(_Turn, total=False):
    """One chat turn in the OpenAI wire format: an assistant turn may carry ``tool_calls``, and
    a ``tool`` turn answers one of them (``tool_call_id``) with the result as its content."""

    name: str
    tool_calls: list[WireToolCall]
    tool_call_id: str


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """A function the model asks to be called; ``arguments`` is JSON text, as the model wrote
    it (it may not parse)."""

    id: str
    name: str
    arguments: str

    def to_wire(self) -> WireToolCall:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One generated token, its log probability and the most likely alternatives."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """Everything that determines a completion.

    ``scope`` names the random stream the request draws from (run seed, task, repeat, agent)
    and ``draw`` numbers identical requests within it: both are part of the cache key, never
    of the wire request, so repeats and re-seeded runs draw afresh while a re-run replays.
    ``affinity`` names the requests that belong together (one sample's): a load-balanced alias
    keeps them on one endpoint, whose prefix cache then holds their shared prefixes. It is
    neither part of the cache key nor of the wire request.
    """

    messages: tuple[ChatMessage, ...]
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    extra: Mapping[str, Any] | None = None
    tools: tuple[Mapping[str, Any], ...] | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    response_format: Mapping[str, Any] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    draw: int = 0
    scope: str = ""
    affinity: str = ""

    def params(self) -> dict[str, Any]:
        """Every body field besides model and messages that is set, in the chat-completions
        layout: sampling, tools, tool_choice, response_format, logprobs; ``extra`` last."""
        body = {
            k: v
            for k, v in (
                ("temperature", self.temperature),
                ("top_p", self.top_p),
                ("max_tokens", self.max_tokens),
                ("stop", list(self.stop) if self.stop else None),
                ("seed", self.seed),
                ("tools", list(self.tools) if self.tools else None),
                ("tool_choice", self.tool_choice),
                ("response_format", self.response_format),
                ("logprobs", self.logprobs),
                ("top_logprobs", self.top_logprobs),
            )
            if v is not None
        }
        if self.extra:
            body.update(self.extra)
        return body

    def fingerprint(self, namespace: str, *, with_draw: bool = True) -> str:
        """Stable hash of the request under ``namespace`` (the model's identity)."""
        payload: dict[str, object]
        payload = {"ns": namespace, "messages": self.messages, "params": self.params()}
        if with_draw:
            payload["draw"] = [self.scope, self.draw]
        return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()

    def with_draw(self, draw: int, scope: str = "") -> ChatRequest:
        return replace(self, draw=draw, scope=scope)


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one call; ``estimated`` when the server reported none and maslab counted."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Completion:
    """One model answer. ``cached`` completions replay an earlier call and cost nothing.

    ``finish_reason`` is the server's ("stop", "length" for a reply cut at ``max_tokens``,
    "tool_calls"); ``tool_calls`` are the functions the model asked for; ``logprobs`` the
    generated tokens' log probabilities, when the request asked for them; ``attempts`` the
    requests the retry layer sent to get it (1 unless it retried; never cached). ``latency_s``
    is the time the call took; ``queued_s`` the part of it the request waited at the server
    before being computed, where that is known (a server that reports llama.cpp's ``timings``,
    the embedded model's queue), else 0.
    """

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    latency_s: float = 0.0
    queued_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    tool_calls: tuple[FunctionCall, ...] = ()
    logprobs: tuple[TokenLogprob, ...] | None = None
    attempts: int = 1
    raw: Mapping[str, Any] | None = None

    def to_record(self) -> dict[str, Any]:
        """JSON-ready form without the raw provider payload (which is never copied)."""
        out = {name: getattr(self, name) for name in _RECORD_FIELDS}
        out["usage"] = asdict(self.usage)
        out["tool_calls"] = tuple(map(asdict, self.tool_calls))
        if self.logprobs is not None:
            out["logprobs"] = tuple(map(asdict, self.logprobs))
        return out

    @classmethod
    def from_record(cls, record: Mapping[str, Any], **changes: Any) -> Completion:
        """The completion :meth:`to_record` wrote, with ``changes`` applied."""
        data = {**record, **changes}
        data["usage"] = Usage(**data["usage"])
        data["tool_calls"] = tuple(FunctionCall(**c) for c in data.get("tool_calls") or ())
        if data.get("logprobs") is not None:
            data["logprobs"] = tuple(
                TokenLogprob(t["token"], t["logprob"], tuple(map(tuple, t["top"])))
                for t in data["logprobs"]
            )
        return cls(**data)


_RECORD_FIELDS = tuple(f.name for f in fields(Completion) if f.name != "raw")


@runtime_checkable
class ChatModel(Protocol):
    """What every provider and middleware layer offers.

    ``chat`` is the friendly entry point; ``complete`` takes a prepared :class:`ChatRequest`
    and is what middleware layers pass down to each other.
    """

    name: str

    async def chat(self, messages: str | Sequence[ChatMessage], **params: Any) -> Completion: ...

    async def complete(self, request: ChatRequest) -> Completion: ...

    def supports(self, feature: Feature) -> bool: ...

    async def aclose(self) -> None: ...


def wire_message(message: Mapping[str, Any]) -> ChatMessage:
    """``message`` as the OpenAI wire format has it: role, text content (None becomes ""), and
    the tool fields it sets; other keys are dropped."""
    turn: ChatMessage = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("name") is not None:
        turn["name"] = message["name"]
    if message.get("tool_calls"):
        turn["tool_calls"] = list(message["tool_calls"])
    if message.get("tool_call_id") is not None:
        turn["tool_call_id"] = message["tool_call_id"]
    return turn


def make_request(
    messages: str | Sequence[ChatMessage],
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    stop: str | Sequence[str] | None = None,
    seed: int | None = None,
    extra: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    tool_choice: str | Mapping[str, Any] | None = None,
    response_format: Mapping[str, Any] | None = None,
    logprobs: bool | None = None,
    top_logprobs: int | None = None,
    draw: int = 0,
    scope: str = "",
    affinity: str = "",
) -> ChatRequest:
    """Build a :class:`ChatRequest`; a bare string becomes one user message.

    ``tools``, ``tool_choice`` and ``response_format`` take the OpenAI wire format, e.g.
    ``response_format={"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}``.
    """
    if isinstance(messages, str):
        msgs: tuple[ChatMessage, ...] = ({"role": "user", "content": messages},)
    else:
        msgs = tuple(map(wire_message, messages))
    stops = (stop,) if isinstance(stop, str) else (tuple(stop) if stop else None)
    return ChatRequest(
        msgs,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop=stops,
        seed=seed,
        extra=extra,
        tools=tuple(dict(t) for t in tools) if tools else None,
        tool_choice=tool_choice,
        response_format=response_format,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        draw=draw,
        scope=scope,
        affinity=affinity,
    )


class ChatModelBase(abc.ABC):
    """Shared plumbing: ``chat`` builds the request, ``complete`` (per provider) runs it."""

    name: str = ""

    async def chat(self, messages: str | Sequence[ChatMessage], **params: Any) -> Completion:
        """``await model.chat("2+2?", temperature=0)``; keywords as :func:`make_request`."""
        return await self.complete(make_request(messages, **params))

    @abc.abstractmethod
    async def complete(self, request: ChatRequest) -> Completion: ...

    def supports(self, feature: Feature) -> bool:
        """Whether the model does ``feature`` natively (by default it does not)."""
        return False

    async def aclose(self) -> None:
        """Release connections; the model stays usable and reconnects on the next call."""
        return None

    async def __aenter__(self) -> ChatModelBase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class Middleware(ChatModelBase):
    """A layer around another model (cache, retry, limiter): it has the inner model's name and
    capabilities, and closes it."""

    def __init__(self, inner: ChatModelBase) -> None:
        self.inner = inner
        self.name = inner.name

    def supports(self, feature: Feature) -> bool:
        return self.inner.supports(feature)

    async def aclose(self) -> None:
        await self.inner.aclose()
