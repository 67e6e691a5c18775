"""SciBench: college physics, chemistry and maths problems (``xw27/scibench``, train split).

The gold is ``answer_number`` alone; ``unit`` goes to the metadata and into the instruction, so a
method knows which unit (and power of ten) the number is expected in. SciBench's ``problemid`` is
only unique within a textbook, so tasks get positional ids.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import (
    NUMBER_INSTRUCTION,
    HubSource,
    NumberBenchmark,
    number_gold,
    register_benchmark,
)
from maslab.core.task import Task


@register_benchmark("scibench")
class SciBench(NumberBenchmark):
    """College-level scientific problems with numeric answers in given units."""

    domain = "science"
    fields = ("problem_text", "answer_number", "unit")
    hub = HubSource("xw27/scibench", splits={"test": "train"})

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        unit = str(record["unit"]).strip()
        instruction = NUMBER_INSTRUCTION
        if unit:
            instruction += f" Express it in {unit} and leave the unit out of the box."
        return self.task(
            self.task_id(record, index, split),
            record["problem_text"],
            number_gold(record["answer_number"]),
            instruction=instruction,
            metadata={"unit": unit, "source": record.get("source", "")},
        )
