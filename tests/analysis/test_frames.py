"""Many runs as tables: load_runs reads run directories (paths or a glob) and gives one row per
run, per sample and per transcript message, each with its run's columns."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

import maslab
from maslab import ConfigError, Runs, load_runs
from maslab.analysis.run_result import RUN_COLUMNS
from maslab.analysis.triage import SIGNALS
from maslab.bench.evaluation import Score

pd = pytest.importorskip("pandas")

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = FIXTURES / "gsm8k_small.jsonl"
SCRIPTED = f"scripted:{FIXTURES / 'answers.yaml'}"


def measured(task: maslab.Task, answer: str) -> Score:
    """A measurement, not a verdict: the run has no accuracy."""
    return Score(value=0.5, correct=False, extracted=answer, measurement=True)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """llm_debate (3 debaters × 2 rounds) and vanilla on the 5 gsm8k fixture tasks, 3 of 5
    right each, and a vanilla run scored by a function that measures."""
    root = tmp_path_factory.mktemp("runs")
    options = {"data": GSM8K, "cache": False, "progress": False}
    maslab.evaluate("llm_debate", "gsm8k", SCRIPTED, out=root / "a_debate", **options)
    maslab.evaluate("vanilla", "gsm8k", SCRIPTED, out=root / "b_vanilla", seed=7, **options)
    maslab.evaluate(
        "vanilla", "gsm8k", SCRIPTED, out=root / "c_measured", evaluator=measured, **options
    )
    return root


@pytest.fixture(scope="module")
def runs(runs_dir: Path) -> Runs:
    return load_runs(str(runs_dir / "*"))


def test_a_glob_reads_the_runs_in_name_order_and_a_run_once(runs_dir, runs):
    assert [run.manifest.method for run in runs] == ["llm_debate", "vanilla", "vanilla"]
    assert [run.dir for run in runs] == sorted(runs_dir.iterdir())
    again = load_runs([runs_dir / "b_vanilla", str(runs_dir / "b_*"), runs_dir / "a_debate"])
    assert [run.dir.name for run in again] == ["b_vanilla", "a_debate"]
    assert len(load_runs(runs_dir / "a_debate")) == 1


def test_runs_df_has_one_row_per_run(runs):
    frame = runs.runs_df()
    assert list(frame.columns) == [
        "method", "benchmark", "model", "split", "seed", "scoring", "repeats", "n", "accuracy",
        "ci_low", "ci_high", "tokens_per_sample", "calls_per_sample", "errors", "budget_stops",
        "directory",
    ]  # fmt: skip
    debate, vanilla, measuring = (row for _, row in frame.iterrows())
    assert (debate["method"], debate["n"], debate["accuracy"]) == ("llm_debate", 5, 0.6)
    assert debate["calls_per_sample"] == 6 and vanilla["calls_per_sample"] == 1
    assert vanilla["seed"] == 7 and vanilla["directory"] == str(runs[1].dir)
    assert debate["ci_low"] < 0.6 < debate["ci_high"]
    assert debate["tokens_per_sample"] == runs[0].summary.mean_tokens > 0
    assert (debate["errors"], debate["budget_stops"], debate["repeats"]) == (0, 0, 1)
    assert pd.isna(measuring["accuracy"]) and pd.isna(measuring["ci_low"])  # no verdicts


def test_samples_df_flattens_every_record_field(runs):
    frame = runs.samples_df()
    assert len(frame) == 15
    columns = list(frame.columns)
    assert columns[: len(RUN_COLUMNS) + 3] == [*RUN_COLUMNS, "task_id", "repeat", "status"]
    score = ["score_value", "score_correct", "score_extracted", "score_explanation"]
    assert set(score) | {"score_details", "prompt_tokens", "calls", "scoring_calls"} <= set(columns)
    assert columns[-len(SIGNALS) :] == [f"signal_{name}" for name in SIGNALS]
    row = frame[(frame.method == "llm_debate") & (frame.task_id == "test-0")].iloc[0]
    assert (row["score_value"], row["score_correct"], row["score_extracted"]) == (1.0, True, "14")
    assert row["gold"] == "14" and row["status"] == "ok" and row["calls"] == 6
    assert orjson.loads(row["meta_votes"]) == {"14": 3}  # a mapping: JSON text
    assert row["meta_aggregate"] == "majority"  # a scalar: as it is
    assert row["signal_repetition"] == 3  # each debater said the same in both rounds
    assert row["signal_token_outlier"] == 0 and row["directory"] == str(runs[0].dir)
    unparsed = frame[(frame.method == "vanilla") & (frame.task_id == "test-3")].iloc[0]
    assert pd.isna(unparsed["score_extracted"]) and unparsed["signal_unparsed"] == 1
    assert set(frame[frame.seed == 7].method) == {"vanilla"}


def test_messages_df_has_one_row_per_transcript_message(runs):
    frame = runs.messages_df()
    assert list(frame.columns) == [
        *RUN_COLUMNS,
        "task_id", "repeat", "index", "sender", "role", "round", "kind", "content", "extracted",
    ]  # fmt: skip
    debate = frame[frame.method == "llm_debate"]
    assert len(debate) == 5 * 6 and len(frame) == 30 + 5 + 5
    first = debate[debate.task_id == "test-0"]
    assert list(first["index"]) == list(range(6))
    assert list(first["sender"]) == ["debater_1", "debater_2", "debater_3"] * 2
    assert set(first["role"]) == {"debater"} and list(first["round"]) == [0, 0, 0, 1, 1, 1]
    assert set(first["extracted"]) == {"14"} and "The answer is 14" in first.iloc[0]["content"]
    assert frame[frame.task_id == "test-3"]["extracted"].isna().all()  # "I am not sure."


def test_paths_that_are_no_runs_are_named_in_one_line(runs_dir, tmp_path):
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ConfigError) as exc:
        load_runs([runs_dir / "a_debate", tmp_path / "notes.txt", tmp_path / "nowhere"])
    message = str(exc.value)
    assert "\n" not in message and message.startswith("not runs: ")
    assert f"{tmp_path / 'notes.txt'}: not a run directory" in message
    assert f"{tmp_path / 'nowhere'}: no such run directory" in message
    with pytest.raises(ConfigError, match=r"no run directory matches .*/zz_\*$"):
        load_runs(str(runs_dir / "zz_*"))
    with pytest.raises(ConfigError, match="no run directory given"):
        load_runs([])


def test_the_tables_without_pandas_are_one_line(runs, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    for table in (runs.runs_df, runs.samples_df, runs.messages_df):
        with pytest.raises(ConfigError, match=r"\(\) needs pandas: pip install pandas$"):
            table()
