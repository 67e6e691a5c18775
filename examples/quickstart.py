"""Quickstart: solve one question with a method, then run it on a benchmark as `maslab run` does.

    python examples/quickstart.py                                   # offline, embedded model
    MASLAB_MODEL=openai:gpt-4o-mini python examples/quickstart.py   # a real model

The default model is SmolLM2-135M, a tiny demo model that runs anywhere with no key and no
network: expect real text and near-zero accuracy.
"""

from __future__ import annotations

import os

import maslab
from maslab.methods.llm_debate import LLMDebate

MODEL = os.environ.get("MASLAB_MODEL", "local:smollm2-135m")


def main() -> None:
    debate = LLMDebate(agents=3, rounds=2)

    # one question: the solution, the transcript and the usage; a number question, so the
    # debaters' final numbers are voted on (a plain string is a free-text question, whose
    # vote would compare whole sentences)
    question = maslab.Task(id="q", question="What is 17 * 23?", answer_type="number")
    outcome = debate.run(question, MODEL, sampling={"max_tokens": 128})
    print(f"one question: votes {outcome.solution.metadata['votes']}, {outcome.usage.calls} calls")
    print(f"  debater_1 said: {outcome.context.transcript.messages[-3].content[:100]!r}")

    # a benchmark run, as `maslab run --method llm_debate --benchmark arith --limit 3 ...` runs
    # it: checked first, resumable, written to runs/arith/... with its report.html
    run = maslab.evaluate(
        debate, "arith", MODEL, limit=3, bench_options={"difficulty": 2}, max_tokens=128
    )
    print(run)
    for row in run.to_records():
        print(f"  {row['task_id']}: gold {row['gold']}, answered {row['extracted']}, "
              f"{row['calls']} calls, {row['tokens']} tokens")  # fmt: skip
    print(f"report: {run.report}")


if __name__ == "__main__":
    main()
