"""Arith: generated multi-step integer word problems, for offline smoke tests and sanity checks.

No data file: each problem is drawn from its own seeded generator (``seed``, split, difficulty and
index), so a split is identical on every machine and a larger ``size`` only appends problems.
Every step keeps the running count a positive integer (subtraction stays above zero, division is
exact), and ``metadata["steps"]`` records the arithmetic so the answer can be recomputed.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field, StrictInt

from maslab.bench.benchmark import NumberBenchmark, number_gold, register_benchmark
from maslab.core.context import derive_seed
from maslab.core.task import Task
from maslab.plugin_config import PluginConfig

_NAMES = ("Maya", "Omar", "Lena", "Kofi", "Priya", "Tomás", "Yuki", "Sven", "Amara", "Diego")
_ITEMS = ("marbles", "stickers", "apples", "coins", "stamps", "seashells", "pencils", "beads")
_OPENINGS = (
    "{name} has {n} {item}.",
    "{name} starts the day with {n} {item}.",
    "There are {n} {item} in {name}'s box.",
    "{name} counts {n} {item} on the table.",
)
_STEPS = {
    "+": (
        "Then {name} gets {k} more.",
        "A friend gives {name} another {k} {item}.",
        "{name} finds {k} more {item}.",
        "Later, {k} more {item} are added.",
    ),
    "-": (
        "{name} gives {k} of them away.",
        "Then {k} {item} are lost.",
        "{name} uses up {k} {item}.",
        "After that, {k} {item} are sold.",
    ),
    "*": (
        "Then the number of {item} is multiplied by {k}.",
        "{name} ends up with {k} times as many {item} as before.",
        "The collection then grows to {k} times its size.",
    ),
    "/": (
        "{name} splits the {item} into {k} equal groups and keeps one group.",
        "{name} keeps exactly 1/{k} of the {item} and gives the rest away.",
        "The {item} are shared equally among {k} people, {name} included; {name} keeps one share.",
    ),
}
_QUESTIONS = (
    "How many {item} does {name} have now?",
    "How many {item} are left at the end?",
    "What is the final number of {item}?",
)
_MAX_VALUE = 5000


def _apply(value: int, op: str, k: int) -> int:
    if op == "+":
        return value + k
    if op == "-":
        return value - k
    if op == "*":
        return value * k
    return value // k


def _step(rng: random.Random, value: int) -> tuple[str, int]:
    """One operation that keeps the count a positive integer no larger than ``_MAX_VALUE``."""
    options: dict[str, list[int]] = {"+": list(range(2, 41))}
    if value > 3:
        options["-"] = list(range(1, min(value, 60)))
    if factors := [k for k in range(2, 6) if value * k <= _MAX_VALUE]:
        options["*"] = factors
    if divisors := [k for k in range(2, 11) if value % k == 0]:
        options["/"] = divisors
    op = rng.choice(sorted(options))
    return op, rng.choice(options[op])


def generate(index: int, split: str, difficulty: int, seed: int) -> dict[str, Any]:
    """Problem ``index`` of ``split`` as a raw record (question, answer, start, steps)."""
    rng = random.Random(derive_seed("arith", seed, split, difficulty, index))
    words = {"name": rng.choice(_NAMES), "item": rng.choice(_ITEMS)}
    start = value = rng.randint(5, 60)
    steps: list[list[Any]] = []
    sentences = [rng.choice(_OPENINGS).format(n=start, **words)]
    for _ in range(difficulty):
        op, k = _step(rng, value)
        value = _apply(value, op, k)
        steps.append([op, k])
        sentences.append(rng.choice(_STEPS[op]).format(k=k, **words))
    sentences.append(rng.choice(_QUESTIONS).format(**words))
    return {
        "id": f"arith-{split}-{index:04d}",
        "question": " ".join(sentences),
        "answer": str(value),
        "start": start,
        "steps": steps,
    }


@register_benchmark("arith")
class Arith(NumberBenchmark):
    """Seeded multi-step integer arithmetic word problems (generated, no data needed)."""

    domain = "math"
    splits = ("test", "dev")
    fields = ("question", "answer")
    id_field = "id"

    class Config(PluginConfig):
        difficulty: StrictInt = Field(3, ge=1, le=20, description="operations per problem")
        size: StrictInt = Field(200, ge=1, le=100_000, description="problems per split")
        seed: StrictInt = Field(
            0, ge=0, le=2**63 - 1, description="draws the problems (not the run seed)"
        )

    config: Config

    def packaged_records(self, split: str) -> list[dict[str, Any]] | None:
        if split not in self.splits:
            return None
        c = self.config
        return [generate(i, split, c.difficulty, c.seed) for i in range(c.size)]

    def packaged_source(self, split: str) -> str:
        options = ", ".join(f"{key} {value}" for key, value in self.options.items())
        return f"generated arith {split} split ({options})"

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        metadata = {key: record[key] for key in ("start", "steps") if key in record}
        return self.task(
            self.task_id(record, index, split),
            record["question"],
            number_gold(record["answer"]),
            metadata=metadata,
        )
