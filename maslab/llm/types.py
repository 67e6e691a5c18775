"""The model-access contract: requests, completions and the ``ChatModel`` protocol."""

from __future__ import annotations

import abc
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol, TypedDict, runtime_checkable

import orjson


class ChatMessage(TypedDict):
    """One chat turn in the OpenAI wire format."""

    role: str
    content: str


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """Everything that determines a completion.

    ``scope`` names the random stream the request draws from (run seed, task, repeat, agent)
    and ``draw`` numbers identical requests within it: both are part of the cache key, never
    of the wire request, so repeats and re-seeded runs draw afresh while a re-run replays.
    """

    messages: tuple[ChatMessage, ...]
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    extra: Mapping[str, Any] | None = None
    draw: int = 0
    scope: str = ""

    def sampling(self) -> dict[str, Any]:
        """Sampling fields that are set, in the chat-completions body layout."""
        body = {
            k: v
            for k, v in (
                ("temperature", self.temperature),
                ("top_p", self.top_p),
                ("max_tokens", self.max_tokens),
                ("stop", list(self.stop) if self.stop else None),
                ("seed", self.seed),
            )
            if v is not None
        }
        if self.extra:
            body.update(self.extra)
        return body

    def fingerprint(self, namespace: str, *, with_draw: bool = True) -> str:
        """Stable hash of the request under ``namespace`` (the model's identity)."""
        payload = {"ns": namespace, "messages": self.messages, "params": self.sampling()}
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
    """One model answer. ``cached`` completions replay an earlier call and cost nothing."""

    text: str
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    raw: Mapping[str, Any] | None = None

    def to_record(self) -> dict[str, Any]:
        """JSON-ready form without the raw provider payload."""
        out = asdict(self)
        out.pop("raw")
        return out


@runtime_checkable
class ChatModel(Protocol):
    """What every provider and middleware layer offers.

    ``chat`` is the friendly entry point; ``complete`` takes a prepared :class:`ChatRequest`
    and is what middleware layers pass down to each other.
    """

    name: str

    async def chat(self, messages: str | Sequence[ChatMessage], **params: Any) -> Completion: ...

    async def complete(self, request: ChatRequest) -> Completion: ...

    async def aclose(self) -> None: ...


def make_request(
    messages: str | Sequence[ChatMessage],
    *,
    temperature: float | None = None,
    top_p: float | None = None,
    max_tokens: int | None = None,
    stop: str | Sequence[str] | None = None,
    seed: int | None = None,
    extra: Mapping[str, Any] | None = None,
    draw: int = 0,
) -> ChatRequest:
    """Build a :class:`ChatRequest`; a bare string becomes one user message."""
    if isinstance(messages, str):
        msgs: tuple[ChatMessage, ...] = ({"role": "user", "content": messages},)
    else:
        msgs = tuple({"role": m["role"], "content": m["content"]} for m in messages)
    stops = (stop,) if isinstance(stop, str) else (tuple(stop) if stop else None)
    return ChatRequest(msgs, temperature, top_p, max_tokens, stops, seed, extra, draw)


class ChatModelBase(abc.ABC):
    """Shared plumbing: ``chat`` builds the request, ``complete`` (per provider) runs it."""

    name: str = ""

    async def chat(self, messages: str | Sequence[ChatMessage], **params: Any) -> Completion:
        """``await model.chat("2+2?", temperature=0)``; keywords as :func:`make_request`."""
        return await self.complete(make_request(messages, **params))

    @abc.abstractmethod
    async def complete(self, request: ChatRequest) -> Completion: ...

    async def aclose(self) -> None:
        """Release connections; the model stays usable and reconnects on the next call."""
        return None

    async def __aenter__(self) -> ChatModelBase:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
