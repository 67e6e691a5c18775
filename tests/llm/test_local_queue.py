"""The embedded model's one thread, with a stand-in for llama.cpp: a call's wait for it is
counted as queued, apart from its computing."""

from __future__ import annotations

import asyncio
import time

from maslab.llm import local
from maslab.llm.local import LocalModel
from maslab.llm.types import ChatRequest


class SlowLlama:
    """Answers after 0.1 s of 'computing' (on the engine's thread, as llama.cpp does)."""

    def create_chat_completion(self, messages: list, **params: object) -> dict:
        time.sleep(0.1)
        return {"choices": [{"message": {"content": "x"}}], "usage": {}}


async def test_calls_waiting_for_the_models_thread_are_counted_as_queued(tmp_path, monkeypatch):
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    model = LocalModel(str(tmp_path / "m.gguf"))
    monkeypatch.setitem(local._ENGINES, (model.path, model.n_ctx), local._Engine(SlowLlama()))
    requests = [ChatRequest(({"role": "user", "content": f"q{i}"},)) for i in range(3)]
    replies = sorted(await asyncio.gather(*map(model.complete, requests)), key=lambda c: c.queued_s)
    computing = [c.latency_s - c.queued_s for c in replies]
    assert all(0.09 < seconds < 0.5 for seconds in computing)
    # one after another: each call waited for the computing of every call before it
    assert replies[0].queued_s < 0.05
    assert replies[1].queued_s >= 0.09 and replies[2].queued_s >= replies[1].queued_s + 0.09
