"""AQuA-RAT: algebra word problems with five options (``deepmind/aqua_rat``, config ``raw``).

Options come as ``"A)21"`` (a few as ``"A)A)59"``); the choices are the texts without the
letter prefix, shuffled per task, and the gold is the letter that the ``correct`` option ends up
under (never the rationale).
"""

from __future__ import annotations

import re
from typing import Any

from maslab.bench.benchmark import ChoiceBenchmark, HubSource, answer_index, register_benchmark
from maslab.core.task import Task

_PREFIX = re.compile(r"^\s*\(?([A-Ea-e])\s*\)\s*(?:\(?\1\s*\)\s*)*")  # "A)", also "A)A)"


@register_benchmark("aqua_rat")
class AquaRat(ChoiceBenchmark):
    """Algebraic word problems, five options each."""

    domain = "math"
    fields = ("question", "options", "correct")
    hub = HubSource(
        "deepmind/aqua_rat", "raw", {"test": "test", "validation": "validation", "train": "train"}
    )

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        options = [_PREFIX.sub("", str(option), count=1) for option in record["options"]]
        return self.choice_task(
            self.task_id(record, index, split),
            record["question"],
            options,
            answer_index(record["correct"], len(options)),
        )
