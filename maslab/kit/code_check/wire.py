"""Messages between the examiner and the subject, the plain data they carry, and the time
limits and one-line errors both programs use.

Standard library only: the two sandboxed programs import this file as ``wire`` (maslab is not
installed where they run), and maslab imports it as :mod:`maslab.kit.code_check.wire`.

A message is a JSON object framed by its length (4 bytes, big-endian). A value travels as plain
data: ``None``, ``bool``, ``int``, ``float``, ``str`` and lists as JSON; a tuple, set, frozenset,
dict, bytes or complex as a one-key object naming its type; anything else as a reference
(``{"ref": n}``) that only its owner can resolve. :func:`decode` builds built-in objects and
nothing else, whatever it is sent: it never imports, calls or evaluates anything it receives.
"""

from __future__ import annotations

import base64
import json
import signal
import socket
import struct
from collections.abc import Callable
from typing import Any

SHOWN = 200
"""Characters of an error message or a shown value at most."""
MAX_MESSAGE = 1 << 24
"""Bytes in one message at most; a larger one is refused by both ends."""
_HEADER = struct.Struct(">I")
Encoded = Any
"""What :func:`encode` makes: JSON-able data."""


class WireError(Exception):
    """A message that breaks the protocol, or a peer that is gone."""


def send(link: socket.socket, message: dict[str, Any]) -> None:
    """Send one message (``NaN`` and infinities are allowed, as Python's JSON writes them)."""
    data = json.dumps(message).encode()
    if len(data) > MAX_MESSAGE:
        raise WireError(f"a message of {len(data):,} bytes is over the limit")
    link.sendall(_HEADER.pack(len(data)) + data)


def receive(link: socket.socket) -> dict[str, Any]:
    """The next message; :class:`WireError` when the peer is gone or breaks the framing."""
    (size,) = _HEADER.unpack(_exactly(link, _HEADER.size))
    if size > MAX_MESSAGE:
        raise WireError(f"a message of {size:,} bytes is over the limit")
    try:
        message = json.loads(_exactly(link, size))
    except (ValueError, RecursionError) as exc:
        raise WireError(f"a message that is not JSON: {type(exc).__name__}") from None
    if not isinstance(message, dict):
        raise WireError("a message that is not a JSON object")
    return message


def _exactly(link: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = link.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            raise WireError("the other program is gone")
        chunks += chunk
    return bytes(chunks)


def encode(value: Any, ref: Callable[[Any], int]) -> Encoded:
    """``value`` as plain data; ``ref`` numbers what is not (or raises ``TypeError``).

    A subclass of a built-in type travels as that type's value.
    """
    if value is None or isinstance(value, bool):
        return value
    for kind in (int, float, str):
        if isinstance(value, kind):
            return kind(value)
    if isinstance(value, list):
        return [encode(item, ref) for item in value]
    if isinstance(value, dict):
        return {"dict": [[encode(k, ref), encode(v, ref)] for k, v in value.items()]}
    for container, tag in ((tuple, "tuple"), (frozenset, "frozenset"), (set, "set")):
        if isinstance(value, container):
            return {tag: [encode(item, ref) for item in value]}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, complex):
        return {"complex": [value.real, value.imag]}
    return {"ref": ref(value)}


_BUILDERS: dict[str, Callable[[list[Any]], Any]] = {
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
}


def decode(data: Encoded, resolve: Callable[[int], Any]) -> Any:
    """The value :func:`encode` made; ``resolve`` turns a reference's number into an object.

    Raises :class:`WireError` for anything that is not the format (an unhashable key, too deep).
    """
    try:
        return _decode(data, resolve)
    except (TypeError, ValueError, RecursionError) as exc:
        raise WireError(f"a value that is not plain data: {type(exc).__name__}") from None


def _decode(data: Encoded, resolve: Callable[[int], Any]) -> Any:
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [_decode(item, resolve) for item in data]
    if kind is not dict or len(data) != 1:
        raise ValueError("not a tagged value")
    ((tag, body),) = data.items()
    if tag == "dict" and type(body) is list:
        return dict(_pair(pair, resolve) for pair in body)
    if tag in _BUILDERS and type(body) is list:
        return _BUILDERS[tag]([_decode(item, resolve) for item in body])
    if tag == "bytes" and type(body) is str:
        return base64.b64decode(body, validate=True)
    if tag == "complex" and type(body) is list and all(type(x) in (int, float) for x in body):
        return complex(*body)
    if tag == "ref" and type(body) is int:
        return resolve(body)
    raise ValueError(f"an unknown tag {tag!r}")


def _pair(pair: Encoded, resolve: Callable[[int], Any]) -> tuple[Any, Any]:
    if type(pair) is not list or len(pair) != 2:
        raise ValueError("a dict item that is not a pair")
    return _decode(pair[0], resolve), _decode(pair[1], resolve)


def time_is_up(signum: int, frame: object) -> None:
    """The SIGALRM handler :func:`timed` needs (install it with ``signal.signal``)."""
    raise TimeoutError("took too long")


def timed(seconds: float | None, run: Callable[[], Any]) -> Any:
    """``run()``, interrupted by ``TimeoutError`` after ``seconds`` (None: no limit)."""
    if seconds is None:
        return run()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def one_line(exc: BaseException) -> str:
    """``Type: message`` of an exception, at most :data:`SHOWN` characters."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:SHOWN]
