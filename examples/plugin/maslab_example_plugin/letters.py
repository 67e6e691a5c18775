"""Counting letters: a generated benchmark, a forgiving evaluator and a tool that counts."""

from __future__ import annotations

import random
import re
from typing import Any

from pydantic import Field, StrictInt

from maslab import ConfigError, Context, Score, Task
from maslab.bench.benchmark import NumberBenchmark
from maslab.bench.evaluation import Evaluator, gold_of
from maslab.kit.tools import Tool
from maslab.plugin_config import PluginConfig

WORDS = ("strawberry", "banana", "mississippi", "bookkeeper", "committee", "parallel",
         "assessment", "referee", "balloon", "coffee", "letter", "occurrence")  # fmt: skip
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class LetterCount(NumberBenchmark):
    """How often a letter occurs in a word; generated from a seed, so it works offline."""

    domain = "reasoning"
    evaluator = "last_number"  # the plugin's own evaluator, found by name like any other
    fields = ("question", "answer")
    id_field = "id"

    class Config(PluginConfig):  # --bench-option size=10; unknown options are one-line errors
        size: StrictInt = Field(50, ge=1, description="questions per split")

    config: Config

    def packaged_records(self, split: str) -> list[dict[str, Any]] | None:
        if split not in self.splits:
            return None
        records = []
        for index in range(self.config.size):
            rng = random.Random(f"letter_count/{split}/{index}")  # the same on every machine
            word = rng.choice(WORDS)
            letter = rng.choice(sorted(set(word)))
            question = f"How many times does the letter '{letter}' occur in the word '{word}'?"
            answer = word.count(letter)
            records.append({"id": f"{split}-{index}", "question": question, "answer": answer})
        return records

    def packaged_source(self, split: str) -> str:
        return f"generated letter_count {split} split (size {self.config.size})"


class LastNumber(Evaluator):
    """The last number in the answer equals the gold; no answer format needed."""

    def check_gold(self, task: Task) -> None:  # runs on every task before anything is spent
        if not NUMBER.fullmatch(gold_of(task)):
            raise ConfigError(f"task {task.id}: gold {task.gold!r} is not a number")

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        gold = gold_of(task)
        numbers = NUMBER.findall(answer.replace(",", ""))
        if not numbers:
            return Score.unparsable()
        return Score.graded(float(numbers[-1]) == float(gold), numbers[-1], gold)


def count_letter() -> Tool:
    """A fresh ``count_letter`` tool (a method config lists it by name: tools=[count_letter])."""

    async def run(word: str, letter: str) -> str:
        return str(word.lower().count(letter.lower()))

    return Tool(
        name="count_letter",
        description="How many times a letter occurs in a word.",
        parameters={"word": {"type": "string"}, "letter": {"type": "string"}},
        run=run,
    )
