"""Deterministic models for tests, examples and notebooks.

A :class:`Script` turns a request into an answer: response text, or a :class:`Reply` that may
call tools (``Reply.calling("add", {"a": 2, "b": 3})``). Answers come from

* a list, answered in order (``cycle=True`` to wrap around);
* a mapping of regular expressions to answers (an answer, or a callable taking the request),
  matched in order against the last user message;
* a callable ``request -> answer`` (it may raise an :class:`~maslab.errors.LLMError` to inject
  faults). The request carries ``tools``, ``response_format`` and the rest for it to look at.

:class:`ScriptedModel` serves a script in-process; :class:`~maslab.testing.FakeOpenAIServer`
serves the same scripts over HTTP.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from maslab.errors import ConfigError
from maslab.llm.types import (
    ChatMessage,
    ChatModelBase,
    ChatRequest,
    Completion,
    Feature,
    FunctionCall,
    Usage,
)


@dataclass(frozen=True, slots=True)
class Reply:
    """A scripted answer beyond plain text: tool calls, a finish reason (default: "tool_calls"
    when it calls tools, else "stop")."""

    text: str = ""
    tool_calls: tuple[FunctionCall, ...] = ()
    finish_reason: str | None = None

    @classmethod
    def calling(cls, name: str, arguments: Mapping[str, Any], *, id: str = "call_1") -> Reply:
        """A reply that calls one function."""
        return cls(tool_calls=(FunctionCall(id, name, orjson.dumps(arguments).decode()),))

    @property
    def finish(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    @property
    def written(self) -> str:
        """Everything the model wrote, for counting its tokens."""
        return self.text + "".join(c.name + c.arguments for c in self.tool_calls)


Answer = str | Reply
Responder = Callable[[ChatRequest], Answer]
ScriptSource = Sequence[Answer] | Mapping[str, Answer | Responder] | Responder

_TOKEN = re.compile(r"\w+|[^\w\s]")


class ScriptError(AssertionError):
    """The script had no answer for a request (list used up, or no pattern matched)."""


def count_tokens(text: str) -> int:
    """Deterministic stand-in for a tokenizer: words and punctuation marks."""
    return len(_TOKEN.findall(text))


def count_prompt_tokens(messages: Sequence[ChatMessage]) -> int:
    """Tokens of a chat prompt, with a small per-message overhead as chat templates add."""
    return sum(count_tokens(m["content"]) + 4 for m in messages) + 2


def last_user_message(request: ChatRequest) -> str:
    for message in reversed(request.messages):
        if message["role"] == "user":
            return message["content"]
    return ""


def echo(request: ChatRequest) -> str:
    """Answer with the last user message."""
    return last_user_message(request)


class Script:
    """Thread-safe source of scripted answers (see the module docstring)."""

    def __init__(
        self,
        source: ScriptSource = echo,
        *,
        default: Answer | Responder | None = None,
        cycle: bool = False,
    ) -> None:
        self._lock = threading.Lock()
        self._default = default
        self._cycle = cycle
        self._list: list[Answer] | None = None
        self._patterns: list[tuple[re.Pattern[str], Answer | Responder]] | None = None
        self._callable: Responder | None = None
        self._next = 0
        if callable(source):
            self._callable = source
        elif isinstance(source, Mapping):
            self._patterns = [(re.compile(k, re.S), v) for k, v in source.items()]
        elif isinstance(source, Sequence) and not isinstance(source, str):
            self._list = list(source)
        else:
            raise TypeError("a script is a list of answers, a dict of patterns, or a callable")

    @property
    def remaining(self) -> int:
        """Answers left in a list script (0 for other kinds)."""
        if self._list is None or self._cycle:
            return 0
        return len(self._list) - self._next

    def respond(self, request: ChatRequest) -> Answer:
        if self._callable is not None:
            return self._callable(request)
        if self._list is not None:
            with self._lock:
                if self._next < len(self._list) or (self._cycle and self._list):
                    answer = self._list[self._next % len(self._list)]
                    self._next += 1
                    return answer
            return self._fallback(request, f"script used up after {len(self._list)} answers")
        assert self._patterns is not None
        prompt = last_user_message(request)
        for pattern, reply in self._patterns:
            if pattern.search(prompt):
                return reply(request) if callable(reply) else reply
        return self._fallback(request, f"no pattern matches the prompt {prompt[:80]!r}")

    def _fallback(self, request: ChatRequest, reason: str) -> Answer:
        if self._default is None:
            raise ScriptError(reason)
        return self._default(request) if callable(self._default) else self._default


def as_reply(answer: Answer) -> Reply:
    return answer if isinstance(answer, Reply) else Reply(answer)


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    request: ChatRequest
    response: str
    started: float
    finished: float
    tool_calls: tuple[FunctionCall, ...] = ()


class ScriptedModel(ChatModelBase):
    """In-process model that answers from a :class:`Script` and records every call.

    ``latency`` (seconds, or a callable of the request) is awaited before answering, so
    concurrency can be observed in ``calls`` (``started``/``finished`` are monotonic times).
    ``native`` lists the features it claims to support (``model.supports(feature)``), so method
    tests can take the native path and the text path.
    """

    def __init__(
        self,
        script: Script | ScriptSource = echo,
        *,
        name: str = "scripted",
        latency: float | Callable[[ChatRequest], float] = 0.0,
        default: Answer | Responder | None = None,
        cycle: bool = False,
        native: Iterable[Feature] = (),
    ) -> None:
        self.script = (
            script if isinstance(script, Script) else Script(script, default=default, cycle=cycle)
        )
        self.name = name
        self.latency = latency
        self.native = frozenset(native)
        self.calls: list[ScriptedCall] = []

    @property
    def requests(self) -> list[ChatRequest]:
        return [c.request for c in self.calls]

    def supports(self, feature: Feature) -> bool:
        return feature in self.native

    async def complete(self, request: ChatRequest) -> Completion:
        started = time.monotonic()
        delay = self.latency(request) if callable(self.latency) else self.latency
        if delay:
            await asyncio.sleep(delay)
        reply = as_reply(self.script.respond(request))
        finished = time.monotonic()
        self.calls.append(ScriptedCall(request, reply.text, started, finished, reply.tool_calls))
        usage = Usage(count_prompt_tokens(request.messages), count_tokens(reply.written))
        return Completion(
            reply.text,
            usage,
            self.name,
            finished - started,
            finish_reason=reply.finish,
            tool_calls=reply.tool_calls,
        )

    def assert_consumed(self) -> None:
        """Fail if a list script still has unused answers (the method made fewer calls)."""
        if self.script.remaining:
            raise ScriptError(f"{self.script.remaining} scripted answers were never requested")


def load_script(name: str) -> Script:
    """The script behind a ``scripted:<name>`` spec: ``echo`` (or empty), or a JSON/YAML file
    holding a list of answers or a mapping of patterns to answers."""
    if name in ("", "echo"):
        return Script(echo)
    path = Path(name)
    if path.suffix not in (".json", ".yaml", ".yml"):
        raise ConfigError(
            f"scripted model '{name}': use 'scripted:echo' or a .json/.yaml script file"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read script ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid script file ({str(exc).splitlines()[0]})") from None
    valid_list = isinstance(data, list) and all(isinstance(x, str) for x in data)
    valid_map = isinstance(data, dict) and all(isinstance(v, str) for v in data.values())
    if not (valid_list or valid_map):
        raise ConfigError(f"{path}: a script is a list of answers or a mapping pattern -> answer")
    return Script(data)
