"""``maslab study``: MASLab's Table 2 study end to end on a scripted model over fixture data
(every benchmark imported from tests/fixtures), its report beside the paper's figures, resume,
a second model as a column, the plan, and the estimates and verdicts it rests on."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from maslab.cli import main
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel
from maslab.studies.base import get_study, list_studies
from maslab.studies.catalogue.maslab_table2 import BENCHMARKS, METHODS, _mean_ranks
from maslab.studies.estimates import Estimate, mean_of, sign_verdict, value_verdict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "benchmarks"


class Letters:
    """A scripted model that answers every question with one option letter, and counts."""

    def __init__(self, letter: str) -> None:
        self.letter, self.calls = letter, 0

    def __call__(self, request: object) -> str:
        self.calls += 1
        return f"The answer is \\boxed{{{self.letter}}}."


@pytest.fixture
def models(monkeypatch, tmp_path) -> dict[str, Letters]:
    """``letters:a`` and ``letters:b``, and every benchmark of the study imported into a
    scratch cache from the fixtures."""
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in BENCHMARKS:
        fixture = next(FIXTURES.glob(f"{name}.json*"))
        assert main(["data", "import", name, str(fixture)]) == 0
    scripts = {"a": Letters("A"), "b": Letters("B")}
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("letters")(
        lambda name, settings: ScriptedModel(scripts[name], name=f"letters:{name}")
    )
    return scripts


def study(out: Path, *extra: str) -> int:
    return main(["study", "run", "maslab-table2", "--limit", "2", "--out", str(out), "--quiet",
                 "--max-cells", "16", *extra])  # fmt: skip


@pytest.mark.system  # the math evaluator checks in worker processes
def test_table2_runs_reports_resumes_and_adds_a_model(models, tmp_path, capsys):
    out = tmp_path / "study"
    assert study(out, "--model", "letters:a") == 0
    printed = capsys.readouterr().out
    assert f"study maslab-table2: {len(METHODS) * len(BENCHMARKS)} of 90 runs finished" in printed
    against = "(against the paper's Qwen-2.5-7B-Instruct)"
    assert f"Accuracy on letters:a: accuracy, % {against}" in printed
    assert "Gain over Single on letters:a" in printed and "GPQA's main set is not in" in printed
    row = next(line for line in printed.splitlines() if re.match(r"vanilla +math500 ", line))
    assert row.endswith("· paper 77.0 · lower")  # 'A' is never MATH-500's answer
    record = orjson.loads((out / "study.json").read_bytes())
    assert record["models"] == ["letters:a"] and record["limit"] == 2
    page = (out / "study.html").read_text()
    assert "MASLab&#x27;s Table 2 on your model" in page and "paper 77.0" in page
    calls = models["a"].calls
    assert calls > 0

    assert study(out, "--model", "letters:a") == 0  # resumed: nothing left to call
    assert models["a"].calls == calls
    assert study(out, "--model", "letters:b") == 0  # a second model: a column more
    assert orjson.loads((out / "study.json").read_bytes())["models"] == ["letters:a", "letters:b"]
    capsys.readouterr()
    assert main(["study", "report", str(out), "--against", "Llama-3.3-70B-Instruct"]) == 0
    printed = capsys.readouterr().out
    assert "Accuracy on letters:b" in printed and "the paper's Llama-3.3-70B-Instruct" in printed
    assert re.search(r"Avg-R on letters:a over 9 benchmarks \(lower is better\): ", printed)

    assert study(out, "--model", "letters:a", "--repeats", "2") == 2  # other options, same dir
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds maslab-table2 run with repeats=1" in err
    assert main(["study", "report", str(out), "--against", "GPT-9"]) == 2
    assert "the paper's models are Llama-3.3-70B-Instruct, " in capsys.readouterr().err


@pytest.mark.system  # the pilots on math500 score with the math evaluator's processes
def test_the_plan_counts_tasks_and_measured_calls(models, capsys):
    assert main(["study", "plan", "maslab-table2", "--model", "letters:a", "--limit", "2"]) == 0
    printed = capsys.readouterr().out
    counts = {
        m: float(re.search(rf"^{m}\s+(\S+)\s", printed, re.M)[1]) for m in METHODS
    }  # fmt: skip
    assert counts["vanilla"] == counts["cot"] == 1 and counts["llm_debate"] == 7
    total = 2 * len(BENCHMARKS) * sum(counts.values())
    assert f"about {total:,.0f} model calls in the 90 runs that can start" in printed
    assert models["a"].calls == 0  # the pilots ran on a scripted model of their own


def test_a_missing_study_and_a_directory_without_one_are_one_line(tmp_path, capsys):
    assert main(["study", "run", "table-9", "--model", "scripted:echo"]) == 2
    assert "table-9" in capsys.readouterr().err
    assert main(["study", "report", str(tmp_path)]) == 2
    assert "holds no study" in capsys.readouterr().err
    out = tmp_path / "study"  # a paper model it does not have: said before anything runs
    assert main(["study", "run", "maslab-table2", "--model", "scripted:echo", "--against",
                 "GPT-9", "--out", str(out)]) == 2  # fmt: skip
    assert "the paper's models are Llama-3.3-70B-Instruct" in capsys.readouterr().err
    assert not out.exists()


def test_every_study_has_its_papers_figures_and_a_source():
    for name in list_studies():
        study = get_study(name)
        assert study.title and study.source and study.question
        figures = study.paper_figures()
        assert figures is None or (figures.paper and figures.where and figures.rows)


def test_verdicts():
    ours = Estimate(0.60, 0.50, 0.70, 100)
    assert value_verdict(ours, 0.55) == "inside"
    assert value_verdict(ours, 0.45) == "higher" and value_verdict(ours, 0.75) == "lower"
    gain = Estimate(0.05, 0.01, 0.09, 100)
    assert sign_verdict(gain, 0.02) == "sign holds" and sign_verdict(gain, -0.02) == "sign reversed"
    assert sign_verdict(Estimate(0.05, -0.01, 0.11, 100), 0.02) == "not detected"
    both = mean_of([Estimate(0.5, 0.4, 0.6, 50), Estimate(0.7, 0.6, 0.8, 50)])
    assert both.value == pytest.approx(0.6) and both.half_width == pytest.approx(0.1 / 2**0.5)


def test_ranks_share_ties():
    scores = {"b1": {"x": 0.9, "y": 0.5, "z": 0.5}, "b2": {"x": 0.1, "y": 0.2, "z": 0.3}}
    assert _mean_ranks(scores) == {"x": 2.0, "y": 2.25, "z": 1.75}


def test_the_readme_and_the_guide_list_every_study():
    root = Path(__file__).parents[2]
    for document in ("README.md", "docs/guide/studies.md"):
        text = (root / document).read_text()
        listed = set(re.findall(r"^\| `([a-z0-9-]+)` \|", text, re.M))
        assert listed == set(list_studies()), document
