"""The run store: append-only resumes, torn lines, retried samples, the trace index and
identity checks on resume."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from rich.console import Console

from maslab.analysis.stats import summarize
from maslab.bench.evaluation import Score
from maslab.errors import ConfigError
from maslab.report.show import show_task
from maslab.store.run_store import (
    SUPERSEDED,
    Manifest,
    ResultRecord,
    RunLocked,
    RunStore,
    Trace,
    partial_file,
)

MANIFEST = Manifest(method="vanilla", benchmark="gsm8k", model="scripted:echo", evaluator="numeric")


def record(task_id: str, status: str = "ok") -> ResultRecord:
    score = Score(value=1.0, correct=True, extracted="1") if status == "ok" else None
    return ResultRecord(task_id=task_id, status=status, answer="1", gold="1", score=score)


def test_resume_cuts_a_torn_line_and_retries_errored_samples(tmp_path):
    store = RunStore(tmp_path)
    assert store.open(MANIFEST) == set()
    store.append(record("a"), Trace(task_id="a", repeat=0))
    store.append(record("b", "error"), Trace(task_id="b", repeat=0, prompt="try 1"))
    store.close()
    with (tmp_path / "results.jsonl").open("ab") as f:  # a writer killed mid-line
        f.write(orjson.dumps(record("c").model_dump(mode="json"))[:25])

    reopened = RunStore(tmp_path)
    assert reopened.open(MANIFEST) == {("a", 0)}
    reopened.append(record("b"), Trace(task_id="b", repeat=0, prompt="try 2"))
    reopened.close()
    results = reopened.results()
    assert sorted(r.key for r in results) == [("a", 0), ("b", 0)]
    assert all(r.status == "ok" for r in results)
    assert [r.status for r in reopened.superseded()] == ["error"]
    lines = (tmp_path / "results.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == 3 and all(orjson.loads(line) for line in lines)  # torn bytes cut off
    assert [(t.task_id, t.prompt) for t in reopened.traces()] == [("a", None), ("b", "try 2")]


def _snapshot(directory: Path) -> dict[str, tuple[int, bytes]]:
    return {
        name: ((directory / name).stat().st_ino, (directory / name).read_bytes())
        for name in ("results.jsonl", "traces.jsonl", "traces.idx")
    }


def test_a_resume_only_appends(tmp_path):
    store = RunStore(tmp_path)
    store.open(MANIFEST)
    for task, status in (("a", "ok"), ("b", "error"), ("c", "ok")):
        store.append(record(task, status), Trace(task_id=task, repeat=0, calls=[]))
    store.close()
    before = _snapshot(tmp_path)

    assert store.open(MANIFEST) == {("a", 0), ("c", 0)}
    store.append(record("b"), Trace(task_id="b", repeat=0, calls=[]))
    store.close()
    for name, (inode, data) in _snapshot(tmp_path).items():
        assert inode == before[name][0], f"{name} was replaced"
        assert data.startswith(before[name][1]) and len(data) > len(before[name][1]), name
    assert not (tmp_path / SUPERSEDED).exists()


def test_a_torn_tail_is_cut_before_the_next_append(tmp_path):
    store = RunStore(tmp_path)
    store.open(MANIFEST)
    store.append(record("a"), Trace(task_id="a", repeat=0))
    store.close()
    intact = _snapshot(tmp_path)
    for name in ("results.jsonl", "traces.jsonl", "traces.idx"):  # killed mid-line in each
        with (tmp_path / name).open("ab") as f:
            f.write(b'{"task_id":"b","rep')

    store.open(MANIFEST)
    store.append(record("b"), Trace(task_id="b", repeat=0, prompt="second"))
    store.close()
    for name, (inode, data) in _snapshot(tmp_path).items():
        assert inode == intact[name][0] and data.startswith(intact[name][1])
        assert all(orjson.loads(line) for line in data.splitlines())
    assert [r.key for r in store.results()] == [("a", 0), ("b", 0)]
    [(_, trace)] = store.traces_of([("b", 0)])
    assert trace is not None and trace.line() == {"task_id": "b", "repeat": 0, "prompt": "second"}


def test_a_retried_sample_counts_once_and_its_errored_attempt_as_superseded(tmp_path):
    store = RunStore(tmp_path)
    store.open(MANIFEST)
    failed = ResultRecord(task_id="a", status="error", error="boom", usage={"prompt_tokens": 10})
    store.append(failed, Trace(task_id="a", repeat=0))
    store.close()
    assert store.open(MANIFEST) == set()
    retried = record("a").model_copy(update={"usage": {"prompt_tokens": 5}})
    store.append(retried, Trace(task_id="a", repeat=0))
    store.close()

    results, superseded = store.records()
    assert results == [retried] and superseded == [failed]
    summary = summarize(results, superseded=superseded)
    assert summary.n == 1 and summary.total_served_tokens == 15
    assert store.open(MANIFEST) == {("a", 0)}  # nothing left to retry
    store.close()
    assert store.records() == (results, superseded)


def test_an_old_run_with_superseded_jsonl_reads_the_same_and_resumes(tmp_path):
    """Older versions moved errored attempts to superseded.jsonl and kept no index; a move
    cut short left the attempt in results.jsonl too."""
    manifest = MANIFEST.model_copy(update={"task_ids": ["a", "b"]})
    (tmp_path / "manifest.json").write_bytes(orjson.dumps(manifest.model_dump()))
    ok = record("a").model_copy(update={"usage": {"prompt_tokens": 5}})
    moved = ResultRecord(task_id="a", status="error", usage={"prompt_tokens": 7})
    half_moved = ResultRecord(task_id="b", status="error", usage={"prompt_tokens": 11})
    (tmp_path / "results.jsonl").write_bytes(
        b"".join(orjson.dumps(r.model_dump(mode="json")) + b"\n" for r in (ok, half_moved))
    )
    (tmp_path / SUPERSEDED).write_bytes(
        b"".join(orjson.dumps(r.model_dump(mode="json")) + b"\n" for r in (moved, half_moved))
    )
    traces = [{"task_id": t, "repeat": 0, "prompt": t, "messages": []} for t in ("a", "b")]
    (tmp_path / "traces.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in traces))

    store = RunStore(tmp_path)
    results, superseded = store.records()
    assert results == [ok, half_moved] and superseded == [moved]
    assert summarize(results, superseded=superseded).total_served_tokens == 23
    assert [t.prompt for t in store.traces()] == ["a", "b"]

    assert store.open(manifest) == {("a", 0)}
    retried = record("b").model_copy(update={"usage": {"prompt_tokens": 3}})
    store.append(retried, Trace(task_id="b", repeat=0, prompt="b again", messages=[]))
    store.close()
    results, superseded = store.records()
    assert results == [ok, retried] and sorted(r.task_id for r in superseded) == ["a", "b"]
    assert summarize(results, superseded=superseded).total_served_tokens == 26
    assert [t.prompt for t in store.traces()] == ["a", "b again"]


def _indexed_run(directory: Path, tasks: int = 3) -> RunStore:
    store = RunStore(directory)
    store.open(MANIFEST)
    for i in range(tasks):
        trace = Trace(task_id=f"t{i}", repeat=0, prompt=f"question {i}", messages=[])
        store.append(record(f"t{i}"), trace)
    store.close()
    return store


def _shown(store: RunStore, task_id: str) -> str:
    console = Console(file=io.StringIO(), width=100)
    show_task(store, task_id, 0, console)
    return console.file.getvalue()


def test_show_task_rebuilds_a_missing_or_stale_index(tmp_path):
    store = _indexed_run(tmp_path)
    index = tmp_path / "traces.idx"
    assert len(index.read_bytes().splitlines()) == 3

    index.unlink()  # a run older than the index
    assert "question 1" in _shown(store, "t1")
    assert sorted(store.index()) == [("t0", 0), ("t1", 0), ("t2", 0)]

    with (tmp_path / "traces.jsonl").open("ab") as f:  # killed between trace and index lines
        trace = {"task_id": "t3", "repeat": 0, "prompt": "question 3", "messages": []}
        f.write(orjson.dumps(trace) + b"\n")
    assert "question 3" in _shown(store, "t3")

    lines = (tmp_path / "traces.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "traces.jsonl").write_bytes(b"".join(reversed(lines)))  # rewritten elsewhere
    assert "question 0" in _shown(store, "t0") and "question 2" in _shown(store, "t2")
    with pytest.raises(ConfigError, match="no task 't9'"):
        _shown(store, "t9")

    store.open(MANIFEST)  # a writer brings the index on disk up to date
    store.close()
    entries = [orjson.loads(line) for line in index.read_bytes().splitlines()]
    assert sorted(task for task, *_ in entries) == ["t0", "t1", "t2", "t3"]


def test_a_resume_parses_no_trace(tmp_path, monkeypatch):
    store = _indexed_run(tmp_path)
    parsed: list[bytes] = []
    loads = orjson.loads

    def spy(data: bytes | str) -> object:
        parsed.append(bytes(data, "utf-8") if isinstance(data, str) else bytes(data))
        return loads(data)

    monkeypatch.setattr(orjson, "loads", spy)
    validate = Trace.model_validate_json
    monkeypatch.setattr(Trace, "model_validate_json", lambda data: spy(data) and validate(data))
    for index in (True, False):  # and an older run without an index
        if not index:
            (tmp_path / "traces.idx").unlink()
        assert store.open(MANIFEST) == {("t0", 0), ("t1", 0), ("t2", 0)}
        store.close()
        assert not [line for line in parsed if b"question" in line]
    assert len((tmp_path / "traces.idx").read_bytes().splitlines()) == 3


def test_a_different_run_in_the_same_directory_is_refused(tmp_path):
    first = RunStore(tmp_path)
    first.open(MANIFEST)
    first.close()
    other = MANIFEST.model_copy(update={"method": "llm_debate"})
    with pytest.raises(ConfigError, match="holds a different run \\(method differ"):
        RunStore(tmp_path).open(other)


def test_a_run_scored_by_another_judge_is_a_different_run(tmp_path):
    judged = MANIFEST.model_copy(
        update={"evaluator": "llm_judge", "evaluator_options": {"judge": "openai:a"}}
    )
    first = RunStore(tmp_path)
    first.open(judged)
    first.close()
    other = judged.model_copy(update={"evaluator_options": {"judge": "openai:b"}})
    with pytest.raises(ConfigError, match="evaluator_options differ"):
        RunStore(tmp_path).open(other)
    assert judged.directory() != other.directory()  # by default, runs apart


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
        Trace(task_id="a", repeat=0),
    )
    store.close()
    [kept] = RunStore(tmp_path).results()
    assert kept.score is not None and kept.score.details == details


@pytest.mark.system
def test_one_writer_per_run_directory(tmp_path):
    """A second store (another process, or the same one) cannot open a run being written; it
    is told who holds it, and may open it once the first is closed."""
    first = RunStore(tmp_path)
    first.open(MANIFEST)
    assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
    held = rf"being written by another maslab process \(pid {os.getpid()}\)"
    with pytest.raises(RunLocked, match=held):
        RunStore(tmp_path).open(MANIFEST)
    script = (
        "import sys\nfrom maslab.store.run_store import Manifest, RunStore\n"
        f"manifest = Manifest.model_validate_json({MANIFEST.model_dump_json()!r})\n"
        "RunStore(sys.argv[1]).open(manifest)\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True
    )
    assert other.returncode != 0 and "RunLocked" in other.stderr
    first.close()
    second = RunStore(tmp_path)
    second.open(MANIFEST)
    second.close()


def test_atomic_writes_of_one_file_by_two_writers_do_not_collide(tmp_path):
    """Two writers replacing one file (two reports of one run) each write a temporary file of
    its own: both complete, the last one to finish wins, nothing is left behind."""
    path = tmp_path / "report.html"
    with partial_file(path, "w") as first:
        first.write("first")
        with partial_file(path, "w") as second:
            second.write("second")
        assert path.read_text() == "second"
    assert path.read_text() == "first"
    with pytest.raises(RuntimeError), partial_file(path) as failing:
        failing.write(b"half")
        raise RuntimeError
    assert path.read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
