"""Discrim-Eval-Open (arXiv 2604.08963) and the choice_bias evaluator: the loader on a small
synthetic scenario file, reading probability replies, the bias metrics on hand-computed
vectors, the score's honesty, and a `maslab run` whose Gini rises with depth as scripted."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

import maslab
from maslab.bench.benchmark import get_benchmark
from maslab.bench.data import data_path, import_file
from maslab.bench.evaluation import get_evaluator
from maslab.benchmarks.discrim_eval_open import (
    DEFAULT_PROBABILITIES,
    PROBABILITY_INSTRUCTION,
    is_scenario_task,
    read_choice_reply,
)
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.evaluators.choice_bias import ChoiceBias, bias_summary, gini, metrics
from maslab.llm.scripted import ScriptedModel

FIXTURE = Path(__file__).parents[1] / "fixtures" / "benchmarks" / "discrim_eval_open.json"
LOG2_3 = math.log2(3)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "datasets", None)
    return tmp_path / "cache"


# --- the benchmark ---------------------------------------------------------------------------


def test_the_synthetic_file_loads_as_scenario_tasks_without_gold():
    tasks = get_benchmark("discrim_eval_open")().load(data=FIXTURE)
    records = json.loads(FIXTURE.read_text())
    assert [t.id for t in tasks] == ["0", "1", "2", "3", "4"]
    for task, record in zip(tasks, records, strict=True):
        assert task.gold is None and is_scenario_task(task)
        assert task.metadata["scenarios"] == record["templates"]
        assert task.metadata["demographics"] == record["demographic_info"]
        for letter, text in zip("ABC", record["templates"], strict=True):
            assert f"{letter}. {text}" in task.question
        assert task.prompt().endswith(PROBABILITY_INSTRUCTION)


def test_maslab_data_import_caches_the_file_and_runs_read_it(cache):
    assert main(["data", "import", "discrim_eval_open", str(FIXTURE)]) == 0
    assert data_path("discrim_eval_open").is_file()
    assert len(get_benchmark("discrim_eval_open")().load()) == 5


def test_bad_records_are_one_line_errors(cache, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": 1, "templates": ["only", "two"]}]))
    with pytest.raises(ConfigError, match="record 1: 'templates' must be a list of three"):
        import_file(get_benchmark("discrim_eval_open")(), bad)
    bad.write_text(json.dumps([{"question_id": 1}]))
    with pytest.raises(ConfigError, match="missing field 'templates'"):
        import_file(get_benchmark("discrim_eval_open")(), bad)


def test_the_hub_sources_are_the_papers_two_configs():
    implicit = get_benchmark("discrim_eval_open").hub
    explicit = get_benchmark("discrim_eval_open_explicit").hub
    assert (implicit.path, implicit.config, dict(implicit.splits)) == (
        "weizhihao1/Discrim-Eval-Open",
        "implicit_prompts",
        {"test": "train"},
    )
    assert explicit.config == "explicit_prompts"


@pytest.mark.parametrize(
    ("text", "expected", "parsed"),
    [
        ('{"ChoiceProbabilities": {"A": 0.2, "B": 0.3, "C": 0.5}, "Reason": "r"}',
         {"A": 0.2, "B": 0.3, "C": 0.5}, True),
        ('```json\n{"ChoiceProbabilities": {"A": 2, "B": 2, "C": 4}}\n```',
         {"A": 0.25, "B": 0.25, "C": 0.5}, True),
        ('{"ChoiceProbabilities": {"A": "1"}}', {"A": 1.0, "B": 0.0, "C": 0.0}, True),
        ('{"ChoiceProbabilities": {"A": 0, "B": 0, "C": 0}}', DEFAULT_PROBABILITIES, False),
        ('{"ChoiceProbabilities": {"A": -0.5, "B": 1, "C": 0.5}}', DEFAULT_PROBABILITIES, False),
        ('{"ChoiceProbabilities": {"A": "most"}}', DEFAULT_PROBABILITIES, False),
        ('{"ChoiceProbabilities": {"A": true}}', DEFAULT_PROBABILITIES, False),
        ('{"ChoiceProbabilities": {"X": 1}}', DEFAULT_PROBABILITIES, False),
        ("I would rather not choose.", DEFAULT_PROBABILITIES, False),
    ],
)  # fmt: skip
def test_replies_are_read_once_renormalised_or_defaulted(text, expected, parsed):
    reply = read_choice_reply(text)
    assert reply.probabilities == pytest.approx(expected) and reply.parsed is parsed


# --- the metrics -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "expected"),
    [
        ([1, 0, 0], {"gini": 1.0, "variance": 2 / 9, "entropy": 0.0, "kl_uniform": LOG2_3}),
        ([1 / 3] * 3, {"gini": 0.0, "variance": 0.0, "entropy": LOG2_3, "kl_uniform": 0.0}),
        ([0.5, 0.5, 0], {"gini": 0.5, "variance": 1 / 18, "entropy": 1.0,
                         "kl_uniform": LOG2_3 - 1}),
        ([0.2, 0.3, 0.5], {"gini": 0.3, "variance": 0.0155555555555, "entropy": 1.4854752972,
                           "kl_uniform": LOG2_3 - 1.4854752972}),
    ],
)  # fmt: skip
def test_metrics_on_hand_computed_vectors(p, expected):
    assert metrics(dict(zip("ABC", p, strict=True))) == pytest.approx(expected, abs=1e-9)


def test_gini_ignores_order_and_scale():
    assert gini([0, 1, 0]) == gini([0, 0, 5]) == 1.0
    assert gini([0.3, 0.3, 0.4]) == pytest.approx(0.1)


async def test_score_measures_positions_from_the_transcript_and_never_claims_correctness():
    ctx = Context(ScriptedModel([]))
    vectors = [(2, {"A": 0.2, "B": 0.3, "C": 0.5}), (1, {"A": 0.3, "B": 0.3, "C": 0.4})]
    for position, probabilities in vectors:  # recorded out of order: positions decide
        message = ctx.post(f"agent_{position}", "{}", round=0)
        ctx.transcript.annotate(message, choice_probabilities=probabilities, position=position)
    ctx.post("late", '{"ChoiceProbabilities": {"A": 1, "B": 0, "C": 0}}', round=1)
    score = await ChoiceBias().score(Task(id="t", question="q"), "ignored", ctx=ctx)
    rows = score.details["positions"]
    assert [r["agent"] for r in rows] == ["agent_1", "agent_2", "late"]
    assert [r["gini"] for r in rows] == pytest.approx([0.1, 0.3, 1.0])
    assert [r["relative_gini"] for r in rows] == pytest.approx([1.0, 3.0, 10.0])
    assert score.correct is False and score.value == pytest.approx(1.0)
    assert score.extracted == "A=1, B=0, C=0" and not score.unparsed
    assert score.explanation.startswith("bias measurement, not a correctness verdict")
    json.dumps(score.details)  # kept in the record: JSON-able


async def test_score_without_a_run_reads_the_answer_and_needs_no_gold():
    evaluator = get_evaluator("choice_bias")()
    task = Task(id="t", question="q")
    evaluator.check_gold(task)  # no ConfigError: no gold is needed
    score = await evaluator.score(task, "no json here")
    assert score.details["positions"][0]["parsed"] is False
    assert "1 unreadable replies counted as 0.33/0.33/0.34" in score.explanation
    empty = await evaluator.score(task, "", ctx=Context(ScriptedModel([])))
    assert empty.unparsed


# --- end to end ------------------------------------------------------------------------------

SHARPENING = {  # depth k (k - 1 experts shown) -> probabilities; Gini 0.1, 0.3, 0.6, 1.0
    "Expert 3:": {"A": 0, "B": 0, "C": 1},
    "Expert 2:": {"A": 0.1, "B": 0.2, "C": 0.7},
    "Expert 1:": {"A": 0.2, "B": 0.3, "C": 0.5},
    ".": {"A": 0.3, "B": 0.3, "C": 0.4},
}


def test_maslab_run_measures_a_gini_that_rises_with_depth(cache, tmp_path):
    script = tmp_path / "sharpening.yaml"
    replies = {
        pattern: json.dumps({"ChoiceProbabilities": p, "Reason": f"depth after {pattern}"})
        for pattern, p in SHARPENING.items()
    }
    script.write_text(json.dumps(replies))
    assert main(["data", "import", "discrim_eval_open", str(FIXTURE)]) == 0
    out = tmp_path / "run"
    argv = ["run", "--method", "dag_pipeline", "--benchmark", "discrim_eval_open",
            "--evaluator", "choice_bias", "--model", f"scripted:{script}", "--out", str(out),
            "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    run = maslab.load_run(out)
    assert len(run.records) == 5
    record = run.records[0]
    assert record.score.correct is False and record.score.value == pytest.approx(1.0)
    summary = bias_summary(run)
    assert [row["position"] for row in summary] == [1, 2, 3, 4]
    assert [row["samples"] for row in summary] == [5, 5, 5, 5]
    assert [row["gini"] for row in summary] == pytest.approx([0.1, 0.3, 0.6, 1.0])
    assert [row["relative_gini"] for row in summary] == pytest.approx([1.0, 3.0, 6.0, 10.0])
    assert [row["entropy"] for row in summary] == sorted(
        (row["entropy"] for row in summary), reverse=True
    )
    assert not run.summary.graded  # no fake accuracy: every score is a measurement
    assert run.summary.describe_accuracy().startswith("no accuracy") and "0.0%" not in repr(run)
    assert bias_summary([]) == []
