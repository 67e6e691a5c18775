"""The run store: truncated lines, errored samples and identity checks on resume."""

from __future__ import annotations

import orjson
import pytest

from maslab.errors import ConfigError
from maslab.evaluation import Score
from maslab.harness import default_out
from maslab.results import Manifest, ResultRecord, RunStore

MANIFEST = Manifest(method="vanilla", benchmark="gsm8k", model="scripted:echo", evaluator="numeric")


def record(task_id: str, status: str = "ok") -> ResultRecord:
    score = Score(value=1.0, correct=True, extracted="1") if status == "ok" else None
    return ResultRecord(task_id=task_id, status=status, answer="1", gold="1", score=score)


def test_resume_drops_a_truncated_line_and_errored_samples(tmp_path):
    store = RunStore(tmp_path)
    assert store.open(MANIFEST) == set()
    store.append(record("a"), {"task_id": "a", "repeat": 0})
    store.append(record("b", "error"), {"task_id": "b", "repeat": 0})
    store.close()
    with (tmp_path / "results.jsonl").open("ab") as f:  # a writer killed mid-line
        f.write(orjson.dumps(record("c").model_dump(mode="json"))[:25])

    reopened = RunStore(tmp_path)
    assert reopened.open(MANIFEST) == {("a", 0)}
    reopened.append(record("b"), {"task_id": "b", "repeat": 0})
    reopened.close()
    results = reopened.results()
    assert sorted(r.key for r in results) == [("a", 0), ("b", 0)]
    assert all(r.status == "ok" for r in results)
    assert len((tmp_path / "results.jsonl").read_bytes().splitlines()) == 2
    assert [t["task_id"] for t in reopened.traces()] == ["a", "b"]


def test_a_different_run_in_the_same_directory_is_refused(tmp_path):
    RunStore(tmp_path).open(MANIFEST)
    other = MANIFEST.model_copy(update={"method": "llm_debate"})
    with pytest.raises(ConfigError, match="holds a different run \\(method differ"):
        RunStore(tmp_path).open(other)


def test_a_run_scored_by_another_judge_is_a_different_run(tmp_path):
    judged = MANIFEST.model_copy(
        update={"evaluator": "llm_judge", "evaluator_options": {"judge": "openai:a"}}
    )
    RunStore(tmp_path).open(judged)
    other = judged.model_copy(update={"evaluator_options": {"judge": "openai:b"}})
    with pytest.raises(ConfigError, match="evaluator_options differ"):
        RunStore(tmp_path).open(other)
    run = {"method": "vanilla", "benchmark": "arith", "model": "scripted:echo"}
    assert default_out(run) == default_out({**run, "evaluator_options": {}})
    assert default_out(run) != default_out({**run, "evaluator_options": {"judge": "openai:a"}})


def test_reading_a_directory_that_is_not_a_run(tmp_path):
    with pytest.raises(ConfigError, match="not a maslab run"):
        RunStore(tmp_path).manifest()


def test_an_evaluators_details_are_kept_in_the_record(tmp_path):
    store = RunStore(tmp_path)
    store.open(MANIFEST)
    details = {"codes": [{"message": 0, "flags": {"agrees": True}}], "gini": [0.1, 0.25]}
    score = Score(value=1.0, correct=True, extracted="1", details=details)
    store.append(
        ResultRecord(task_id="a", status="ok", answer="1", gold="1", score=score),
        {"task_id": "a", "repeat": 0},
    )
    store.close()
    [kept] = RunStore(tmp_path).results()
    assert kept.score is not None and kept.score.details == details
