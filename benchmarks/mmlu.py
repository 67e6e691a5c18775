"""MMLU: four-option questions over 57 subjects (``cais/mmlu``, config ``all``; test has 14,042).

``answer`` is the index of the correct entry of ``choices``; the gold is its letter after the
per-task shuffle.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import ChoiceBenchmark, HubSource, answer_index, register_benchmark
from maslab.core.task import Task


@register_benchmark("mmlu")
class MMLU(ChoiceBenchmark):
    """Massive Multitask Language Understanding."""

    domain = "knowledge"
    fields = ("question", "choices", "answer")
    hub = HubSource("cais/mmlu", "all", {"test": "test", "validation": "validation", "dev": "dev"})

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        choices = list(record["choices"])
        return self.choice_task(
            self.task_id(record, index, split),
            record["question"],
            choices,
            answer_index(record["answer"], len(choices)),
            metadata={"subject": record["subject"]} if "subject" in record else None,
        )
