"""Runs survive bad files and bad endpoints; nothing is written before a run is valid."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import orjson
import pytest
from helpers import lines, run_cli

from maslab.analysis.stats import error_causes, summarize
from maslab.cli import main
from maslab.errors import ConfigError
from maslab.harness.runner import RunConfig, Runner
from maslab.store.run_store import MANIFEST, RESULTS, ResultRecord, RunStore, write_atomically
from maslab.testing.fake_server import FakeOpenAIServer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = FIXTURES / "gsm8k_small.jsonl"
SCRIPT = FIXTURES / "answers.yaml"


def run(out: Path, *extra: object) -> int:
    args = ["run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", GSM8K, "--quiet",
            "--model", f"scripted:{SCRIPT}", "--out", out, "--no-cache", *extra]  # fmt: skip
    return run_cli(*args)


def test_a_corrupted_line_is_skipped_with_a_warning_and_its_sample_rerun(tmp_path, caplog, capsys):
    out = tmp_path / "run"
    assert run(out) == 0
    rows = (out / RESULTS).read_bytes().splitlines(keepends=True)
    rows[1] = b'{"task_id": "test-1", "repeat": 0, "stat\n'  # torn JSON
    rows[3] = b'{"task_id": "test-3", "repeat": 0, "status": "maybe"}\n'  # JSON, not a record
    (out / RESULTS).write_bytes(b"".join(rows))
    caplog.set_level(logging.WARNING)
    capsys.readouterr()

    assert main(["show", str(out)]) == 0
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    assert main(["compare", str(out), str(out)]) == 0
    warnings = [r.getMessage() for r in caplog.records]
    torn = [w for w in warnings if f"{out / RESULTS} line 2 skipped: not valid JSON" in w]
    assert len(torn) == 1  # once, however often the three commands read the file
    assert any(f"{out / RESULTS} line 4 skipped: not a result record" in w for w in warnings)
    assert "3 tasks" in capsys.readouterr().out  # show counts the readable records

    assert run(out) == 0  # resume re-runs exactly the two unreadable samples, appending them
    results = RunStore(out).results()
    assert sorted(r.task_id for r in results) == [f"test-{i}" for i in range(5)]
    assert len(lines(out / "traces.jsonl")) == 7


def test_manifest_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / MANIFEST
    path.write_bytes(b'{"old": true}')

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", full_disk)
    with pytest.raises(OSError):
        write_atomically(path, b'{"new": tr')
    assert path.read_bytes() == b'{"old": true}'  # readers never see half a manifest


@pytest.mark.system
def test_a_smaller_limit_or_repeats_reports_exactly_the_subset(tmp_path, capsys):
    out = tmp_path / "run"
    assert run(out, "--repeats", "2") == 0
    assert len(lines(out / RESULTS)) == 10
    capsys.readouterr()
    assert run(out, "--limit", "2") == 0
    assert "over 2 tasks × 1 repeat" in capsys.readouterr().out
    store = RunStore(out)  # the directory still holds, and plans, all it did
    assert len(store.results()) == 10
    planned = orjson.loads((out / MANIFEST).read_bytes())["task_ids"]
    assert planned == [f"test-{i}" for i in range(5)]
    assert main(["show", str(out)]) == 0
    assert "5 tasks × 2 repeats" in capsys.readouterr().out
    assert run(out, "--repeats", "2") == 0  # asking for the whole again re-runs nothing
    assert len(lines(out / RESULTS)) == 10


def test_a_bad_gold_fails_before_any_call_or_write(tmp_path, capsys):
    data = tmp_path / "gsm8k.jsonl"
    rows = lines(GSM8K)
    rows[3]["answer"] = "so the answer is #### about twelve"
    data.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    out = tmp_path / "run"
    with FakeOpenAIServer(["The answer is 14."]) as server:
        code = main(["run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", str(data),
                     "--model", f"openai:fake@{server.base_url}", "--out", str(out),
                     "--no-cache", "--quiet"])  # fmt: skip
        assert server.served == 0
    err = capsys.readouterr().err.strip()
    assert code == 2 and "unusable gold answer: task test-3" in err and "\n" not in err
    assert not out.exists()


@pytest.mark.parametrize("model", ["gpt-4o-mini", "openai:x"])
def test_a_run_that_fails_validation_leaves_no_directory(tmp_path, capsys, monkeypatch, model):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "run"
    code = main(["run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", str(GSM8K),
                 "--model", model, "--out", str(out), "--no-cache", "--quiet"])  # fmt: skip
    assert code == 2 and "Traceback" not in capsys.readouterr().err
    assert not out.exists()


def test_a_sweep_sets_aside_a_cell_without_its_key_before_running_any(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("MASLAB_NO_SUCH_KEY", raising=False)
    endpoints = tmp_path / "endpoints.yaml"
    endpoints.write_text(
        "keyed:\n  - base_url: http://127.0.0.1:9/v1\n    api_key_env: MASLAB_NO_SUCH_KEY\n"
    )
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'sweep'}\nendpoints: {endpoints}\n"
        f"models: ['scripted:{SCRIPT}', 'openai:keyed']\nmethods: [vanilla]\n"
        f"benchmarks: [{{name: gsm8k, data: '{GSM8K}'}}]\ncache: false\n"
    )
    assert main(["sweep", str(sweep), "--quiet"]) == 1
    out = capsys.readouterr().out
    set_aside = out.index("set aside gsm8k/vanilla/openai:keyed (why: the table at the end)")
    assert set_aside < out.index("accuracy 60.0%")  # checked before the other cell ran
    assert "1 cell failed" in out and "MASLAB_NO_SUCH_KEY" in out.split("1 cell failed")[1]
    assert out.count("MASLAB_NO_SUCH_KEY") == 1  # the reason is said once
    assert not (tmp_path / "sweep" / "gsm8k" / "vanilla" / "openai_keyed").exists()


def test_refused_credentials_stop_the_run_early_and_say_why(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MASLAB_TEST_KEY", "wrong-key")
    endpoints = tmp_path / "endpoints.yaml"
    with FakeOpenAIServer(["The answer is 14."], api_key="right-key") as server:
        endpoints.write_text(
            f"fake:\n  - base_url: {server.base_url}\n    api_key_env: MASLAB_TEST_KEY\n"
        )
        data = tmp_path / "many.jsonl"
        rows = lines(GSM8K)
        data.write_bytes(b"".join(
            orjson.dumps({**rows[i % 5], "question": f"{rows[i % 5]['question']} #{i}"}) + b"\n"
            for i in range(40)
        ))  # fmt: skip
        code = main(["run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", str(data),
                     "--model", "openai:fake", "--endpoints", str(endpoints), "--concurrency", "1",
                     "--out", str(tmp_path / "run"), "--no-cache", "--quiet"])  # fmt: skip
        asked = len(server.request_log)
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err  # 1: it ran, and wrote what it did
    assert "stopped after 3 samples failed and none succeeded" in err and "HTTP 401" in err
    assert asked == 0  # the fake server logs only authorized requests; none got through
    assert len(lines(tmp_path / "run" / RESULTS)) == 3  # the failures are on disk, resumable


def test_error_causes_are_grouped_most_frequent_first():
    def failed(task: str, error: str) -> ResultRecord:
        return ResultRecord(task_id=task, status="error", error=error)

    records = [
        failed("a", "LLMTimeout: m: no answer within 5s (after 6 attempts)"),
        failed("b", "KeyError: 'plan'"),
        failed("c", "LLMTimeout: m: no answer within 5s (after 6 attempts)"),
        ResultRecord(task_id="d", status="ok"),
    ]
    timeout = "LLMTimeout: m: no answer within 5s"
    assert error_causes(records) == ((timeout, 2), ("KeyError: 'plan'", 1))
    assert summarize(records).describe_errors() == (
        "2 × LLMTimeout: m: no answer within 5s; 1 × KeyError: 'plan'"
    )


def test_the_summary_names_the_causes_of_errors(tmp_path, capsys):
    with FakeOpenAIServer(["The answer is 14."], schedule=["400"] * 200) as server:
        code = main(["run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", str(GSM8K),
                     "--model", f"openai:fake@{server.base_url}", "--limit", "2",
                     "--out", str(tmp_path / "run"), "--no-cache", "--quiet"])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 1
    assert "errors: 2 × RequestRejected:" in printed and "HTTP 400" in printed


def test_a_prompt_over_the_context_window_stops_the_sample_not_the_run(tmp_path, capsys):
    with FakeOpenAIServer(["The answer is 14."], schedule=["context_length"] * 200) as server:
        code = main(["run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", str(GSM8K),
                     "--model", f"openai:fake@{server.base_url}", "--limit", "2",
                     "--out", str(tmp_path / "run"), "--no-cache", "--quiet"])  # fmt: skip
        assert server.fault_counts == {"context_length": 2}  # not retried
    printed = capsys.readouterr().out
    assert code == 0 and "0 errors, 2 stopped by budget" in printed
    records = lines(tmp_path / "run" / "results.jsonl")
    assert all(r["status"] == "budget" and r["score"]["correct"] is False for r in records)
    assert all(r["metadata"]["budget"].startswith("context window full: ") for r in records)


def test_an_evaluator_failure_is_that_samples_error_not_the_runs(tmp_path, monkeypatch):
    from maslab.evaluators.numeric import NumericEvaluator

    async def broken(self, task, answer, *, ctx=None):
        if task.id == "test-1":
            raise RuntimeError("scorer bug")
        return await original(self, task, answer, ctx=ctx)

    original = NumericEvaluator.score
    monkeypatch.setattr(NumericEvaluator, "score", broken)
    config = RunConfig(method="vanilla", benchmark="gsm8k", data=str(GSM8K),
                       model=f"scripted:{SCRIPT}", out=str(tmp_path / "run"))  # fmt: skip
    import asyncio

    records = asyncio.run(Runner(config).run())
    by_task = {r.task_id: r for r in records}
    assert len(records) == 5 and by_task["test-1"].error == "evaluator: RuntimeError: scorer bug"
    assert sum(r.status == "ok" for r in records) == 4


def test_check_gold_is_a_typed_error_from_python():
    from maslab.core.task import Task
    from maslab.evaluators.choice import ChoiceEvaluator

    task = Task(id="q1", question="?", gold="Z", choices=("a", "b", "c"))
    with pytest.raises(ConfigError, match="q1: gold 'Z' is not an option letter"):
        ChoiceEvaluator().check_gold(task)


def test_a_local_server_that_refuses_stops_the_run_at_once_and_says_where(tmp_path, capsys):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    code = main(["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "50",
                 "--model", f"openai:m@{url}", "--concurrency", "2",
                 "--out", str(tmp_path / "run"), "--no-cache", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err and time.monotonic() - started < 10
    # not retried: the first refusal stops the run (a sample finishing beside it may count)
    assert f"stopped: ConnectionRefused: openai:m@{url}: connection refused" in err
    assert "attempts" not in err
    assert 1 <= len(lines(tmp_path / "run" / RESULTS)) <= 2


def test_a_line_cut_short_by_a_full_disk_is_taken_back(tmp_path):
    import io

    from maslab.store.run_store import _append_whole

    class FillsUp(io.BytesIO):
        def write(self, data: bytes) -> int:
            if self.tell() > 0:  # room for one line only
                super().write(bytes(data)[:5])
                raise OSError(28, "No space left on device")
            return super().write(data)

    file = FillsUp()
    _append_whole(file, b'{"a": 1}\n')
    with pytest.raises(OSError):
        _append_whole(file, b'{"b": 2}\n')
    assert file.getvalue() == b'{"a": 1}\n'  # no half line for the next append to follow


def test_the_manifest_records_the_sandbox_and_strict_mode_refuses_without_isolation(
    tmp_path, capsys, monkeypatch
):
    from maslab.sandbox import BACKEND_VARIABLE, missing_isolation, protections

    out = tmp_path / "run"
    monkeypatch.setenv(BACKEND_VARIABLE, "none")
    assert run(out, "--strict-sandbox") == 2
    err = capsys.readouterr().err.strip()
    assert "strict sandbox unavailable: no filesystem" in err and "\n" not in err
    assert not out.exists()

    assert run(out) == 0  # without --strict-sandbox the same machine runs, and says how
    recorded = orjson.loads((out / MANIFEST).read_bytes())["sandbox"]
    expected = {"strict": False, "unsafe_no_sandbox": False, "missing": ["filesystem", "network"]}
    assert recorded == {**protections(), **expected} and recorded["backend"] == "none"

    monkeypatch.delenv(BACKEND_VARIABLE)
    if missing_isolation():
        pytest.skip(f"no full isolation here: {missing_isolation()}")
    strict = tmp_path / "strict"
    assert run(strict, "--strict-sandbox") == 0
    recorded = orjson.loads((strict / MANIFEST).read_bytes())["sandbox"]
    assert recorded["strict"] and recorded["filesystem"] and recorded["proc"]
