"""Arith: generated multi-step integer word problems, for offline smoke tests and sanity checks.

No data file: each problem is drawn from its own seeded generator (``seed``, split, difficulty and
index), so a split is identical on every machine and a larger ``size`` only appends problems.
Every step keeps the running count a positive integer (subtraction stays above zero, division is
exact), and ``metadata["steps"]`` records the arithmetic so the answer can be recomputed.
"""

from __future__ import annotations

import random
from typing import Any

from maslab.bench.benchmark import NumberBenchmark, number_gold, register_benchmark
from maslab.core.context import derive_seed
from maslab.core.task import Task
from maslab.errors import ConfigError

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


def _int_option(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f"arith: {name} must be an integer from {low} to {high}, got {value!r}")
    return value


@register_benchmark("arith")
class Arith(NumberBenchmark):
    """Seeded multi-step integer arithmetic word problems (generated, no data needed)."""

    domain = "math"
    splits = ("test", "dev")
    fields = ("question", "answer")
    id_field = "id"

    def __init__(self, difficulty: int = 3, size: int = 200, seed: int = 0, **options: Any) -> None:
        super().__init__(**options)
        self.difficulty = _int_option("difficulty", difficulty, 1, 20)
        self.size = _int_option("size", size, 1, 100_000)
        self.seed = _int_option("seed", seed, 0, 2**63 - 1)
        self.options = {"difficulty": self.difficulty, "size": self.size, "seed": self.seed}

    def packaged_records(self, split: str) -> list[dict[str, Any]] | None:
        if split not in self.splits:
            return None
        return [generate(i, split, self.difficulty, self.seed) for i in range(self.size)]

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
