"""Repeats are independent draws, re-runs replay each draw exactly, and prompts never depend on
which concurrent call finished first."""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from pathlib import Path

import orjson
import pytest
from helpers import lines

from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.llm.cache import Cached, ResponseCache
from maslab.llm.local import LocalModel, _Engine
from maslab.llm.types import ChatRequest
from maslab.testing import ScriptedModel
from maslab.testing.fake_server import FakeOpenAIServer


def random_server() -> FakeOpenAIServer:
    """Answers every request with a fresh random number: equal answers can only be replays."""
    draws = random.Random(1)
    return FakeOpenAIServer(lambda request: f"The answer is {draws.randrange(10**12)}.")


def run(server: FakeOpenAIServer, out: Path, cache: Path, method: str, *extra: str) -> int:
    return main(
        [
            "run", "--method", method, "--benchmark", "arith", "--limit", "4", "--repeats", "3",
            "--concurrency", "1", "--model", f"openai:fake@{server.base_url}",
            "--cache", str(cache), "--out", str(out), "--quiet", *extra,
        ]
    )  # fmt: skip


def responses(out: Path) -> dict[tuple[str, int], list[str]]:
    """Every model response of every (task, repeat), in call order."""
    return {
        (t["task_id"], t["repeat"]): [c["response"] for c in t["calls"]]
        for t in lines(out / "traces.jsonl")
    }


@pytest.mark.system
@pytest.mark.parametrize(("method", "calls"), [("cot", 1), ("self_consistency", 5)])
def test_repeats_draw_afresh_reruns_replay_and_new_seeds_draw_again(tmp_path, method, calls):
    cache = tmp_path / "cache.sqlite"
    with random_server() as server:
        assert run(server, tmp_path / "a", cache, method) == 0
        assert server.requests == 4 * 3 * calls
        first = responses(tmp_path / "a")
        per_task = defaultdict(list)
        for (task, _), said in first.items():
            per_task[task] += said
        assert len(per_task) == 4
        assert all(len(set(said)) == 3 * calls for said in per_task.values())

        assert run(server, tmp_path / "b", cache, method) == 0  # new directory, same cache
        assert server.requests == 4 * 3 * calls  # nothing new was asked
        assert responses(tmp_path / "b") == first  # each repeat replays its own draws

        assert run(server, tmp_path / "c", cache, method, "--seed", "7") == 0
        assert server.requests == 2 * 4 * 3 * calls
        fresh = {s for said in responses(tmp_path / "c").values() for s in said}
        assert fresh.isdisjoint(s for said in first.values() for s in said)


def test_epochs_is_an_alias_of_repeats(tmp_path):
    with random_server() as server:
        assert run(server, tmp_path / "a", tmp_path / "c.sqlite", "cot", "--epochs", "2") == 0
    assert orjson.loads((tmp_path / "a" / "manifest.json").read_bytes())["repeats"] == 2


def test_local_model_seeds_its_sampler_by_the_draw(tmp_path):
    """Without a cache, repeats and new seeds still sample afresh on the embedded model."""
    seeds: list[int] = []

    class Llama:
        def create_chat_completion(self, messages: list, **params: object) -> dict:
            seeds.append(params["seed"])
            return {"choices": [{"message": {"content": "x"}}], "usage": {}}

    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    model, engine = LocalModel(str(tmp_path / "m.gguf")), _Engine(Llama())
    base = ChatRequest(({"role": "user", "content": "hi"},), temperature=0.5)
    for seed, repeat, draw in ((0, 0, 0), (0, 0, 0), (0, 1, 0), (7, 0, 0), (0, 0, 1)):
        model._generate(engine, base.with_draw(draw, f"{seed}\x1ft1\x1f{repeat}\x1fagent"), 0.0)
    assert seeds[0] == seeds[1] and len(set(seeds)) == 4


# -- prompts do not depend on completion order ---------------------------------------------------


def opinion(request: ChatRequest) -> str:
    """A sampled reply, fixed by the request and its draw identity (as the local model's seed
    is): agents differ, and any change in a prompt shows downstream."""
    digest = hashlib.sha256(
        orjson.dumps([request.messages, request.scope, request.draw])
    ).hexdigest()
    return f"My reasoning differs. The answer is {int(digest[:6], 16) % 5}."


def jittery(seed: int) -> ScriptedModel:
    rng = random.Random(seed)
    return ScriptedModel(opinion, latency=lambda request: rng.uniform(0.0, 0.02))


TASKS = [Task(id=f"t{i}", question=f"What is {i} + {i}?", gold=str(2 * i)) for i in range(3)]
CONFIGS = {
    "llm_debate": {"agents": 3, "rounds": 3},
    "exchange_of_thought": {"max_rounds": 2},
    "macnet": {"topology": "mesh", "agents": 4},
}


async def solve_all(method: str, model: object) -> list[str]:
    solver = get_method(method)(CONFIGS[method])
    answers = []
    for task in TASKS:
        ctx = Context(model, sample_id=task.id, sampling={"temperature": 0.5})
        answers.append((await solver.run_sample(task, ctx)).answer)
    return answers


def prompts(model: ScriptedModel) -> list[bytes]:
    return sorted(orjson.dumps(r.messages) for r in model.requests)


@pytest.mark.system
@pytest.mark.parametrize("method", sorted(CONFIGS))
async def test_prompts_are_byte_identical_whatever_the_completion_order(tmp_path, method):
    one, two = jittery(1), jittery(2)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = await solve_all(method, Cached(one, cache, "m"))
    assert await solve_all(method, two) == first
    assert prompts(one) == prompts(two)
    again = jittery(3)
    assert await solve_all(method, Cached(again, cache, "m")) == first
    assert again.calls == []  # the re-run replays every call from the cache


async def test_a_pool_shared_by_the_run_is_keyed_by_the_run_not_by_the_sample_that_built_it():
    """GoAgent builds its group pool once, in whichever sample comes first: the same request.

    Self-contained: importing another test module (``tests.test_methods_topologies``) ran a
    second copy of it, read from disk when this test ran, whatever the file held by then."""
    task = Task(id="t1", question="What is 6 * 7?", gold="42", answer_type="number")
    keys = []
    for first in ("t1", "t2"):
        # one reply for every call: the pool and the selection fall back to GoAgent's defaults
        model = ScriptedModel(lambda request: "The answer is 42.")
        ctx = Context(model, sample_id=first, repeat=int(first[1]))
        await get_method("goagent")().solve(task.model_copy(update={"id": first}), ctx)
        assert ctx.ledger.records[0].agent == "pool_builder"
        pool = model.calls[0].request
        assert pool.scope.endswith("goagent pool:math word problems")  # the run's stream
        keys.append(pool.fingerprint("m"))
    assert keys[0] == keys[1]
