"""Model calls from sandboxed code: the program's side of :mod:`maslab.kit.bridge` (standard
library).

:func:`maslab.kit.bridge.run_with_llm` writes this file next to the program as ``maslab_bridge.py``,
so model-written code does::

    from maslab_bridge import Agent, call_llm

    draft = call_llm("Solve: 2 + 2")  # one user turn
    text = call_llm([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "?"}])
    critic = Agent("critic", system="You check arithmetic.", temperature=0)
    verdict = critic.ask(f"Is this right? {draft}")  # the agent keeps its own history

* ``call_llm(messages, *, agent=None, **params) -> str``: ``messages`` is a prompt (one user
  turn) or a list of ``{"role": "system" | "user" | "assistant", "content": str}``;
  ``agent`` names the caller in the sample's records; ``params`` are ``temperature``,
  ``top_p``, ``max_tokens``, ``stop``, ``seed`` and ``response_format``, nothing else.
* ``call_llm_full(...) -> dict``: ``text``, ``finish_reason``, ``usage`` (``prompt_tokens``,
  ``completion_tokens``) and ``cached``.
* ``acall_llm(...)``, ``Agent.aask(...)``: the same for asyncio code (``asyncio.gather``).
* ``Agent(name, system=None, **params)``: ``ask(prompt, **params) -> str`` sends the history
  and the prompt, then keeps both turns; ``history`` is the list of turns, free to edit.

Calls may come from several threads (or tasks) at once; the parent serves a few at a time. A
refused or failed call raises :class:`BridgeError` (the program may catch it and go on). A call
the sample's budget forbids never returns: the parent ends the program.

The channel is a socket the parent hands down (its descriptor in :data:`CHANNEL_VARIABLE`), with
length-prefixed JSON frames: a request ``{"id", "messages", "params", "agent"}``, a reply
``{"id", "text", "finish_reason", "usage", "cached"}`` or ``{"id", "error"}``. The program
never sees a key, an endpoint or the network: the parent calls the model.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import struct
import threading
from typing import Any

CHANNEL_VARIABLE = "MASLAB_CHANNEL_FD"
"""The environment variable holding the channel's descriptor (:data:`maslab.sandbox`'s too)."""
HEADER = struct.Struct(">I")
"""A frame: its JSON body's length in bytes, then the body (UTF-8 JSON object)."""
MAX_FRAME_BYTES = 2 * 1024**2
"""The largest request the parent reads; a longer one ends the program."""
MAX_MESSAGES = 200
"""The most turns in one request."""
MAX_MESSAGE_CHARS = 200_000
"""The longest turn's content."""
ROLES = ("system", "user", "assistant")
PARAMS = ("temperature", "top_p", "max_tokens", "stop", "seed", "response_format")
"""The only parameters a call may set."""
MAX_TOKENS = 1_000_000
"""The largest ``max_tokens`` a call may ask for (never above the run's own, where it has one)."""
MAX_STOPS = 16
"""The most stop sequences in one call, each of at most :data:`MAX_STOP_CHARS` characters."""
MAX_STOP_CHARS = 1_000

Message = dict[str, str]


class BridgeError(Exception):
    """A call was refused (a bad request, the call limit) or failed (the model, the channel)."""


def call_llm(messages: str | list[Message], *, agent: str | None = None, **params: Any) -> str:
    """The model's answer to ``messages`` (a prompt, or the turns); see the module docstring."""
    return call_llm_full(messages, agent=agent, **params)["text"]


def call_llm_full(
    messages: str | list[Message], *, agent: str | None = None, **params: Any
) -> dict[str, Any]:
    """The answer with its ``finish_reason``, ``usage`` and ``cached`` flag."""
    turns = [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
    return _channel().call({"messages": turns, "params": params, "agent": agent})


async def acall_llm(
    messages: str | list[Message], *, agent: str | None = None, **params: Any
) -> str:
    """:func:`call_llm` for asyncio code: calls gathered together run concurrently."""
    return await asyncio.to_thread(call_llm, messages, agent=agent, **params)


class Agent:
    """A named agent with a system prompt, default parameters and its own history."""

    def __init__(self, name: str, system: str | None = None, **params: Any) -> None:
        self.name = name
        self.params = params
        self.history: list[Message] = [{"role": "system", "content": system}] if system else []

    def ask(self, prompt: str, **params: Any) -> str:
        """Send the history and ``prompt``; the answer, both turns added to the history."""
        turns = [*self.history, {"role": "user", "content": prompt}]
        text = call_llm(turns, agent=self.name, **{**self.params, **params})
        self.history = [*turns, {"role": "assistant", "content": text}]
        return text

    async def aask(self, prompt: str, **params: Any) -> str:
        """:meth:`ask` for asyncio code."""
        return await asyncio.to_thread(self.ask, prompt, **params)

    def __repr__(self) -> str:
        return f"<Agent {self.name}: {len(self.history)} turns>"


def frame(body: dict[str, Any]) -> bytes:
    """``body`` as one frame."""
    data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode()
    return HEADER.pack(len(data)) + data


class _Slot:
    """Where the reader thread leaves one call's reply (None: the channel broke)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None


class _Channel:
    """The socket to the parent: calls from any thread, replies matched by id on a reader thread.

    Sending holds ``_send_lock`` only; ``_lock`` guards the pending calls, never across I/O, so
    a reply can be taken in while a send waits for the parent.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._pending: dict[int, _Slot] = {}
        self._broken = ""
        threading.Thread(target=self._read, name="maslab-bridge", daemon=True).start()

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        slot = _Slot()
        with self._lock:
            if self._broken:
                raise BridgeError(f"the model channel is closed: {self._broken}")
            request_id = next(self._ids)
            self._pending[request_id] = slot
        try:
            data = frame({"id": request_id, **request})
        except ValueError:  # NaN or an infinity, which JSON cannot carry
            self._forget(request_id)
            raise BridgeError("a parameter is not a finite number (NaN or infinity)") from None
        if len(data) - HEADER.size > MAX_FRAME_BYTES:
            self._forget(request_id)
            raise BridgeError(f"request of {len(data)} bytes: the limit is {MAX_FRAME_BYTES}")
        try:
            with self._send_lock:
                self._sock.sendall(data)
        except OSError as error:
            self._forget(request_id)
            raise BridgeError(f"the model channel is closed: {error}") from None
        slot.done.wait()
        reply = slot.reply
        if reply is None:
            raise BridgeError(f"the model channel is closed: {self._broken}")
        if "error" in reply:
            raise BridgeError(reply["error"])
        return {key: reply[key] for key in ("text", "finish_reason", "usage", "cached")}

    def _forget(self, request_id: int) -> None:
        with self._lock:
            self._pending.pop(request_id, None)

    def _read(self) -> None:
        reason = "the parent closed it"
        try:
            while (reply := self._receive()) is not None:
                with self._lock:
                    slot = self._pending.pop(reply.get("id"), None)  # type: ignore[arg-type]
                if slot is not None:
                    slot.reply = reply
                    slot.done.set()
        except (OSError, ValueError) as error:
            reason = str(error)
        with self._lock:
            self._broken = reason
            for slot in self._pending.values():
                slot.done.set()
            self._pending.clear()

    def _receive(self) -> dict[str, Any] | None:
        header = self._exactly(HEADER.size)
        if header is None:
            return None
        body = self._exactly(HEADER.unpack(header)[0])
        if body is None:
            raise ValueError("the channel closed inside a reply")
        reply = json.loads(body)
        if not isinstance(reply, dict):
            raise ValueError("a reply that is not a JSON object")
        return reply

    def _exactly(self, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            chunk = self._sock.recv(min(size - len(data), 1 << 16))
            if not chunk:
                return None
            data += chunk
        return data


_opened: list[_Channel] = []
_opening = threading.Lock()


def _channel() -> _Channel:
    """The channel to the parent, opened on first use."""
    with _opening:
        if not _opened:
            fd = os.environ.get(CHANNEL_VARIABLE, "")
            if not fd.isdigit():
                raise BridgeError("no model channel: run this program with maslab.kit.bridge")
            _opened.append(_Channel(socket.socket(fileno=int(fd))))
        return _opened[0]
