"""``maslab export RUN [RUN ...]``: the samples of several runs as one table, each row with its
run's columns."""

from __future__ import annotations

import csv
from pathlib import Path

import orjson
import pytest

import maslab
from maslab.analysis.run_result import SAMPLE_COLUMNS
from maslab.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = FIXTURES / "gsm8k_small.jsonl"
SCRIPTED = f"scripted:{FIXTURES / 'answers.yaml'}"


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[maslab.RunResult]:
    """vanilla on the 5 gsm8k fixture tasks with two seeds, and on the first 2 with cot."""
    root = tmp_path_factory.mktemp("runs")
    options = {"data": GSM8K, "cache": False, "progress": False}
    return [
        maslab.evaluate("vanilla", "gsm8k", SCRIPTED, out=root / "vanilla", **options),
        maslab.evaluate("cot", "gsm8k", SCRIPTED, out=root / "cot", seed=3, limit=2, **options),
    ]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_several_runs_make_one_table_with_their_columns(two_runs, tmp_path, fmt, capsys):
    vanilla, cot = two_runs
    target = tmp_path / f"all.{fmt}"
    assert main(["export", str(vanilla.dir), str(cot.dir), "-o", str(target)]) == 0
    assert f"7 samples of 2 runs written to {target}" in capsys.readouterr().out
    if fmt == "csv":
        with target.open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert list(rows[0]) == list(SAMPLE_COLUMNS)
    elif fmt == "jsonl":
        rows = [orjson.loads(line) for line in target.read_bytes().splitlines()]
    else:
        rows = pytest.importorskip("pyarrow.parquet").read_table(target).to_pylist()
    assert len(rows) == 7
    assert [(r["method"], str(r["seed"]), r["directory"]) for r in rows] == [
        *[("vanilla", "0", str(vanilla.dir))] * 5,
        *[("cot", "3", str(cot.dir))] * 2,
    ]
    assert [r["task_id"] for r in rows] == [*(f"test-{i}" for i in range(5)), "test-0", "test-1"]
    if fmt == "jsonl":
        assert rows == vanilla.to_records() + cot.to_records()


def test_several_runs_need_a_file_and_each_must_be_a_run(two_runs, tmp_path, capsys):
    vanilla, cot = two_runs
    assert main(["export", str(vanilla.dir), str(cot.dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert "2 runs make one table: name its file with -o FILE" in err and "\n" not in err
    assert not (vanilla.dir / "samples.csv").exists()
    assert main(["export", str(vanilla.dir), str(tmp_path), "-o", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"not runs: {tmp_path}: not a maslab run (no manifest.json)" in err and "\n" not in err
