"""The examiner: runs a task's tests in its sandbox against code that runs in another one.

Only trusted code runs here: the task's prompt prefix (HumanEval's imports, helpers and stub)
and its tests. The names the tests use without defining them (the function under test, a class
the answer defines), and the entry point whatever the prefix says, stand for the subject's
objects: calling one sends the call to the subject and returns what it returned, rebuilt as
built-in data by :func:`wire.decode`. So every comparison a test makes is between built-in
values, in a process the model's code never touches, and no expected value leaves it.

It reads the plan (``plan.json``) and a token (the first line of stdin), runs the tests one after
another in one namespace, and prints its report as the last line of stdout behind the token.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import os
import signal
import socket
import symtable
import sys
from collections.abc import Iterator
from functools import partial
from types import FrameType
from typing import Any

import wire  # type: ignore[import-not-found]  # beside this file in the sandbox

_GRACE = 1.0  # seconds a test may run past its call limit before the subject counts as stuck
_NOT_RAISED_AS_SUCH = (StopIteration, StopAsyncIteration)  # would end a test's loop quietly


class SubjectError(Exception):
    """The code under test is gone, stopped answering or broke the protocol."""


class RaisedError(Exception):
    """An exception the code under test raised that is not one of Python's own."""


class Subject:
    """The other program, seen through its link."""

    def __init__(self, link: socket.socket, call_seconds: float | None) -> None:
        self.link = link
        self.call_seconds = call_seconds
        self.last_id = 0
        self.broken: str | None = None

    def hello(self) -> str | None:
        """None once the subject's code is defined; else why it could not be."""
        try:
            message = wire.receive(self.link)
        except wire.WireError:
            return "the program exited before the tests ran"
        if message.get("ready") is True:
            return None
        return str(message.get("error") or "the program did not start")[: wire.SHOWN]

    def lookup(self, names: list[str]) -> dict[str, Any]:
        kinds = self._request({"lookup": names}).get("kinds")
        return kinds if isinstance(kinds, dict) else {}

    def call(self, target: str | int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        request = {"call": target, "args": _encode(list(args)), "kwargs": _encode(kwargs)}
        reply = self._request(request)
        if "raised" in reply:
            raise _rebuilt(reply["raised"], reply.get("message"))
        try:
            return wire.decode(reply["value"], lambda number: Remote(self, number))
        except (KeyError, wire.WireError) as exc:
            self.broken = f"the program sent a bad value: {exc}"
            raise SubjectError(self.broken) from None

    def _request(self, message: dict[str, Any]) -> dict[str, Any]:
        """The reply to ``message``; any failure on the way leaves the subject broken."""
        if self.broken:
            raise SubjectError(self.broken)
        self.last_id += 1
        message["id"] = self.last_id
        try:
            wire.send(self.link, message)
            while True:
                reply = wire.receive(self.link)
                if reply.get("id") == self.last_id:
                    return reply
        except wire.WireError as exc:
            self.broken = "the program exited before the tests finished"
            if "gone" not in str(exc):
                self.broken = f"the program broke the protocol: {exc}"
            raise SubjectError(self.broken) from None
        except BaseException:  # a time limit, mid-message: the stream is no longer in step
            self.broken = "the program stopped answering after a time limit"
            raise


class Remote:
    """Stands for one of the subject's objects: calling it calls that object there."""

    def __init__(self, subject: Subject, target: str | int) -> None:
        self._subject = subject
        self._target = target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._subject.call(self._target, args, kwargs)

    def __repr__(self) -> str:
        name = self._target if isinstance(self._target, str) else f"object {self._target}"
        return f"<{name} of the code under test>"


def _encode(value: Any) -> Any:
    return wire.encode(value, _reference)


def _reference(value: Any) -> int:
    if isinstance(value, Remote) and isinstance(value._target, int):
        return value._target
    raise TypeError(f"a {type(value).__name__} cannot be passed to the code under test")


def _rebuilt(name: Any, message: Any) -> Exception:
    """The exception the subject reported: Python's own class by that name when there is one
    (never one that would end a loop quietly), else :class:`RaisedError`."""
    text = str(message or "")[: wire.SHOWN]
    kind = getattr(builtins, str(name), None)
    if (
        isinstance(kind, type)
        and issubclass(kind, Exception)
        and not issubclass(kind, _NOT_RAISED_AS_SUCH)
    ):
        try:
            return kind(text)
        except TypeError:  # an exception whose constructor wants more arguments
            pass
    return RaisedError(f"{str(name)[: wire.SHOWN]}: {text}" if text else str(name)[: wire.SHOWN])


def free_names(sources: list[str]) -> set[str]:
    """Names the sources read as globals but never bind at their top level, builtins aside."""
    read: set[str] = set()
    bound: set[str] = set()
    for source in sources:
        try:
            top = symtable.symtable(source, "<test>", "exec")
        except SyntaxError:
            continue
        bound |= {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
        for table in _tables(top):
            read |= {
                s.get_name()
                for s in table.get_symbols()
                if s.is_referenced() and (table is top or s.is_global())
            }
    return read - bound - set(dir(builtins))


def _tables(table: symtable.SymbolTable) -> Iterator[symtable.SymbolTable]:
    yield table
    for child in table.get_children():
        yield from _tables(child)


def _failure(exc: BaseException, tests: list[str]) -> tuple[str | None, FrameType | None]:
    """The line of a test where ``exc`` was raised and that test's frame (None, None outside
    the tests)."""
    where, frame = None, None
    traceback = exc.__traceback__
    while traceback is not None:
        name = traceback.tb_frame.f_code.co_filename
        if name.startswith("<test ") and name.endswith(">"):
            lines = tests[int(name[6:-1])].splitlines()
            if 0 < traceback.tb_lineno <= len(lines):
                where = lines[traceback.tb_lineno - 1].strip()
                frame = traceback.tb_frame
        traceback = traceback.tb_next
    return where, frame


def _got(line: str, frame: FrameType, seconds: float | None) -> str | None:
    """For a failed ``assert left == right`` on ``line``, ``left`` evaluated again in its frame
    and shown; None for any other line."""
    try:
        node = ast.parse(line).body[0]
    except (SyntaxError, IndexError):
        return None
    compare = node.test if isinstance(node, ast.Assert) else None
    if not isinstance(compare, ast.Compare) or not isinstance(compare.ops[0], ast.Eq):
        return None
    left = compile(ast.Expression(compare.left), "<test>", "eval")
    scope = (frame.f_globals, frame.f_locals)
    try:
        value = wire.timed(seconds, lambda: eval(left, *scope))  # ok-eval: a test's own code
    except Exception:
        return None
    return repr(value)[: wire.SHOWN]


def examine(plan: dict[str, Any], subject: Subject) -> dict[str, Any]:
    """Run the plan's tests; the report (see :mod:`maslab.kit.code_check`)."""
    report: dict[str, Any] = {"error": None, "results": []}
    seconds = plan["call_seconds"]
    test_seconds = None if seconds is None else seconds + _GRACE
    try:
        report["error"] = wire.timed(test_seconds, subject.hello)
    except TimeoutError:
        report["error"] = "defining the code took too long"
    if report["error"]:
        return report
    namespace: dict[str, Any] = {"__name__": "__main__"}
    try:
        exec(compile(plan["prefix"], "<prompt>", "exec"), namespace)
    except Exception as exc:
        report["error"] = f"the task's own code failed: {wire.one_line(exc)}"
        return report
    tests: list[str] = plan["tests"]
    _bind(namespace, subject, plan["entry_point"], free_names([plan["prefix"], *tests]))
    for number, test in enumerate(tests):
        try:
            code = compile(test, f"<test {number}>", "exec")
            wire.timed(test_seconds, partial(exec, code, namespace))
            report["results"].append({"passed": True})
        except BaseException as exc:
            where, frame = _failure(exc, tests)
            got = None
            if isinstance(exc, AssertionError) and where and frame and not subject.broken:
                got = _got(where, frame, test_seconds)
            at = where[: wire.SHOWN] if where else None
            report["results"].append(
                {"passed": False, "error": wire.one_line(exc), "at": at, "got": got}
            )
            if plan["stop_at_failure"]:
                break
    return report


def _bind(namespace: dict[str, Any], subject: Subject, entry: str | None, free: set[str]) -> None:
    """Bind the entry point to the subject's object of that name, whatever the subject says it
    is, and each free name to what the subject says it has: a module (imported here, by that
    name), a value (plain data), else a function or class (or nothing: a call says so)."""
    if entry:
        namespace[entry] = Remote(subject, entry)
    wanted = sorted(free - {entry})
    if not wanted:
        return
    try:
        kinds = subject.lookup(wanted)
    except SubjectError:
        kinds = {}
    for name in wanted:
        kind = kinds.get(name, "missing")
        if kind == "module":
            try:
                namespace[name] = importlib.import_module(name)
            except ImportError:
                namespace.pop(name, None)
        elif isinstance(kind, dict) and "value" in kind:
            try:
                namespace[name] = wire.decode(kind["value"], lambda n: Remote(subject, n))
            except wire.WireError:
                namespace.pop(name, None)
        else:
            namespace[name] = Remote(subject, name)


def _main() -> None:
    sys.set_int_max_str_digits(0)
    out = sys.stdout
    token = sys.stdin.readline().strip()
    with open("plan.json") as file:
        plan = json.load(file)
    link = socket.socket(fileno=int(os.environ[plan["link_variable"]]))
    signal.signal(signal.SIGALRM, wire.time_is_up)
    report = examine(plan, Subject(link, plan["call_seconds"]))
    print(f"\n{token}" + json.dumps(report), file=out, flush=True)


if __name__ == "__main__":
    _main()
