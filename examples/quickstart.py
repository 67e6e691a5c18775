"""Quickstart: import a method class, run it on three tasks, print answers and token usage.

    python examples/quickstart.py                                   # offline, embedded model
    MASLAB_MODEL=openai:gpt-4o-mini python examples/quickstart.py   # a real model

The default model is SmolLM2-135M, a tiny demo model that runs anywhere with no key and no
network: expect real text and near-zero accuracy.
"""

from __future__ import annotations

import os

from maslab import get_benchmark
from maslab.methods.llm_debate import LLMDebate

MODEL = os.environ.get("MASLAB_MODEL", "local:smollm2-135m")


def main() -> None:
    tasks = get_benchmark("arith")(difficulty=2).load(limit=3)
    debate = LLMDebate(agents=3, rounds=2)
    for task in tasks:
        outcome = debate.run(task, MODEL, sampling={"temperature": 0.5, "max_tokens": 128})
        usage = outcome.usage
        print(f"{task.id}: gold {task.gold}, votes {outcome.solution.metadata['votes']}")
        print(f"  {usage.calls} calls, {usage.prompt_tokens} prompt + "
              f"{usage.completion_tokens} completion tokens")  # fmt: skip
        print(f"  debater_1 said: {outcome.context.transcript.messages[-3].content[:100]!r}")


if __name__ == "__main__":
    main()
