"""The README and the docs' front page state how many methods, benchmarks and evaluators maslab
bundles: the numbers are the registries' (a new plug-in that is not counted fails here); the
README's table of methods names each bundled method once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from maslab.bench.benchmark import get_benchmark, list_benchmarks
from maslab.bench.evaluation import get_evaluator, list_evaluators
from maslab.core.method import get_method, list_methods
from maslab.plugins import origin

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = {
    "methods": sum(origin(get_method(n)) == "bundled" for n in list_methods()),
    "benchmarks": sum(origin(get_benchmark(n)) == "bundled" for n in list_benchmarks()),
    "evaluators": sum(origin(get_evaluator(n)) == "bundled" for n in list_evaluators()),
}


@pytest.mark.parametrize("page", ["README.md", "docs/index.md"])
def test_the_stated_counts_are_the_registries(page):
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    stated = {kind: [int(n) for n in re.findall(rf"(\d+) (?:MAS )?{kind}\b", text)]
              for kind in BUNDLED}  # fmt: skip
    assert stated["methods"] and stated["benchmarks"], page
    for kind, numbers in stated.items():
        assert all(n == BUNDLED[kind] for n in numbers), (page, kind, numbers, BUNDLED[kind])


def test_the_readme_names_every_bundled_method_once():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## Methods", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`([a-z_0-9]+)`", table)
    bundled = [n for n in list_methods() if origin(get_method(n)) == "bundled"]
    assert sorted(named) == sorted(bundled)
