"""The per-call hot path stays cheap without changing what it does: the retry layer's first
attempt, the ledger's dicts, the settling of a sample, the draw, batched cache writes, and the
numeric evaluator's parsing (perf/overhead.py and perf/throughput.py measure them)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import time
from dataclasses import asdict, replace
from types import SimpleNamespace
from typing import Any

import pytest

from maslab.core.context import _RESUME_STEPS, Context
from maslab.core.task import Task
from maslab.errors import RequestRejected, ServerError
from maslab.evaluators import numeric
from maslab.llm import cache as cache_module
from maslab.llm import retry as retry_module
from maslab.llm.cache import Cached, ResponseCache
from maslab.llm.ledger import CallRecord, UsageLedger
from maslab.llm.retry import Retrying, RetryPolicy
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import Completion, FunctionCall, TokenLogprob, Usage, make_request

NO_WAIT = RetryPolicy(attempts=3, initial_wait=0, max_wait=0)


def failing(*errors: Exception) -> ScriptedModel:
    """A model that raises ``errors`` in turn, then answers "ok"."""
    pending = list(errors)

    def answer(request: Any) -> str:
        if pending:
            raise pending.pop(0)
        return "ok"

    return ScriptedModel(answer)


# --- retry ----------------------------------------------------------------------------------


async def test_a_call_that_succeeds_at_once_builds_no_retry_machinery(monkeypatch):
    def refuse(**options: Any) -> None:
        raise AssertionError("tenacity was set up for a call that needed no retry")

    monkeypatch.setattr(retry_module, "AsyncRetrying", refuse)
    completion = await Retrying(ScriptedModel(["4"]), NO_WAIT).chat("2+2?")
    assert completion.text == "4"


async def test_retries_after_a_first_failure_wait_count_and_stop_as_before():
    model = failing(ServerError("busy", status=503), ServerError("busy", status=503))
    assert (await Retrying(model, NO_WAIT).chat("q")).text == "ok"
    assert len(model.calls) == 1  # the two failures raised before a call was recorded

    errors = [ServerError(f"down {i}", status=500) for i in range(3)]
    with pytest.raises(ServerError, match="down 2") as caught:
        await Retrying(failing(*errors), NO_WAIT).chat("q")
    assert caught.value.attempts == 3


async def test_a_failure_that_is_not_retryable_is_raised_after_one_attempt():
    with pytest.raises(RequestRejected) as caught:
        await Retrying(failing(RequestRejected("bad", status=400)), NO_WAIT).chat("q")
    assert caught.value.attempts == 1
    with pytest.raises(ServerError) as caught:
        policy = RetryPolicy(attempts=1, initial_wait=0)
        await Retrying(failing(ServerError("down", status=500)), policy).chat("q")
    assert caught.value.attempts == 1


# --- ledger ---------------------------------------------------------------------------------


def test_call_record_dict_is_asdicts_without_copying_the_messages():
    request = make_request([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}])
    record = CallRecord(
        "t1", "a", 0, "m", messages=request.messages, tool_calls=(FunctionCall("c1", "f", "{}"),)
    )
    out = record.to_dict()
    assert out == asdict(record)
    assert out["messages"][0] is record.messages[0]


def test_usage_totals_dict_is_asdict():
    ledger = UsageLedger([CallRecord("t1", "a", 0, "m", prompt_tokens=3, cached=True)])
    totals = ledger.totals()
    assert totals.to_dict() == asdict(totals)


class Uncopyable:
    def __deepcopy__(self, memo: Any) -> Any:
        raise AssertionError("the raw payload was copied")


def test_a_completion_record_leaves_the_raw_payload_alone():
    usage, calls = Usage(3, 4, True), (FunctionCall("c1", "f", "{}"),)
    logprobs = (TokenLogprob("4", -0.1, (("5", -2.0),)),)
    full = Completion("4", usage, "m", 0.5, tool_calls=calls, logprobs=logprobs)
    expected = asdict(full)
    del expected["raw"]
    assert replace(full, raw={"payload": Uncopyable()}).to_record() == expected
    assert Completion.from_record(full.to_record()) == full


# --- context --------------------------------------------------------------------------------


async def loop_turns_during(work: Any) -> int:
    """How many event-loop turns pass while ``work`` is awaited."""
    turns = 0

    async def count() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.ensure_future(count())
    await asyncio.sleep(0)
    before = turns
    await work
    during = turns - before
    counter.cancel()
    return during


async def test_a_sample_whose_calls_were_all_its_own_settles_at_once():
    ctx = Context(ScriptedModel(["a", "b"]))
    await ctx.chat("1")
    await ctx.chat("2")
    assert await loop_turns_during(ctx.settle()) < _RESUME_STEPS


async def test_a_sample_with_concurrent_callers_still_lets_them_resume():
    ctx = Context(ScriptedModel(lambda request: "x"))
    await asyncio.gather(ctx.chat("1", agent="a"), ctx.chat("2", agent="b"))
    assert await loop_turns_during(ctx.settle()) >= _RESUME_STEPS


async def test_only_a_repeated_request_gets_a_new_draw():
    model = ScriptedModel(lambda request: "x")
    ctx = Context(model, sample_id="t1", seed=7)
    for prompt in ("same", "same", "other"):
        await ctx.chat(prompt, agent="a")
    scope = "7\x1ft1\x1f0\x1fa"
    assert [(r.draw, r.scope) for r in model.requests] == [(0, scope), (1, scope), (0, scope)]
    assert make_request("q", scope="s").scope == "s"


# --- response cache -------------------------------------------------------------------------


def completion(i: int) -> Completion:
    return Completion(f"reply {i}", model="m")


def test_cache_writes_wait_in_memory_until_a_batch_is_full(tmp_path):
    path = tmp_path / "cache.sqlite"
    writer, reader = ResponseCache(path), ResponseCache(path)
    for i in range(cache_module.BATCH_SIZE - 1):
        writer.put(f"k{i}", completion(i))
    assert writer.get("k0") is not None and writer.get("k0").cached  # found while pending
    assert reader.get("k0") is None  # not written yet
    writer.put("last", completion(-1))  # the batch is full: one transaction writes it all
    assert reader.get("k0").text == "reply 0" and reader.get("last").text == "reply -1"


def test_a_pending_cache_entry_is_written_once_it_is_old_enough(tmp_path, monkeypatch):
    path = tmp_path / "cache.sqlite"
    clock = itertools.count(0.0, 0.6)
    # the cache module's clock only: time.monotonic itself is every thread's (asyncio's too)
    clock_only = SimpleNamespace(monotonic=lambda: next(clock), time=time.time)
    monkeypatch.setattr(cache_module, "time", clock_only)
    writer, reader = ResponseCache(path), ResponseCache(path)
    writer.put("a", completion(1))  # at 0.0
    assert reader.get("a") is None
    writer.put("b", completion(2))  # at 0.6
    assert reader.get("a") is None
    writer.put("c", completion(3))  # at 1.2: the oldest has waited a second
    assert [reader.get(k).text for k in "abc"] == ["reply 1", "reply 2", "reply 3"]


async def test_closing_the_model_flushes_its_cache(tmp_path):
    path = tmp_path / "cache.sqlite"
    model = Cached(ScriptedModel(["fresh"]), ResponseCache(path), namespace="m")
    await model.chat("q")
    reader = ResponseCache(path)
    assert reader.stats()["entries"] == 0
    await model.aclose()
    assert reader.stats()["entries"] == 1


def test_a_cache_dropped_without_closing_still_writes_its_entries(tmp_path):
    path = tmp_path / "cache.sqlite"
    writer = ResponseCache(path)
    writer.put("k", completion(1))
    del writer
    gc.collect()
    assert ResponseCache(path).get("k").text == "reply 1"


def test_stats_and_clear_count_pending_entries(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    cache.put("k", completion(1))
    assert cache.stats()["entries"] == 1
    cache.put("j", completion(2))
    assert cache.clear() == 2 and cache.get("j") is None
    cache.close()


# --- numeric evaluator ----------------------------------------------------------------------


async def test_numeric_scoring_parses_the_gold_and_the_answer_once(monkeypatch):
    parsed: list[str] = []
    parse = numeric.parse_number
    monkeypatch.setattr(numeric, "parse_number", lambda text: parsed.append(text) or parse(text))
    task = Task(id="q1", question="6 * 7?", gold="42", answer_type="number")
    score = await numeric.NumericEvaluator().score(task, "So the answer is 42.0.")
    assert score.correct and sorted(parsed) == ["42", "42.0"]
    near = await numeric.NumericEvaluator(rel_tol=0.01).score(task, "The answer is 42.3")
    assert near.correct
