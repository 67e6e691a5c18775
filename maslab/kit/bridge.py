"""Model-written code that calls models: run it in the sandbox and serve its calls.

:func:`run_with_llm` runs a program in :mod:`maslab.sandbox` with :mod:`maslab.kit.bridge_client`
importable as ``maslab_bridge`` (``call_llm``, ``Agent``, ...) and a channel to this process.
Each request the program sends is checked and served through the sample's context
(:meth:`maslab.core.context.Context.chat`): budgeted, cached, recorded in the ledger (agent
``<agent>/<name>`` for a named agent of the program, ``<agent>`` otherwise) and gated like the
method's own calls. The program never holds a key, an endpoint or the network.

* A request that breaks the rules (turns, roles, sizes, unknown parameters, the call limit) or a
  call the model fails gets an error reply: the program's call raises, the run goes on. Each is
  counted, in :class:`ProgramRun` and in the sample's context (``program_calls_refused``,
  ``program_calls_failed``): its trace and its triage signals show it.
* A call the budget forbids (:class:`~maslab.errors.BudgetExceeded`), or any other stop of the
  sample, ends the program and is raised here, as for a method's own call.
* Abuse of the channel ends the program (status ``killed``) and says why in
  :attr:`ProgramRun.violation`: a frame over :data:`~maslab.kit.bridge_client.MAX_FRAME_BYTES`, one
  that is not a JSON object with an integer ``id``, or more than :data:`MAX_REFUSED` refused
  requests. The offending request counts as refused.

Up to ``max_concurrent`` calls are served at once (a program's threads or gathered tasks); the
next request is read only when one is done, so a flood waits on its own socket. The wall-time
limit covers the program's waits for the model.

:func:`call_function` runs a function that model-written code defines (an agent's
``forward(task)``, a workflow): a fixed driver of ours loads the code from its file
(:data:`MODULE_FILE`), calls the function with one text argument (awaiting a coroutine) and
reports its value, or why there is none, after a per-run token on a stdout that only the driver
writes to (the code's own output, even from child processes, goes to stderr).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from maslab.config_files import validation_message
from maslab.core.context import Context, Sampling
from maslab.core.roles import agent_settings
from maslab.errors import ConfigError, LLMError
from maslab.kit import bridge_client as protocol
from maslab.llm.types import ChatMessage, ChatModel
from maslab.sandbox import Limits, SandboxResult, arun_python, read_report

CLIENT_FILE = "maslab_bridge.py"
"""The client library's file in the program's directory."""
MODULE_FILE = "program.py"
"""The file :func:`call_function` writes the code to (loaded as the module ``program``)."""
ERROR_CHARS = 1500
"""The tail of a traceback or of the error output that :attr:`FunctionCall.error` shows."""
LIMITS = Limits(wall_seconds=120, cpu_seconds=20)
"""Default limits of a program that calls models: its wall time covers the calls."""
MAX_CALLS = 100
MAX_CONCURRENT = 8
MAX_REFUSED = 100
"""More refused requests than this, and the program is flooding the channel: it is ended."""
_AGENT_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_FORMATS = ("json_object", "json_schema")


@dataclass(frozen=True)
class ProgramRun:
    """How a program that calls models ended.

    ``calls``: the requests passed to the model (each one a call in the sample's ledger);
    ``refused``: requests not passed to it (invalid, over the limit, or ending the program);
    ``failed``: calls the model failed (answered with an error); ``violation``: why the bridge
    ended the program (its status is then ``killed``), None if it did not.
    """

    result: SandboxResult
    calls: int
    refused: int
    failed: int
    violation: str | None


async def run_with_llm(
    code: str,
    ctx: Context,
    *,
    agent: str = "program",
    role: str | None = None,
    model: ChatModel | str | None = None,
    limits: Limits = LIMITS,
    stdin: str | None = None,
    files: Mapping[str, str] | None = None,
    max_calls: int = MAX_CALLS,
    max_concurrent: int = MAX_CONCURRENT,
) -> ProgramRun:
    """Run ``code`` in the sandbox, serving its model calls through ``ctx``.

    Args:
        code: The program; it may ``import maslab_bridge``.
        ctx: The sample's context: every call is its call.
        agent: The program's name in the ledger; its named agents are ``<agent>/<name>``.
        role: The role model roles know the program's calls by; None: ``agent``.
        model: The model (spec or handle) of its calls; None is the sample's. Model roles for
            the role, then the agent's full name, override it and its sampling.
        limits: As for :func:`maslab.sandbox.arun_python`.
        stdin: As for :func:`maslab.sandbox.arun_python`.
        files: As for :func:`maslab.sandbox.arun_python`.
        max_calls: The most model calls served; later requests get an error reply.
        max_concurrent: The most calls served at once.

    Raises:
        BudgetExceeded: A call of the program hit the sample's budget (the program was ended).
        ConfigError: ``files`` holds :data:`CLIENT_FILE`.
    """
    if CLIENT_FILE in (files or {}):
        raise ConfigError(f"sandbox file {CLIENT_FILE!r} is the bridge's own: choose another")
    server = _Server(ctx, agent, role, model, max_calls, max_concurrent)
    result = await arun_python(
        code,
        limits=limits,
        stdin=stdin,
        files={**(files or {}), CLIENT_FILE: _client_source()},
        channel=server.serve,
    )
    return ProgramRun(result, server.calls, server.refused, server.failed, server.violation)


@dataclass(frozen=True)
class FunctionCall:
    """The outcome of :func:`call_function`: the function's value as text, or (``answer`` None)
    ``error``, why there is none, in words a model can read ("" when there is an answer)."""

    answer: str | None
    error: str
    run: ProgramRun

    @property
    def calls(self) -> int:
        """The model calls the run was served."""
        return self.run.calls


_DRIVER = f"""\
import asyncio
import json
import os
import sys
import traceback
import types


def _trace(error):
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename != __file__
    ]
    lines = traceback.format_list(frames) + traceback.format_exception_only(type(error), error)
    head = "Traceback (most recent call last):\\n" if frames else ""
    return (head + "".join(lines)).strip()[-{ERROR_CHARS}:]


def _call(function, argument):
    module = types.ModuleType("program")
    module.__file__ = {MODULE_FILE!r}
    sys.modules["program"] = module
    try:
        with open({MODULE_FILE!r}, "rb") as source:
            code = compile(source.read(), {MODULE_FILE!r}, "exec")
        exec(code, module.__dict__)
    except BaseException as error:
        kind = "does not compile" if isinstance(error, SyntaxError) else "failed while loading"
        return {{"error": f"the code {{kind}}:\\n{{_trace(error)}}"}}
    try:
        target = getattr(module, function, None)
    except BaseException:
        target = None
    if not callable(target):
        return {{"error": f"the code defines no function named {{function}}"}}
    try:
        answer = target(argument)
        if asyncio.iscoroutine(answer):
            answer = asyncio.run(answer)
        if answer is not None:
            return {{"answer": str(answer)}}
    except BaseException as error:
        return {{"error": f"{{function}} raised an exception:\\n{{_trace(error)}}"}}
    return {{"error": f"{{function}} returned no answer (None)"}}


def _main():
    token = sys.stdin.readline().strip()
    request = json.loads(sys.stdin.read())
    report = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    outcome = _call(request["function"], request["argument"])
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    report.write("\\n" + token + json.dumps(outcome) + "\\n")
    report.flush()
    os._exit(0 if "answer" in outcome else 1)


_main()
"""
"""The entry program of :func:`call_function`: it reads the token and the call from stdin before
the code is imported; stdout keeps only its report (the code's fd 1 is stderr); it ends at once
after the report (threads the code left behind do not run on)."""

_ENDINGS = {
    "timeout": "the program ran out of time",
    "memory": "the program ran out of memory",
    "output_limit": "the program wrote more output than allowed",
    "disk_limit": "the program filled its writable space",
    "killed": "the program was killed",
}


async def call_function(
    code: str,
    function: str,
    argument: str,
    ctx: Context,
    *,
    agent: str = "program",
    role: str | None = None,
    files: Mapping[str, str] | None = None,
    limits: Limits = LIMITS,
    max_calls: int = MAX_CALLS,
) -> FunctionCall:
    """Call ``function(argument)`` of the model-written ``code`` in the sandbox, serving its model
    calls through ``ctx`` (as :func:`run_with_llm`, with ``agent``, ``role``, ``limits`` and
    ``max_calls``).

    The code is written as :data:`MODULE_FILE` next to ``files`` (modules it may import) and
    loaded by our driver as the module ``program``; the driver calls the function, runs a
    coroutine it returns with :func:`asyncio.run` and reports ``str`` of the value. No answer
    (the code does not compile or fails while loading, there is no such function, it raises or
    returns None, the program runs out of time or is killed) is an ``error`` saying so, with the
    tail of the traceback or of the error output.

    Raises:
        BudgetExceeded: As :func:`run_with_llm`.
        ConfigError: ``files`` holds :data:`MODULE_FILE` or :data:`CLIENT_FILE`.
    """
    if MODULE_FILE in (files or {}):
        raise ConfigError(f"sandbox file {MODULE_FILE!r} is the called code's own: choose another")
    token = secrets.token_hex(16)  # marks the driver's report: the code cannot forge it
    run = await run_with_llm(
        _DRIVER,
        ctx,
        agent=agent,
        role=role,
        limits=limits,
        stdin=f"{token}\n" + json.dumps({"function": function, "argument": argument}),
        files={**(files or {}), MODULE_FILE: code},
        max_calls=max_calls,
    )
    report = read_report(run.result.stdout, token) or {}
    answer, error = report.get("answer"), report.get("error")
    if isinstance(answer, str):
        return FunctionCall(answer, "", run)
    return FunctionCall(None, error if isinstance(error, str) else _ending(run), run)


def _ending(run: ProgramRun) -> str:
    """Why a program ended without the driver's report, and the tail of its error output."""
    result = run.result
    if run.violation:
        why = f"the program was ended for misusing the model channel: {run.violation}"
    else:
        exited = f"the program exited without an answer (exit code {result.returncode})"
        why = _ENDINGS.get(result.status, exited)
    detail = result.stderr.strip()[-ERROR_CHARS:]
    return f"{why}; its error output ends with:\n{detail}" if detail else why


@cache
def _client_source() -> str:
    return Path(protocol.__file__).read_text(encoding="utf-8")


class _Refused(Exception):
    """A request the bridge will not serve; the message goes back to the program."""


class _Abuse(Exception):
    """A frame that ends the program (see the module docstring); the message says why."""


@dataclass(frozen=True)
class _Call:
    """A checked request."""

    id: int
    messages: list[ChatMessage]
    params: dict[str, Any]
    agent: str | None


class _Server:
    """Serves one program's channel (see the module docstring)."""

    def __init__(
        self,
        ctx: Context,
        agent: str,
        role: str | None,
        model: ChatModel | str | None,
        max_calls: int,
        max_concurrent: int,
    ) -> None:
        self.ctx, self.agent, self.role, self.model = ctx, agent, role or agent, model
        self.max_calls = max_calls
        self.slots = asyncio.Semaphore(max_concurrent)
        self.calls = self.refused = self.failed = 0
        self.violation: str | None = None
        self.answering: set[asyncio.Task[None]] = set()
        self.sending = asyncio.Lock()

    async def serve(self, sock: socket.socket) -> None:
        """Read and answer requests until a violation (return) or a stop of the sample (raise).

        Cancelled (the program ended), it cancels the calls in flight and waits for them.
        """
        reader, writer = await asyncio.open_connection(sock=sock)
        stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        reading = asyncio.ensure_future(self._read(reader, writer, stopped))
        try:
            watched: set[asyncio.Future[Any]] = {reading, stopped}
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            if stopped.done():
                stopped.result()
            self.violation = reading.result()
            if self.violation is None:  # the channel closed: wait for a stop, or the end
                await stopped
        finally:
            reading.cancel()
            for task in self.answering:
                task.cancel()
            await asyncio.gather(reading, *self.answering, return_exceptions=True)
            if not stopped.done():
                stopped.cancel()
            elif not stopped.cancelled():
                stopped.exception()  # taken in, even when cancellation came first
            writer.transport.abort()  # drops replies the program never read

    async def _read(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        stopped: asyncio.Future[None],
    ) -> str | None:
        """Take requests in until the channel closes (None) or is abused (why)."""
        while True:
            await self.slots.acquire()
            try:
                request_id, body = await _request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return None  # closed; reset, when the program left replies unread
            except _Abuse as abuse:
                self._refuse()
                return str(abuse)
            try:
                call: _Call | str = self._check(request_id, body)
                self.calls += 1
            except _Refused as refusal:
                if self._refuse() > MAX_REFUSED:
                    return f"more than {MAX_REFUSED} refused requests"
                call = str(refusal)
            task = asyncio.ensure_future(self._answer(writer, request_id, call, stopped))
            self.answering.add(task)
            task.add_done_callback(self.answering.discard)

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        request_id: int,
        call: _Call | str,
        stopped: asyncio.Future[None],
    ) -> None:
        """Send the reply to ``call`` (a refusal's reason: an error reply); a stop of the sample
        goes to ``stopped``."""
        try:
            if isinstance(call, str):
                reply: dict[str, Any] = {"id": request_id, "error": call}
            else:
                reply = await self._complete(call)
            async with self.sending:
                writer.write(protocol.frame(reply))
                await writer.drain()
        except ConnectionError:
            pass  # the program is gone, or closed its end: its call is moot
        except Exception as error:
            if not stopped.done():
                stopped.set_exception(error)
        finally:
            self.slots.release()  # only now: a program that reads no reply is read no more

    async def _complete(self, call: _Call) -> dict[str, Any]:
        """The model's answer through the context; a model failure is an error reply."""
        name = f"{self.agent}/{call.agent}" if call.agent else self.agent
        settings = agent_settings(self.ctx.model_roles, name, self.role, {"model": self.model})
        model = settings.pop("model")
        try:
            completion = await self.ctx.chat(
                call.messages, model=model, agent=name, **{**settings, **call.params}
            )
        except (LLMError, ConfigError) as error:
            self.failed += 1
            self.ctx.program_calls_failed += 1
            return {"id": call.id, "error": str(error)}
        usage = completion.usage
        return {
            "id": call.id,
            "text": completion.text,
            "finish_reason": completion.finish_reason,
            "usage": {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            },
            "cached": completion.cached,
        }

    def _refuse(self) -> int:
        """Count a refused request, the program's and its sample's; the program's count."""
        self.refused += 1
        self.ctx.program_calls_refused += 1
        return self.refused

    def _check(self, request_id: int, body: dict[str, Any]) -> _Call:
        """The request as a call, or :class:`_Refused` saying what is wrong with it."""
        if self.calls >= self.max_calls:
            raise _Refused(f"the program's limit of {self.max_calls} model calls is reached")
        unknown = sorted(set(body) - {"id", "messages", "params", "agent"})
        if unknown:
            raise _Refused(f"unknown request fields: {', '.join(unknown)}")
        agent = body.get("agent")
        if agent is not None and not (isinstance(agent, str) and _AGENT_NAME.fullmatch(agent)):
            raise _Refused("an agent name is 1 to 64 letters, digits, '_', '.' or '-'")
        params = body.get("params") or {}
        if not isinstance(params, dict):
            raise _Refused("params must be an object")
        limit = self.ctx.sampling.get("max_tokens") or protocol.MAX_TOKENS
        checked = _params(params, min(limit, protocol.MAX_TOKENS))
        return _Call(request_id, _messages(body.get("messages")), checked, agent)


async def _request(reader: asyncio.StreamReader) -> tuple[int, dict[str, Any]]:
    """The next request's id and body; :class:`_Abuse` for a frame that ends the program, and
    :class:`asyncio.IncompleteReadError` or :class:`ConnectionError` once the channel closes."""
    header = await reader.readexactly(protocol.HEADER.size)
    size = protocol.HEADER.unpack(header)[0]
    if size > protocol.MAX_FRAME_BYTES:
        raise _Abuse(f"a request of {size} bytes (the limit is {protocol.MAX_FRAME_BYTES})")
    try:
        body = orjson.loads(await reader.readexactly(size))
    except orjson.JSONDecodeError:
        raise _Abuse("a request that is not JSON") from None
    request_id = body.get("id") if isinstance(body, dict) else None
    if not isinstance(request_id, int) or isinstance(request_id, bool):
        raise _Abuse("a request that is not a JSON object with an integer id")
    return request_id, body


def _messages(turns: Any) -> list[ChatMessage]:
    """Checked turns: 1 to MAX_MESSAGES of role and content, each content of bounded length."""
    if not isinstance(turns, list) or not 1 <= len(turns) <= protocol.MAX_MESSAGES:
        raise _Refused(f"messages must be a list of 1 to {protocol.MAX_MESSAGES} turns")
    checked: list[ChatMessage] = []
    for turn in turns:
        if not isinstance(turn, dict) or set(turn) != {"role", "content"}:
            raise _Refused('each turn is {"role": ..., "content": ...} and nothing else')
        role, content = turn["role"], turn["content"]
        if role not in protocol.ROLES:
            raise _Refused(f"a turn's role is one of {', '.join(protocol.ROLES)}, not {role!r}")
        if not isinstance(content, str) or len(content) > protocol.MAX_MESSAGE_CHARS:
            raise _Refused(f"a turn's content is text of at most {protocol.MAX_MESSAGE_CHARS}")
        checked.append({"role": role, "content": content})
    return checked


def _params(params: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """Checked call parameters: only :data:`~maslab.kit.bridge_client.PARAMS`, of strict types and
    bounded values (``max_tokens`` at most ``max_tokens``, a few short stop sequences)."""
    unknown = sorted(set(params) - set(protocol.PARAMS))
    if unknown:
        allowed = ", ".join(protocol.PARAMS)
        raise _Refused(f"unknown parameters {', '.join(unknown)}: the allowed are {allowed}")
    checked = dict(params)
    response_format = checked.pop("response_format", None)
    try:
        Sampling.model_validate(checked, strict=True)
    except ValidationError as error:
        raise _Refused(validation_message(error, "params")) from None
    if checked.get("max_tokens", 0) > max_tokens:
        raise _Refused(f"max_tokens is at most {max_tokens}")
    stops = checked.get("stop")
    stops = [stops] if isinstance(stops, str) else stops or []
    if len(stops) > protocol.MAX_STOPS or any(len(s) > protocol.MAX_STOP_CHARS for s in stops):
        raise _Refused(
            f"stop is at most {protocol.MAX_STOPS} sequences of {protocol.MAX_STOP_CHARS} "
            "characters at most"
        )
    if response_format is not None:
        if not isinstance(response_format, dict) or response_format.get("type") not in _FORMATS:
            raise _Refused(f"response_format is an object of type {' or '.join(_FORMATS)}")
        checked["response_format"] = response_format
    return checked
