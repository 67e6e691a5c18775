"""MATH-500: 500 competition problems picked from MATH by OpenAI (``HuggingFaceH4/MATH-500``).

Gold is the short ``answer`` string (LaTeX), scored for mathematical equivalence. ``subject`` and
``level`` are kept in the metadata when present.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import HubSource, MathBenchmark, register_benchmark
from maslab.core.task import Task


@register_benchmark("math500")
class MATH500(MathBenchmark):
    """Competition mathematics (algebra to precalculus), levels 1-5."""

    fields = ("problem", "answer")
    id_field = "unique_id"
    hub = HubSource("HuggingFaceH4/MATH-500")

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        metadata = {key: record[key] for key in ("subject", "level") if key in record}
        return self.task(
            self.task_id(record, index, split),
            record["problem"],
            str(record["answer"]).strip(),
            metadata=metadata,
        )
