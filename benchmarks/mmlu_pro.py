"""MMLU-Pro: harder, up-to-ten-option MMLU successor (``TIGER-Lab/MMLU-Pro``; test has 12,032).

Padding options ``"N/A"`` are dropped, as the authors' evaluation script does. The correct option
is ``answer_index`` (else the ``answer`` letter); the gold is its letter after the shuffle.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import ChoiceBenchmark, HubSource, answer_index, register_benchmark
from maslab.core.task import Task


@register_benchmark("mmlu_pro")
class MMLUPro(ChoiceBenchmark):
    """Ten-option multi-discipline questions (14 categories)."""

    domain = "knowledge"
    fields = ("question", "options", "answer")
    id_field = "question_id"
    hub = HubSource("TIGER-Lab/MMLU-Pro", splits={"test": "test", "validation": "validation"})

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        options = list(record["options"])
        given = record.get("answer_index")
        correct = answer_index(record["answer"] if given is None else given, len(options))
        kept = [i for i, text in enumerate(options) if str(text).strip() != "N/A" or i == correct]
        return self.choice_task(
            self.task_id(record, index, split),
            record["question"],
            [options[i] for i in kept],
            kept.index(correct),
            metadata={key: record[key] for key in ("category", "src") if key in record},
        )
