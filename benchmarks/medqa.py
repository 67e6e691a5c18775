"""MedQA (USMLE, 4 options): ``GBaker/MedQA-USMLE-4-options`` (test has 1,273).

MASLab builds MedQA from ``bigbio/med_qa``, which is a loading script that current ``datasets``
no longer runs; GBaker's copy holds the same USMLE questions as plain files. ``options`` maps
letters to texts and ``answer_idx`` is the correct letter. Records in the bigbio source layout
(``options`` as a list of ``{"key", "value"}``) load too.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import ChoiceBenchmark, HubSource, register_benchmark
from maslab.core.task import Task


@register_benchmark("medqa")
class MedQA(ChoiceBenchmark):
    """US medical licensing exam questions."""

    domain = "medicine"
    fields = ("question", "options", "answer_idx")
    hub = HubSource("GBaker/MedQA-USMLE-4-options", splits={"test": "test", "train": "train"})

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        options = record["options"]
        if isinstance(options, list):  # bigbio source layout
            options = {item["key"]: item["value"] for item in options}
        letters = sorted(options)
        answer = str(record["answer_idx"]).strip()
        if answer not in options:
            raise ValueError(f"answer_idx {answer!r} is not one of {', '.join(letters)}")
        return self.choice_task(
            self.task_id(record, index, split),
            record["question"],
            [options[letter] for letter in letters],
            letters.index(answer),
            metadata={"meta_info": record["meta_info"]} if "meta_info" in record else None,
        )
