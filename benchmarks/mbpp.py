"""MBPP: 974 entry-level Python tasks (``google-research-datasets/mbpp``, config ``full``).

The question is the task ``text`` plus its first ``assert`` as an example of the expected
function name and signature. ``tests`` are the ``test_list`` asserts, preceded by
``test_setup_code`` when there is one; the gold is the reference ``code``.
"""

from __future__ import annotations

from typing import Any

from maslab.bench.benchmark import CodeBenchmark, HubSource, register_benchmark
from maslab.core.task import Task


@register_benchmark("mbpp")
class MBPP(CodeBenchmark):
    """Mostly Basic Python Problems, checked by assert statements."""

    fields = ("text", "code", "test_list")
    id_field = "task_id"
    hub = HubSource(
        "google-research-datasets/mbpp",
        "full",
        {"test": "test", "validation": "validation", "train": "train", "prompt": "prompt"},
    )

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        asserts = tuple(str(test).strip() for test in record["test_list"])
        if not asserts:
            raise ValueError("test_list is empty")
        setup = str(record.get("test_setup_code") or "").strip()
        question = (
            f"{str(record['text']).strip()}\n\nYour code should pass tests like this one:"
            f"\n\n```python\n{asserts[0]}\n```"
        )
        return self.task(
            self.task_id(record, index, split),
            question,
            str(record["code"]).replace("\r\n", "\n"),
            tests=(setup, *asserts) if setup else asserts,
        )
