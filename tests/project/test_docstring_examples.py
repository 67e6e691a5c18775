"""The how-to examples in the docstrings of Method, Evaluator and Benchmark run as written, and
the docs' "Write a method" page shows the Method example, so none of them can drift."""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

import pytest

from maslab.bench.benchmark import _BENCHMARKS, Benchmark
from maslab.bench.evaluation import _EVALUATORS, Evaluator
from maslab.core.method import _METHODS, Method

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "write-a-method.md"


def example(cls: type) -> str:
    """The indented block after ``Example::`` in the class docstring."""
    doc = inspect.getdoc(cls) or ""
    _, marker, after = doc.partition("Example::\n")
    assert marker, f"{cls.__name__}'s docstring has no Example:: block"
    lines = []
    for line in after.splitlines():
        if line.strip() and not line.startswith(" "):
            break
        lines.append(line)
    return textwrap.dedent("\n".join(lines)).strip() + "\n"


@pytest.fixture(autouse=True)
def own_registries(monkeypatch):
    """The examples register their classes in copies of the registries, never the real ones."""
    for registry in (_METHODS, _EVALUATORS, _BENCHMARKS):
        registry.names()  # discover the bundled classes first, so the copies hold them
        monkeypatch.setattr(registry, "_classes", dict(registry._classes))


@pytest.mark.parametrize("cls", [Method, Evaluator, Benchmark], ids=lambda cls: cls.__name__)
def test_docstring_example_runs(cls, tmp_path, monkeypatch):
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path))  # no cached data file stands in
    code = example(cls)
    exec(compile(code, f"<{cls.__name__} docstring example>", "exec"), {"__name__": "example"})


def test_docs_writing_a_method_is_the_method_example():
    section = PAGE.read_text(encoding="utf-8").split("## The Method API", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block is not None and block.group(1) == example(Method)
