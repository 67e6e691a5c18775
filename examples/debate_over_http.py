"""Offline demo of the whole stack: LLM Debate through the real OpenAI-compatible HTTP client.

A FakeOpenAIServer on 127.0.0.1 plays the model (a scripted arithmetic solver that slips now
and then), so this runs anywhere with no key and no network. Swap the model spec for a real one
(``openai:gpt-4o-mini`` with OPENAI_API_KEY, or ``openai:<model>@http://localhost:8000/v1``
for a local vLLM/Ollama server) to run the same code on a real LLM.

    python examples/debate_over_http.py
"""

from __future__ import annotations

import asyncio
import itertools
import re
import tempfile
from pathlib import Path

from maslab import Context, ModelPool, Task, get_method
from maslab.core.answers import extract_answer
from maslab.llm import ChatRequest, Endpoint
from maslab.testing import FakeOpenAIServer, last_user_message

TASKS = [
    Task(
        id=f"mul-{a}x{b}",
        question=f"What is {a} * {b}?",
        gold=str(a * b),
        answer_type="number",
        instruction="Finish with 'The answer is N.'",
    )
    for a, b in [(12, 7), (23, 19), (101, 9)]
]


def sloppy_solver() -> object:
    """Answers 'What is a * b?' correctly, except every third first-round answer is off by one."""
    calls = itertools.count()

    def answer(request: ChatRequest) -> str:
        a, b = map(int, re.search(r"What is (\d+) \* (\d+)", last_user_message(request)).groups())
        first_round = "Other agents" not in last_user_message(request)
        slip = first_round and next(calls) % 3 == 0
        return f"{a} times {b} is {a * b + slip}. The answer is {a * b + slip}."

    return answer


async def main() -> None:
    debate = get_method("llm_debate")(agents=3, rounds=2)
    with (
        FakeOpenAIServer(sloppy_solver(), latency=0.05) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        pool = ModelPool(
            endpoints={"demo": [Endpoint(base_url=server.base_url)]},
            cache=Path(tmp) / "cache.sqlite",
        )
        contexts = [Context("openai:demo", models=pool, sample_id=t.id) for t in TASKS]
        runs = (debate.solve(task, ctx) for task, ctx in zip(TASKS, contexts, strict=True))
        solutions = await asyncio.gather(*runs)
        for task, ctx, solution in zip(TASKS, contexts, solutions, strict=True):
            opening = [extract_answer(m.content, "number") for m in ctx.transcript.filter(round=0)]
            usage = ctx.usage
            print(
                f"{task.id:12} gold {task.gold:>4}  round 0 {opening}  "
                f"final votes {solution.metadata['votes']}  "
                f"calls {usage.calls}  tokens {usage.total_tokens}"
            )
        print(f"server: {server.served} completions, peak {server.peak_in_flight} in flight")
        await pool.aclose()


if __name__ == "__main__":
    asyncio.run(main())
