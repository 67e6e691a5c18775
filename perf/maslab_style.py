"""The sweep driven MASLab's way: one thread per sample, a sample's calls one after another,
a new ``openai.OpenAI`` client per call.

    python perf/maslab_style.py URL TASKS_JSON llm_debate|self_consistency [--threads 64]

TASKS_JSON holds the questions (a JSON list of strings). LLM Debate is 3 agents x 2 rounds: in
round 2 every agent sees the others' round-1 answers; self-consistency is k = 5 samples of one
prompt. Answers are voted on in the thread, as MASLab does. Prints one JSON object: the wall
time from the first submitted sample to the last finished one, and the calls made.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai

AGENTS, ROUNDS, K = 3, 2, 5
TEMPERATURE, MAX_TOKENS = 0.5, 2048


def call(url: str, messages: list[dict[str, str]]) -> str:
    """One chat completion through a client of its own, as MASLab's ``call_llm`` makes one."""
    client = openai.OpenAI(base_url=url, api_key="x")
    response = client.chat.completions.create(
        model="fake", messages=messages, temperature=TEMPERATURE, max_tokens=MAX_TOKENS
    )
    return response.choices[0].message.content or ""


def answer_of(text: str) -> str:
    return text.rsplit("answer is", 1)[-1].strip(" .") if "answer is" in text else text


def debate(url: str, question: str) -> str:
    """Every agent's turn in sequence, round after round; a majority vote at the end."""
    contexts: list[list[dict[str, str]]] = [[] for _ in range(AGENTS)]
    replies = [""] * AGENTS
    for r in range(ROUNDS):
        previous = list(replies)
        for i, context in enumerate(contexts):
            if r == 0:
                prompt = f"{question}\nSolve it step by step and end with 'The answer is N'."
            else:
                others = "\n\n".join(
                    f"One agent's solution: {text}" for j, text in enumerate(previous) if j != i
                )
                prompt = (
                    f"These are the solutions of the other agents:\n\n{others}\n\nUsing them as "
                    f"additional advice, solve again: {question}\nEnd with 'The answer is N'."
                )
            context.append({"role": "user", "content": prompt})
            replies[i] = call(url, context)
            context.append({"role": "assistant", "content": replies[i]})
    return Counter(map(answer_of, replies)).most_common(1)[0][0]


def self_consistency(url: str, question: str) -> str:
    """K samples of one chain-of-thought prompt in sequence; a majority vote."""
    prompt = f"{question}\nLet's think step by step, and end with 'The answer is N'."
    replies = [call(url, [{"role": "user", "content": prompt}]) for _ in range(K)]
    return Counter(map(answer_of, replies)).most_common(1)[0][0]


METHODS = {"llm_debate": (debate, AGENTS * ROUNDS), "self_consistency": (self_consistency, K)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("tasks_json")
    parser.add_argument("method", choices=sorted(METHODS))
    parser.add_argument("--threads", type=int, default=64)
    args = parser.parse_args()
    with open(args.tasks_json) as f:
        questions: list[str] = json.load(f)
    solve, calls = METHODS[args.method]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        answers = list(pool.map(lambda q: solve(args.url, q), questions))
    wall = time.perf_counter() - started
    result: dict[str, Any] = {"wall_s": wall, "calls": calls * len(answers)}
    print(json.dumps({**result, "samples": len(answers)}))


if __name__ == "__main__":
    main()
