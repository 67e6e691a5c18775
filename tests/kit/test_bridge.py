"""Model calls from sandboxed code (maslab.kit.bridge): counted in the sample's ledger and cached, a
budget overrun inside the program stops it, the program cannot read the parent's environment or
open a socket, a program that abuses the channel or dies mid-call leaves the run healthy, and
its refused requests and failed calls are counted in the sample's trace and triage signals."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import tempfile
import uuid
from contextlib import suppress
from pathlib import Path

import pytest

import maslab
from maslab.analysis.triage import signals
from maslab.core.context import Budget, Context
from maslab.errors import BudgetExceeded, ConfigError, LLMError
from maslab.harness.samples import trace
from maslab.kit import bridge_client
from maslab.kit.bridge import MAX_REFUSED, ProgramRun, run_with_llm
from maslab.llm import registry
from maslab.llm.cache import Cached, ResponseCache
from maslab.llm.registry import register_provider
from maslab.llm.types import ChatRequest, Completion
from maslab.sandbox import (
    BACKEND_VARIABLE,
    CHANNEL_VARIABLE,
    Limits,
    arun_python,
    protections,
)
from maslab.store.run_store import ResultRecord
from maslab.testing import ScriptedModel, last_user_message

pytestmark = pytest.mark.system

SHORT = Limits(wall_seconds=20, cpu_seconds=10)
# A guard against a hang, not a measure of speed: far above what a run takes on a busy machine.
GUARD_S = 120


def answer(request: ChatRequest) -> str:
    return f"echo: {last_user_message(request)}"


@pytest.fixture(autouse=True)
def healthy(monkeypatch, tmp_path):
    """Every run's host directory is removed and every descriptor closed; no task is left."""
    directory = tmp_path / "sandbox-tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    before = descriptors()
    yield
    assert list(directory.iterdir()) == []
    assert {fd: target for fd, target in descriptors().items() if fd not in before} == {}


def descriptors() -> dict[str, str]:
    """This process's open descriptors and what they are."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        with suppress(OSError):  # the listing's own
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return found


@pytest.fixture(params=["namespaces", "userns"])
def strict(request, monkeypatch):
    """A strict sandbox through each backend; skips, saying why, where it is unavailable."""
    monkeypatch.setenv(BACKEND_VARIABLE, request.param)
    active = protections()
    if active["backend"] != request.param or not (active["proc"] and active["network"]):
        pytest.skip(f"no strict sandbox through the {request.param} backend here")
    return request.param


async def no_tasks_left() -> None:
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_calls_are_counted_in_the_ledger_and_replayed_from_the_cache(tmp_path):
    program = (
        "from maslab_bridge import Agent, call_llm, call_llm_full\n"
        "print('own output')\n"
        "print(call_llm('plan it', temperature=0.5))\n"
        "critic = Agent('critic', system='You check.', max_tokens=50)\n"
        "print(critic.ask('first'))\n"
        "print(critic.ask('second'))\n"
        "print(call_llm_full('full')['usage']['completion_tokens'] > 0)\n"
    )
    cache = ResponseCache(tmp_path / "cache.sqlite")
    scripted = ScriptedModel(answer)
    model = Cached(scripted, cache, namespace="scripted:echo")
    ctx = Context(model, sample_id="t1")
    run = await run_with_llm(program, ctx, limits=SHORT)

    assert run.result.status == "ok", run.result.stderr
    assert run.result.stdout.splitlines() == [
        "own output", "echo: plan it", "echo: first", "echo: second", "True",
    ]  # fmt: skip
    assert (run.calls, run.refused, run.violation) == (4, 0, None)
    records = ctx.ledger.records
    assert [r.agent for r in records] == ["program", "program/critic", "program/critic", "program"]
    assert [r.response for r in records[:3]] == ["echo: plan it", "echo: first", "echo: second"]
    assert [m["role"] for m in records[2].messages] == ["system", "user", "assistant", "user"]
    assert scripted.requests[0].temperature == 0.5 and scripted.requests[1].max_tokens == 50
    assert ctx.usage.calls == 4 and ctx.usage.cached_calls == 0 and ctx.usage.completion_tokens
    assert cache.stats()["entries"] == 4

    replay = Context(model, sample_id="t1")
    again = await run_with_llm(program, replay, limits=SHORT)
    assert again.result.stdout == run.result.stdout
    assert replay.usage.calls == replay.usage.cached_calls == 4
    assert replay.usage.completion_tokens == 0
    assert len(scripted.requests) == 4  # the model answered nothing the second time
    cache.close()
    await no_tasks_left()


async def test_a_budget_overrun_inside_the_program_stops_it():
    program = (
        "from maslab_bridge import call_llm\n"
        "i = 0\n"
        "while True:\n"
        "    call_llm(f'call {i}')\n"
        "    i += 1\n"
    )
    ctx = Context(ScriptedModel(answer), budget=Budget(max_calls=3))
    # stopped, not waited out: waiting for its wall limit of an hour would trip the guard, whose
    # TimeoutError is not BudgetExceeded
    hour = Limits(wall_seconds=3600, cpu_seconds=10)
    with pytest.raises(BudgetExceeded) as stop:
        await asyncio.wait_for(run_with_llm(program, ctx, limits=hour), GUARD_S)
    assert stop.value is ctx.budget_stop and stop.value.kind == "calls"
    assert [r.response for r in ctx.ledger.records] == [
        "echo: call 0",
        "echo: call 1",
        "echo: call 2",
    ]
    await no_tasks_left()


async def test_the_program_cannot_read_the_parents_environment(strict, monkeypatch):
    canary = f"sk-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    program = (
        "import json, os\n"
        "from maslab_bridge import call_llm\n"
        "found, read = [], 0\n"
        "for pid in (name for name in os.listdir('/proc') if name.isdigit()):\n"
        "    for name in ('environ', 'cmdline'):\n"
        "        try:\n"
        "            data = open(f'/proc/{pid}/{name}', 'rb').read()\n"
        "        except OSError:\n"
        "            continue\n"
        "        read += 1\n"
        "        if b'sk-canary' in data:\n"
        "            found.append(f'{pid}/{name}')\n"
        "print(json.dumps({'environ': dict(os.environ), 'found': found, 'read': read,\n"
        "                  'answer': call_llm('a key?')}))\n"
    )
    ctx = Context(ScriptedModel(answer))
    run = await run_with_llm(program, ctx, limits=SHORT)
    seen = json.loads(run.result.stdout)
    assert run.result.status == "ok" and canary not in run.result.stdout
    assert seen["answer"] == "echo: a key?"  # the bridge was live all along
    assert "OPENAI_API_KEY" not in seen["environ"] and CHANNEL_VARIABLE in seen["environ"]
    assert seen["found"] == [] and seen["read"] >= 3  # it did look


async def test_the_program_cannot_open_a_socket(strict):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        program = (
            "import socket\n"
            "from maslab_bridge import call_llm\n"
            "print(call_llm('hi'))\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('connected')\n"
            "except OSError as error:\n"
            "    print(type(error).__name__)\n"
        )
        run = await run_with_llm(program, Context(ScriptedModel(answer)), limits=SHORT)
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # it works from here
    assert run.result.status == "ok"
    first, second = run.result.stdout.splitlines()
    assert first == "echo: hi" and second in ("ConnectionRefusedError", "OSError")


def raw_channel(body: str) -> str:
    """A program writing to the channel itself: ``body`` uses ``sock`` and ``HEADER``."""
    return (
        "import os, socket, struct, time\n"
        "HEADER = struct.Struct('>I')\n"
        f"sock = socket.socket(fileno=int(os.environ['{CHANNEL_VARIABLE}']))\n"
        f"{body}\n"
        "time.sleep(60)\n"
    )


async def run_abuse(program: str, **options) -> tuple[ProgramRun, Context]:
    ctx = Context(ScriptedModel(answer))
    run = await asyncio.wait_for(
        run_with_llm(program, ctx, **{"limits": SHORT, **options}), GUARD_S
    )
    return run, ctx


async def still_serves(ctx: Context) -> None:
    """The run is healthy: the sample's context serves the method, and a new program."""
    assert (await ctx.chat("after")).text == "echo: after"
    run = await run_with_llm(
        "from maslab_bridge import call_llm\nprint(call_llm('again'))", ctx, limits=SHORT
    )
    assert run.result.stdout == "echo: again\n"


@pytest.mark.parametrize(
    ("body", "violation"),
    [
        ("sock.sendall(HEADER.pack(2**31) + b'x' * 4096)", "a request of 2147483648 bytes"),
        ("sock.sendall(HEADER.pack(9) + b'not json!')", "a request that is not JSON"),
        ("sock.sendall(HEADER.pack(4) + b'[12]')", "a request that is not a JSON object"),
        (
            "while True:\n    sock.sendall(HEADER.pack(13) + b'{\"id\": 1.5}  ')",
            "a request that is not a JSON object with an integer id",
        ),
        (
            "while True:\n    sock.sendall(HEADER.pack(9) + b'{\"id\": 1}')",
            "more than 100 refused requests",
        ),
    ],
    ids=["huge", "garbage", "not-an-object", "no-id", "endless-refusals"],
)
async def test_a_program_abusing_the_channel_is_ended(body, violation):
    run, ctx = await run_abuse(raw_channel(body))
    assert run.violation is not None and run.violation.startswith(violation)
    # killed: the bridge ended it (its wall limit would have been a timeout)
    assert run.result.status == "killed"
    assert ctx.ledger.records == []
    # the request that ended it is refused too, and the sample counts it
    refused = MAX_REFUSED + 1 if "refused" in violation else 1
    assert run.refused == ctx.program_calls_refused == refused and ctx.program_calls_failed == 0
    await still_serves(ctx)
    await no_tasks_left()


async def test_a_program_that_never_reads_its_replies_ends_at_its_wall_limit():
    request = json.dumps({"id": 1, "messages": [{"role": "user", "content": "x" * 50_000}]})
    body = (
        f"data = {request!r}.encode()\nwhile True:\n    sock.sendall(HEADER.pack(len(data)) + data)"
    )
    run, ctx = await run_abuse(raw_channel(body), limits=Limits(wall_seconds=3))
    assert run.result.status == "timeout" and run.violation is None
    assert 8 <= run.calls <= 100  # served until its unread replies filled the socket
    await still_serves(ctx)
    await ctx.settle()
    await no_tasks_left()


class Held(ScriptedModel):
    """Answers ``slow`` only once the test sets ``release``, and ``after slow`` once ``slow`` has
    reached it: the test orders the calls, not a latency racing the machine's load."""

    def __init__(self) -> None:
        super().__init__(answer)
        self.slow_arrived, self.release = asyncio.Event(), asyncio.Event()

    async def complete(self, request: ChatRequest) -> Completion:
        prompt = last_user_message(request)
        if prompt == "slow":
            self.slow_arrived.set()
            await self.release.wait()
        elif prompt == "after slow":
            await self.slow_arrived.wait()
        return await super().complete(request)


async def test_a_program_dying_mid_call_leaves_the_run_healthy():
    program = (
        "import os, threading\n"
        "from maslab_bridge import call_llm\n"
        "threading.Thread(target=call_llm, args=('slow',), daemon=True).start()\n"
        "call_llm('after slow')  # answered once the thread's call is with the model\n"
        "print('dying', flush=True)\n"
        "os._exit(3)\n"
    )
    model = Held()
    ctx = Context(model)
    run = await asyncio.wait_for(run_with_llm(program, ctx, limits=SHORT), GUARD_S)
    assert (run.result.status, run.result.returncode, run.result.stdout) == ("error", 3, "dying\n")
    (slow,) = [r for r in ctx.ledger.records if r.messages[-1]["content"] == "slow"]
    assert run.calls == 2 and slow.response is None  # the run ended before the model answered
    await still_serves(ctx)
    model.release.set()
    await ctx.settle()  # the orphaned call still runs to its end and is recorded
    assert slow.response == "echo: slow"
    await no_tasks_left()


async def test_bad_requests_and_model_failures_are_error_replies():
    def failing(request: ChatRequest) -> str:
        if last_user_message(request) == "fail":
            raise LLMError("the server is down")
        return answer(request)

    program = (
        "from maslab_bridge import BridgeError, call_llm, call_llm_full\n"
        "def attempt(*args, **kwargs):\n"
        "    try:\n"
        "        print(call_llm(*args, **kwargs))\n"
        "    except BridgeError as error:\n"
        "        print('refused:', error)\n"
        "attempt('x', logit_bias={'1': 5})\n"
        "attempt('x', extra={'model': 'gpt-4'})\n"
        "attempt('x', temperature='hot')\n"
        "attempt('x', max_tokens=True)\n"
        "attempt('x', response_format={'type': 'xml'})\n"
        "attempt([{'role': 'tool', 'content': 'x'}])\n"
        "attempt([{'role': 'user', 'content': 5}])\n"
        "attempt([{'role': 'user', 'content': 'x', 'name': 'n'}])\n"
        "attempt([])\n"
        "attempt([{'role': 'user', 'content': 'x'}] * 201)\n"
        "attempt('x' * 200_001)\n"
        "attempt('x', agent='../../etc')\n"
        "attempt('fail')\n"
        "attempt('x' * 3_000_000)\n"
        "attempt('fine', temperature=0, stop=['\\n'], response_format={'type': 'json_object'})\n"
        "attempt('over the limit')\n"
    )
    ctx = Context(ScriptedModel(failing))
    run = await run_with_llm(program, ctx, limits=SHORT, max_calls=2)
    lines = run.result.stdout.splitlines()
    assert run.result.status == "ok" and run.violation is None
    assert [line.startswith("refused: ") for line in lines] == [True] * 14 + [False, True]
    assert "logit_bias" in lines[0] and "extra" in lines[1] and "temperature" in lines[2]
    assert "the server is down" in lines[12] and "bytes: the limit" in lines[13]
    assert lines[14] == "echo: fine" and "limit of 2 model calls" in lines[15]
    # the oversized request never left the program; "fail" was passed to the model
    assert (run.calls, run.refused, run.failed) == (2, 13, 1)
    assert (ctx.program_calls_refused, ctx.program_calls_failed) == (13, 1)
    assert [r.response for r in ctx.ledger.records] == [None, "echo: fine"]


class Together(ScriptedModel):
    """Answers only once ``n`` calls are in flight at once (``peak``: the most that were)."""

    def __init__(self, n: int) -> None:
        super().__init__(answer)
        self.n, self.in_flight, self.peak = n, 0, 0
        self.all_in = asyncio.Event()

    async def complete(self, request: ChatRequest) -> Completion:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        if self.in_flight >= self.n:
            self.all_in.set()
        try:
            await self.all_in.wait()
            return await super().complete(request)
        finally:
            self.in_flight -= 1


async def test_concurrent_calls_from_threads_and_tasks_are_served_together():
    program = (
        "import asyncio, threading\n"
        "from maslab_bridge import Agent, acall_llm\n"
        "async def main():\n"
        "    agents = [Agent(f'a{i}') for i in range(3)]\n"
        "    answers = await asyncio.gather(*(a.aask('go') for a in agents), acall_llm('too'))\n"
        "    print(answers)\n"
        "asyncio.run(main())\n"
    )
    model = Together(4)
    ctx = Context(model)
    run = await asyncio.wait_for(run_with_llm(program, ctx, limits=SHORT), GUARD_S)
    # served together: one after the other, the first call would wait for the other three for
    # ever (and the program's wall limit end it)
    assert run.result.stdout == "['echo: go', 'echo: go', 'echo: go', 'echo: too']\n"
    assert model.peak == 4
    assert sorted(r.agent for r in ctx.ledger.records) == [
        "program", "program/a0", "program/a1", "program/a2",
    ]  # fmt: skip


async def test_the_client_file_is_reserved_and_needs_a_channel():
    assert bridge_client.CHANNEL_VARIABLE == CHANNEL_VARIABLE
    with pytest.raises(ConfigError, match=r"maslab_bridge\.py"):
        await run_with_llm("", Context(ScriptedModel(answer)), files={"maslab_bridge.py": ""})
    source = Path(bridge_client.__file__).read_text()
    program = (
        "from maslab_bridge import BridgeError, call_llm\n"
        "try:\n"
        "    call_llm('x')\n"
        "except BridgeError as error:\n"
        "    print(error)\n"
    )
    result = await arun_python(program, files={"maslab_bridge.py": source})
    assert result.stdout == "no model channel: run this program with maslab.kit.bridge\n"


async def test_a_program_leaving_with_replies_unread_leaves_the_run_healthy():
    request = json.dumps({"id": 1, "messages": [{"role": "user", "content": "hi"}]})
    body = f"data = {request!r}.encode()\nsock.sendall(HEADER.pack(len(data)) + data)"
    # leave once the reply is there (peeked at, never read): the bridge has served the call
    leave = "sock.recv(1, socket.MSG_PEEK)\nprint('bye')"
    run, ctx = await run_abuse(raw_channel(body).replace("time.sleep(60)", leave))
    assert (run.result.status, run.result.stdout, run.calls) == ("ok", "bye\n", 1)
    await still_serves(ctx)
    await no_tasks_left()


async def test_parameter_values_are_bounded_and_a_nan_refused_in_the_program():
    """Names were checked, not values: a NaN ended the whole program as "not JSON", and
    max_tokens=10**12 or a stop list of 100,000 items reached the server."""
    program = (
        "from maslab_bridge import BridgeError, call_llm\n"
        "def attempt(*args, **kwargs):\n"
        "    try:\n"
        "        print(call_llm(*args, **kwargs))\n"
        "    except BridgeError as error:\n"
        "        print('refused:', error)\n"
        "attempt('x', temperature=float('nan'))\n"
        "attempt('x', top_p=float('inf'))\n"
        "attempt('x', max_tokens=10**12)\n"
        "attempt('x', max_tokens=65)\n"
        "attempt('x', stop=['.'] * 100_000)\n"
        "attempt('x', stop='s' * 1_001)\n"
        "attempt('x', seed=2**64)\n"
        "attempt('fine', max_tokens=64, stop=['.'] * 16, seed=-(2**63))\n"
    )
    ctx = Context(ScriptedModel(answer), sampling={"max_tokens": 64})
    run = await run_with_llm(program, ctx, limits=SHORT)
    lines = run.result.stdout.splitlines()
    assert run.result.status == "ok" and run.violation is None, run.result.stderr
    assert [line.startswith("refused: ") for line in lines] == [True] * 7 + [False]
    assert all("not a finite number" in line for line in lines[:2])
    assert all("max_tokens is at most 64" in line for line in lines[2:4])
    assert all("stop is at most 16 sequences" in line for line in lines[4:6])
    assert "seed: Input should be a valid integer" in lines[6] and lines[7] == "echo: fine"
    assert (run.calls, run.refused) == (1, 5)  # the NaNs never left the program
    assert [r.response for r in ctx.ledger.records] == ["echo: fine"]


def failing(request: ChatRequest) -> str:
    """Fails a prompt starting "fail"; echoes any other."""
    if last_user_message(request).startswith("fail"):
        raise LLMError("the model is down", model="failing")
    return answer(request)


REFUSED, FAILED = 3, 2
FLAWED = (
    "import asyncio\n"
    "from maslab_bridge import acall_llm\n"
    "async def forward(task):\n"
    "    refused = [\n"
    "        acall_llm('x', logit_bias={'1': 5}),\n"
    "        acall_llm([{'role': 'tool', 'content': 'x'}]),\n"
    "        acall_llm('x', agent='../up'),\n"
    "    ]\n"
    f"    failed = [acall_llm(f'fail {{i}}') for i in range({FAILED})]\n"
    "    replies = await asyncio.gather(*refused, *failed, acall_llm('fine'),\n"
    "                                   return_exceptions=True)\n"
    "    return [type(r).__name__ if isinstance(r, Exception) else r for r in replies]\n"
)
"""A program whose ``forward`` sends :data:`REFUSED` requests the bridge refuses, :data:`FAILED`
calls the model fails and one it answers, all at once; it returns what each got."""
REPLIES = str(["BridgeError"] * (REFUSED + FAILED) + ["echo: fine"])


async def test_refused_and_failed_calls_of_every_program_are_in_the_samples_trace_and_signals():
    """Two programs of one sample, served at once, each sending bad requests and calls that
    fail together: the sample's trace and triage signals count every one, exactly."""
    ctx = Context(ScriptedModel(failing), sample_id="t1")
    program = FLAWED + "print(asyncio.run(forward('')))\n"
    runs = await asyncio.wait_for(
        asyncio.gather(*(run_with_llm(program, ctx, limits=SHORT) for _ in range(2))), GUARD_S
    )
    for run in runs:
        assert run.result.stdout == f"{REPLIES}\n", run.result.stderr
        assert (run.calls, run.refused, run.failed) == (FAILED + 1, REFUSED, FAILED)
    line = trace("t1", 0, None, ctx)
    values = signals(ResultRecord(task_id="t1", status="ok"), line)
    for counts in (line.line(), values):
        both = (counts["program_calls_refused"], counts["program_calls_failed"])
        assert both == (2 * REFUSED, 2 * FAILED)
    assert values["failed_calls"] == 2 * FAILED  # they reached the model: in the ledger too
    await no_tasks_left()


def test_a_runs_records_carry_the_refused_and_failed_calls_of_its_programs(monkeypatch, tmp_path):
    """A method running a program through the bridge (mas_gpt): each sample's record and trace,
    as the runner writes them, count its program's refused requests and failed calls."""

    def respond(request: ChatRequest) -> str:
        if request.scope.endswith("\x1fgenerator"):
            return f"```python\n{FLAWED}```"
        return failing(request)

    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("flawed")(lambda name, settings: ScriptedModel(respond, name="flawed"))
    run = maslab.evaluate("mas_gpt", "arith", "flawed:x", limit=2, cache=False,
                          out=tmp_path / "run", progress=False)  # fmt: skip
    results = [json.loads(x) for x in (run.dir / "results.jsonl").read_text().splitlines()]
    traces = [json.loads(x) for x in (run.dir / "traces.jsonl").read_text().splitlines()]
    assert len(results) == len(traces) == 2
    for record, line in zip(results, traces, strict=True):
        assert (record["status"], record["answer"]) == ("ok", REPLIES)
        found = record["signals"]
        assert (found["program_calls_refused"], found["program_calls_failed"]) == (REFUSED, FAILED)
        assert (line["program_calls_refused"], line["program_calls_failed"]) == (REFUSED, FAILED)
        assert found["failed_calls"] == FAILED
