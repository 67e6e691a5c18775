"""GSM8K: grade-school maths word problems (``openai/gsm8k``, config ``main``; test has 1,319).

The dataset's ``answer`` is a worked solution ending in ``#### <number>``; the gold is that number
with its thousands commas removed, never the whole solution.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import HubSource, NumberBenchmark, number_gold, register_benchmark
from maslab.core.task import Task


@register_benchmark("gsm8k")
class GSM8K(NumberBenchmark):
    """Grade-school maths word problems with integer answers."""

    domain = "math"
    fields = ("question", "answer")
    hub = HubSource("openai/gsm8k", "main", {"test": "test", "train": "train"})

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        solution = str(record["answer"])
        if "####" not in solution:
            raise ValueError("answer has no '#### <number>' line")
        gold = number_gold(solution.rsplit("####", 1)[1])
        return self.task(self.task_id(record, index, split), record["question"], gold)
