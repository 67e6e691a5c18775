"""The subject: runs model-written code in its sandbox and answers the examiner's calls.

It defines ``solution.py`` as a module named ``solution`` (so a ``__main__`` block does not
run), says whether that worked, then serves requests until the examiner hangs up: which kind of
thing each name is, and calls of a function or of an object it handed out before. Everything it
sends is plain data (:mod:`wire`); an object that is not plain data goes out as a reference.
Nothing here is trusted: the model's code can change any of it, so the examiner believes no
more than the values it receives.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wire  # type: ignore[import-not-found]  # beside this file in the sandbox


def _main() -> None:
    sys.set_int_max_str_digits(0)
    settings = json.loads(Path("subject.json").read_text())
    seconds = settings["call_seconds"]
    link = socket.socket(fileno=int(os.environ[settings["link_variable"]]))
    signal.signal(signal.SIGALRM, wire.time_is_up)
    namespace: dict[str, Any] = {"__name__": "solution"}
    try:
        source = Path("solution.py").read_text()
        wire.timed(seconds, lambda: exec(compile(source, "solution.py", "exec"), namespace))
    except BaseException as exc:
        wire.send(link, {"ready": False, "error": wire.one_line(exc)})
        return
    wire.send(link, {"ready": True})
    objects: list[Any] = []

    def ref(value: Any) -> int:
        objects.append(value)
        return len(objects) - 1

    def resolve(number: int) -> Any:
        if not 0 <= number < len(objects):
            raise ValueError("no such object")
        return objects[number]

    while True:
        try:
            request = wire.receive(link)
        except wire.WireError:
            return
        wire.send(link, _answer(request, namespace, seconds, ref, resolve))


def _answer(
    request: dict[str, Any],
    namespace: dict[str, Any],
    seconds: float | None,
    ref: Callable[[Any], int],
    resolve: Callable[[int], Any],
) -> dict[str, Any]:
    """The reply to one request: the kinds of names, or what a call returned or raised."""
    reply: dict[str, Any] = {"id": request.get("id")}
    if "lookup" in request:
        reply["kinds"] = {name: _kind(namespace, name, ref) for name in request["lookup"]}
        return reply
    try:
        target = request["call"]
        function = namespace[target] if isinstance(target, str) else resolve(target)
        args = wire.decode(request["args"], resolve)
        kwargs = wire.decode(request["kwargs"], resolve)
        value = wire.timed(seconds, lambda: function(*args, **kwargs))
        reply["value"] = wire.encode(value, ref)
    except BaseException as exc:
        reply["raised"] = type(exc).__name__
        reply["message"] = str(exc)[: wire.SHOWN]
    return reply


def _kind(namespace: dict[str, Any], name: str, ref: Callable[[Any], int]) -> Any:
    if name not in namespace:
        return "missing"
    value = namespace[name]
    if isinstance(value, types.ModuleType):
        return "module"
    if callable(value):
        return "callable"
    try:
        return {"value": wire.encode(value, ref)}
    except RecursionError:
        return "missing"


if __name__ == "__main__":
    _main()
