"""MedMCQA: Indian medical entrance exam questions (``openlifescienceai/medmcqa``).

The Hub's test split has no answers, so our ``test`` is its validation split (4,183 questions),
as in MASLab. Options are ``opa``-``opd``, ``cop`` is the correct index 0-3; questions with
``choice_type == "multi"`` (several correct options) are left out.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import ChoiceBenchmark, HubSource, answer_index, register_benchmark
from maslab.core.task import Task

_OPTIONS = ("opa", "opb", "opc", "opd")


@register_benchmark("medmcqa")
class MedMCQA(ChoiceBenchmark):
    """Medical multiple choice over 21 subjects."""

    domain = "medicine"
    fields = ("question", *_OPTIONS, "cop", "choice_type")
    id_field = "id"
    hub = HubSource("openlifescienceai/medmcqa", splits={"test": "validation", "train": "train"})

    def keep(self, record: dict[str, Any]) -> bool:
        return record["choice_type"] != "multi"

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        metadata: dict[str, Any] = {
            key: record[key] for key in ("subject_name", "topic_name") if key in record
        }
        return self.choice_task(
            self.task_id(record, index, split),
            record["question"],
            [record[key] for key in _OPTIONS],
            answer_index(record["cop"], len(_OPTIONS)),
            metadata=metadata,
        )
