"""RunResult.compare: two runs paired by task, with the same-data rule and the noise judgement
that `maslab compare` prints, for Python users too."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import maslab
from maslab import ConfigError, RunResult
from maslab.analysis.comparison import format_p_value

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
    assert comparison.describe()[2].startswith("5 paired tasks (1 and 1 repeats)")
    assert not comparison.inside_noise and comparison.noise is None  # one repeat: no spread


def test_the_runs_are_named_and_the_difference_is_a_minus_b(runs):
    a, b = runs
    comparison = a.compare(b)
    lines = comparison.describe()
    assert lines[:2] == [f"A: vanilla · {SCRIPTED} · a", f"B: llm_debate · {SCRIPTED} · b"]
    assert "A − B = +0.0% [+0.0%, +0.0%]" in lines[2] and lines[2].endswith("McNemar p = 1.000")
    # A ahead by 40 points: the paired figures hold B − A, the words A − B, in argument order
    ahead = replace(
        comparison.paired, accuracy_a=0.8, accuracy_b=0.4, difference=-0.4, ci=(-0.6, -0.2),
        a_only_correct=2, b_only_correct=0, p_value=0.0004,
    )  # fmt: skip
    line = replace(comparison, paired=ahead).describe()[2]
    assert "A 80.0%, B 40.0%, A − B = +40.0% [+20.0%, +60.0%]; A better on 2 tasks" in line
    assert line.endswith("McNemar p < 0.001")


@pytest.mark.parametrize(
    ("p", "printed"),
    [(0.0312, "p = 0.031"), (0.001, "p = 0.001"), (0.00099, "p < 0.001"), (1.0, "p = 1.000")],
)
def test_a_p_value_is_printed_one_way(p, printed):
    assert format_p_value(p) == printed


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
