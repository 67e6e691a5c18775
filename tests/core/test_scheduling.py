"""The call gate: which waiting call goes next under each policy, no slot lost to a cancelled
waiter, the cap held in a run, and the same results whatever the policy."""

from __future__ import annotations

import asyncio
import itertools
import zlib

import pytest

from maslab import defaults
from maslab.api import run_config
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.scheduling import POLICIES, CallGate, Policy
from maslab.errors import ConfigError
from maslab.harness.runner import RunConfig, Runner
from maslab.harness.sweep import load_sweep
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.testing import FakeOpenAIServer


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _served_order(gate: CallGate, progress: list[int]) -> list[int]:
    """Which of the waiters (queued in the order given, each with its sample's progress) get
    the slot, in turn, once the one holder lets go: each waiter releases at once."""
    await gate.acquire()
    served: list[int] = []

    async def wait(p: int) -> None:
        async with gate.slot(p):
            served.append(p)

    waiters = []
    for p in progress:
        waiters.append(asyncio.create_task(wait(p)))
        await _settle()  # queued in this order
    gate.release()
    await asyncio.gather(*waiters)
    return served


async def test_progress_serves_the_sample_with_most_calls_answered_first():
    assert await _served_order(CallGate(1, "progress"), [1, 5, 3]) == [5, 3, 1]


async def test_progress_breaks_ties_first_come_first_served():
    gate = CallGate(1, "progress")
    assert await _served_order(gate, [2, 7, 2, 7, 0]) == [7, 7, 2, 2, 0]


async def test_fcfs_serves_in_arrival_order_whatever_the_progress():
    assert await _served_order(CallGate(1, "fcfs"), [1, 5, 3, 0]) == [1, 5, 3, 0]


async def test_a_waiting_call_is_passed_over_at_most_patience_times():
    gate = CallGate(1, "progress", patience=2)
    # the 0 came first; two later calls go ahead of it, then it goes before the later ones
    assert await _served_order(gate, [0, 9, 8, 7, 6]) == [9, 8, 0, 7, 6]


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_cancelled_waiter_takes_no_slot(policy: Policy):
    gate = CallGate(1, policy)
    await gate.acquire()
    waiter = asyncio.create_task(gate.acquire(5))
    await _settle()
    assert gate.waiting == 1
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert gate.waiting == 0
    gate.release()
    assert gate.in_use == 0
    await asyncio.wait_for(gate.acquire(), 1)  # the slot is free, not promised to the dead one


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_waiter_cancelled_as_it_is_granted_hands_the_slot_on(policy: Policy):
    gate = CallGate(1, policy)
    await gate.acquire()
    first = asyncio.create_task(gate.acquire(5))
    await _settle()
    second = asyncio.create_task(gate.acquire(0))
    await _settle()
    gate.release()  # the slot goes to first ...
    first.cancel()  # ... which is cancelled before it runs again
    await asyncio.gather(first, return_exceptions=True)
    await asyncio.wait_for(second, 1)  # so second has it
    assert first.cancelled() and gate.in_use == 1
    gate.release()
    assert gate.in_use == 0


async def test_releasing_a_slot_never_taken_is_an_error():
    gate = CallGate(2)
    with pytest.raises(RuntimeError, match="released more often"):
        gate.release()


@pytest.mark.parametrize("policy", POLICIES)
async def test_many_holders_never_exceed_the_cap(policy: Policy):
    gate, peak = CallGate(3, policy), 0

    async def call(i: int) -> None:
        nonlocal peak
        async with gate.slot(i % 4):
            peak = max(peak, gate.in_use)
            await asyncio.sleep(0.001 * (i % 3))

    await asyncio.gather(*(call(i) for i in range(40)))
    assert peak == 3 and gate.in_use == 0


@pytest.mark.parametrize("gate", [asyncio.Semaphore(1), CallGate(1)], ids=["semaphore", "gate"])
async def test_context_takes_a_call_gate_or_a_semaphore(gate: asyncio.Semaphore | CallGate):
    model = ScriptedModel(latency=0.01)
    ctx = Context(model, gate=gate)
    await asyncio.gather(*(ctx.chat(f"q{i}") for i in range(3)))
    spans = sorted((c.started, c.finished) for c in model.calls)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # one at a time


async def test_a_context_weighs_its_calls_by_the_calls_it_had_answered():
    gate, model = CallGate(1, "progress"), ScriptedModel()
    ahead, fresh = Context(model, gate=gate), Context(model, gate=gate)
    await ahead.chat("one")
    await ahead.chat("two")
    await gate.acquire()  # the cap binds
    calls = [asyncio.create_task(fresh.chat("fresh"))]
    await _settle()
    calls.append(asyncio.create_task(ahead.chat("ahead")))
    await _settle()
    gate.release()
    await asyncio.gather(*calls)
    assert [last_user_message(r) for r in model.requests] == ["one", "two", "ahead", "fresh"]


def _answer(request: ChatRequest) -> str:
    """An answer that depends on the whole prompt, so a prompt built differently shows."""
    text = "".join(str(m.get("content")) for m in request.messages)
    return f"Let me see. The answer is {zlib.crc32(text.encode()) % 7}."


def _run(tmp_path, base_url: str, policy: Policy) -> Runner:
    config = RunConfig(
        method="llm_debate",
        method_config={"agents": 3, "rounds": 3},
        benchmark="arith",
        limit=8,
        model=f"openai:fake@{base_url}",
        concurrency=4,
        scheduler=policy,
        out=str(tmp_path / policy),
    )
    runner = Runner(config)
    asyncio.run(runner.run())
    return runner


@pytest.mark.system
def test_the_policy_keeps_the_cap_and_changes_no_prompt_or_answer(tmp_path):
    outcomes = {}
    # latencies drawn afresh for each call: the calls finish in another order in each run
    with FakeOpenAIServer(_answer, latency=(0.002, 0.03)) as server:
        for policy in POLICIES:
            server.reset_stats()
            runner = _run(tmp_path, server.base_url, policy)
            assert server.peak_in_flight == 4  # the cap binds, and holds
            results = {r.key: (r.status, r.answer) for r in runner.store.results()}
            prompts = {
                t.key: [(c.messages, c.response) for c in t.calls] for t in runner.store.traces()
            }
            outcomes[policy] = results, prompts
    (fcfs, fcfs_prompts), (progress, progress_prompts) = outcomes.values()
    assert len(fcfs) == 8 and {s for s, _ in fcfs.values()} == {"ok"}
    assert fcfs == progress and fcfs_prompts == progress_prompts


def test_scheduler_is_a_run_option_outside_the_runs_identity(tmp_path, capsys):
    out = str(tmp_path / "run")
    common = ["run", "--method", "cot", "--benchmark", "arith", "--model", "scripted:echo",
              "--limit", "2", "--no-cache", "--out", out, "--quiet"]  # fmt: skip
    assert main([*common, "--scheduler", "fcfs"]) == 0
    assert main([*common, "--scheduler", "progress"]) == 0  # resumes the same run
    assert "different run" not in str(capsys.readouterr())
    assert main([*common, "--scheduler", "sjf"]) == 2
    assert "--scheduler: invalid choice: 'sjf'" in capsys.readouterr().err


def test_sweep_files_and_run_config_carry_the_scheduler(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "models: ['scripted:echo']\nmethods: [vanilla]\nbenchmarks: [arith]\nscheduler: fcfs\n"
    )
    assert [c.config.scheduler for c in load_sweep(sweep).cells()] == ["fcfs"]
    sweep.write_text("models: ['scripted:echo']\nmethods: [vanilla]\nbenchmarks: [arith]\n")
    assert load_sweep(sweep).cells()[0].config.scheduler == defaults.SCHEDULER
    sweep.write_text(
        "models: ['scripted:echo']\nmethods: [vanilla]\nbenchmarks: [arith]\nscheduler: lifo\n"
    )
    with pytest.raises(ConfigError, match="scheduler"):
        load_sweep(sweep)
    config = run_config("vanilla", "arith", "scripted:echo", scheduler="fcfs", out=tmp_path / "r")
    assert config.scheduler == "fcfs"
