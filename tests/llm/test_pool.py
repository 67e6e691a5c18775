"""Per-endpoint limiter: rate limit and Retry-After pauses."""

from __future__ import annotations

import asyncio
import time

import pytest

from maslab.errors import RateLimited
from maslab.llm.balancing import Limited
from maslab.llm.scripted import ScriptedModel


@pytest.mark.system
async def test_rpm_limits_the_request_rate():
    limited = Limited(ScriptedModel(), max_concurrency=10, rpm=2)
    limited._throttler.period = 0.4  # 2 requests per 0.4 s instead of per minute
    started = time.monotonic()
    await asyncio.gather(*(limited.chat(f"q{i}") for i in range(6)))
    assert time.monotonic() - started >= 0.8  # 6 requests = 3 windows


async def test_retry_after_pauses_every_request_to_the_endpoint():
    answers = iter([RateLimited("slow down", retry_after=0.3)])

    def respond(request):
        error = next(answers, None)
        if error:
            raise error
        return "ok"

    limited = Limited(ScriptedModel(respond), max_concurrency=4)
    with pytest.raises(RateLimited):
        await limited.chat("first")
    started = time.monotonic()
    assert (await limited.chat("second")).text == "ok"
    assert time.monotonic() - started >= 0.25
