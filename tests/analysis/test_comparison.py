"""RunResult.compare: two runs paired by task, with the same-data rule and the noise judgement
that `maslab compare` prints, for Python users too."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import maslab
from maslab import ConfigError, RunResult

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = FIXTURES / "gsm8k_small.jsonl"
SCRIPTED = f"scripted:{FIXTURES / 'answers.yaml'}"


def run(out: Path, method: str, **options: object) -> RunResult:
    return maslab.evaluate(method, "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=out, **options)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, RunResult]:
    root = tmp_path_factory.mktemp("compare")
    return run(root / "a", "vanilla"), run(root / "b", "llm_debate")


def test_two_runs_on_the_same_data_pair_by_task(runs):
    a, b = runs
    comparison = a.compare(b)
    paired = comparison.paired
    assert paired.n == 5 and comparison.warning is None and comparison.data_differs == ()
    assert paired.difference == pytest.approx(b.accuracy - a.accuracy)
    assert comparison.describe()[0].startswith("5 paired tasks (1 and 1 repeats)")
    assert not comparison.inside_noise and comparison.noise is None  # one repeat: no spread


def test_runs_on_different_data_are_refused_unless_paired_by_id(runs):
    a, b = runs
    other = replace(b, manifest=b.manifest.model_copy(update={"split": "train"}))
    with pytest.raises(ConfigError, match=r"ran on different data \(split differ\)"):
        a.compare(other)
    comparison = a.compare(other, pair_by_id=True)
    assert comparison.warning == "paired by task id although split differ"


def test_a_difference_within_the_repeat_spread_is_called_noise(runs, tmp_path):
    a, _ = runs
    repeated = run(tmp_path / "twice", "vanilla", repeats=2)  # the scripted model: no spread
    same = repeated.compare(a)
    assert same.noise == 0 and same.paired.difference == 0 and same.inside_noise
    assert "inside the run-to-run noise" in same.describe()[-1]
    apart = replace(same, paired=replace(same.paired, difference=0.2))  # beyond the spread
    assert not apart.inside_noise and "noise" not in apart.describe()[-1]


def test_a_run_without_results_is_refused(runs):
    a, b = runs
    with pytest.raises(ConfigError, match="has no results yet"):
        a.compare(replace(b, records=[]))
