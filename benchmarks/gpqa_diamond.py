"""GPQA Diamond: 198 graduate-level science questions (``Idavidrein/gpqa``, ``gpqa_diamond``).

The dataset stores one correct and three incorrect answers. They become four options in an order
drawn per task, so the gold letter is spread over A-D (MASLab's builder always put the correct
answer at (A)). Texts are whitespace-stripped. The set is gated on the Hub: accept its terms first.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import ChoiceBenchmark, HubSource, register_benchmark
from maslab.core.task import Task

_ANSWERS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


@register_benchmark("gpqa_diamond")
class GPQADiamond(ChoiceBenchmark):
    """Google-proof graduate-level questions in biology, physics and chemistry."""

    domain = "science"
    fields = ("Question", *_ANSWERS)
    id_field = "Record ID"
    hub = HubSource("Idavidrein/gpqa", "gpqa_diamond", {"test": "train"})

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        metadata: dict[str, Any] = {
            key: record[key] for key in ("High-level domain", "Subdomain") if key in record
        }
        return self.choice_task(
            self.task_id(record, index, split),
            record["Question"],
            [record[key] for key in _ANSWERS],
            0,
            metadata=metadata,
        )
