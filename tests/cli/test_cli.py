"""The maslab command end to end, with the scripted model and the fake HTTP server."""

from __future__ import annotations

import io
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from helpers import lines, run_cli
from holding import AnswerThenHold
from rich.console import Console

from maslab.analysis.stats import summarize
from maslab.bench.evaluation import Score
from maslab.cli import main
from maslab.harness.progress import RunProgress
from maslab.store.run_store import ResultRecord, RunStore
from maslab.testing.fake_server import FakeOpenAIServer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
ROOT = Path(__file__).parents[2]
GSM8K = FIXTURES / "gsm8k_small.jsonl"
SCRIPT = FIXTURES / "answers.yaml"


def vanilla_command(
    data: Path, server: FakeOpenAIServer, out: Path, *, concurrency: int
) -> list[str]:
    """``maslab run`` of vanilla on ``data`` against the fake ``server``, as a user types it."""
    return [
        sys.executable, "-m", "maslab.cli", "run", "--method", "vanilla", "--benchmark", "gsm8k",
        "--data", str(data), "--no-cache", "--quiet", "--model", f"openai:fake@{server.base_url}",
        "--out", str(out), "--concurrency", str(concurrency),
    ]  # fmt: skip


def gsm8k_run(out: Path, *extra: str) -> int:
    return run_cli(
        "run", "--method", "llm_debate", "--benchmark", "gsm8k", "--data", GSM8K,
        "--model", f"scripted:{SCRIPT}", "--out", out, "--no-cache", "--quiet", *extra,
    )  # fmt: skip


def test_run_writes_results_traces_and_manifest_then_report(tmp_path, capsys):
    out = tmp_path / "run"
    assert gsm8k_run(out) == 0
    results = lines(out / "results.jsonl")
    assert [r["task_id"] for r in results] == [f"test-{i}" for i in range(5)] or len(results) == 5
    by_gold = {r["gold"]: r for r in results}
    assert set(by_gold) == {"14", "2400", "90", "260", "37"}
    assert by_gold["14"]["score"]["correct"] and by_gold["2400"]["score"]["correct"]
    assert not by_gold["90"]["score"]["correct"]
    assert by_gold["260"]["score"]["extracted"] is None  # unparsed, still in the denominator
    assert all(r["usage"]["calls"] == 6 for r in results)
    traces = lines(out / "traces.jsonl")
    assert len(traces) == 5 and all(len(t["calls"]) == 6 for t in traces)
    assert traces[0]["topology"]["name"] == "complete"
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["method"] == "llm_debate" and manifest["benchmark"] == "gsm8k"
    assert manifest["method_config"] == {
        "preset": None,
        "agents": 3,
        "rounds": 2,
        "aggregate": "majority",
    }
    printed = capsys.readouterr().out
    assert "accuracy 60.0%" in printed

    report = tmp_path / "report.html"
    assert run_cli("report", out, "-o", report) == 0
    html = report.read_text()
    assert "llm_debate" in html and "60.0" in html and '<svg class="topology"' in html


def test_rerun_of_a_finished_run_does_nothing(tmp_path):
    out = tmp_path / "run"
    assert gsm8k_run(out, "--limit", "2") == 0
    first = (out / "results.jsonl").read_bytes()
    assert gsm8k_run(out, "--limit", "2") == 0
    assert (out / "results.jsonl").read_bytes() == first
    assert gsm8k_run(out, "--limit", "4") == 0  # a larger limit extends the same run
    assert len(lines(out / "results.jsonl")) == 4


def test_config_overrides_reach_the_method(tmp_path):
    out = tmp_path / "run"
    assert gsm8k_run(out, "--config", "agents=2", "--config", "rounds=1", "--limit", "1") == 0
    assert lines(out / "results.jsonl")[0]["usage"]["calls"] == 2


@pytest.mark.system
def test_sigkilled_run_resumes_without_duplicates_or_repeated_requests(tmp_path):
    out = tmp_path / "run"
    data = tmp_path / "gsm8k.jsonl"
    rows = lines(GSM8K)
    questions = [f"{rows[i % 5]['question']} (variant {i})" for i in range(12)]
    data.write_bytes(
        b"".join(
            orjson.dumps({**rows[i % 5], "question": q}) + b"\n" for i, q in enumerate(questions)
        )
    )
    # four answers, then the server holds the requests: the kill lands mid-run however late
    latency = AnswerThenHold(4)
    with FakeOpenAIServer(lambda r: "The answer is 14.", latency=latency) as server:
        command = vanilla_command(data, server, out, concurrency=2)
        process = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + 120  # a guard against a hang
        while time.monotonic() < deadline:
            if (out / "results.jsonl").exists() and len(lines(out / "results.jsonl")) >= 4:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        finished = {r["task_id"] for r in lines(out / "results.jsonl")}
        assert len(finished) == 4
        latency.release()
        before = len(server.request_log)
        subprocess.run(command, check=True, timeout=60)
        results = lines(out / "results.jsonl")
        assert sorted(r["task_id"] for r in results) == sorted({r["task_id"] for r in results})
        assert len(results) == 12
        assert len(list(RunStore(out).traces())) == 12
        asked = [e["body"]["messages"][-1]["content"] for e in server.request_log[before:]]
        assert len(asked) == 12 - len(finished)
        done_questions = [q for i, q in enumerate(questions) if f"test-{i}" in finished]
        assert not any(q in prompt for q in done_questions for prompt in asked)


def test_sweep_runs_every_cell(tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'sweep'}\n"
        f"models: ['scripted:{SCRIPT}']\n"
        "methods: [vanilla, {name: llm_debate, config: {agents: 2, rounds: 1}, label: debate2}]\n"
        f"benchmarks: [{{name: gsm8k, data: '{GSM8K}'}}]\n"
        "limit: 3\ncache: false\n"
    )
    assert run_cli("sweep", sweep, "--quiet") == 0
    runs = sorted(p.parent for p in (tmp_path / "sweep").rglob("results.jsonl"))
    assert [p.parts[-2] for p in runs] == ["debate2", "vanilla"]
    assert all(len(lines(p / "results.jsonl")) == 3 for p in runs)


def test_show_prints_the_table_and_a_transcript(tmp_path, capsys):
    out = tmp_path / "run"
    gsm8k_run(out, "--limit", "2")
    capsys.readouterr()
    assert run_cli("show", out) == 0
    table = capsys.readouterr().out
    assert "test-0" in table and "14" in table
    assert run_cli("show", out, "test-0") == 0
    transcript = capsys.readouterr().out
    assert "debater_1" in transcript and "round 1" in transcript and "correct" in transcript


def test_list_commands(capsys):
    for what, expected in [("methods", "llm_debate"), ("benchmarks", "gsm8k"),
                           ("evaluators", "numeric"), ("models", "openai:<name>")]:  # fmt: skip
        assert run_cli("list", what) == 0
        assert expected in capsys.readouterr().out


def test_list_methods_brief_is_one_line_per_method_name_and_category(capsys, monkeypatch):
    from maslab.cli.console import console
    from maslab.core.method import get_method, list_methods
    from maslab.plugins import origin

    monkeypatch.setattr(console, "width", 200)
    assert run_cli("list", "methods", "--brief") == 0
    listed = [line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines()]
    assert [name for name, _ in listed] == list_methods()
    bundled = [(name, text) for name, text in listed if origin(get_method(name)) == "bundled"]
    assert len(bundled) >= 40 and all(text.strip() == get_method(n).category for n, text in bundled)


def test_agreement_and_compare(tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    gsm8k_run(a)
    run_cli("run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", GSM8K,
            "--model", f"scripted:{SCRIPT}", "--out", b, "--no-cache", "--quiet")  # fmt: skip
    capsys.readouterr()
    assert run_cli("agreement", a, "numeric", "exact") == 0
    assert "numeric" in capsys.readouterr().out
    assert run_cli("compare", a, b) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == [
        f"A: llm_debate · scripted:{SCRIPT} · a",
        f"B: vanilla · scripted:{SCRIPT} · b",
    ]
    assert "A − B = " in printed[2] and "McNemar p = " in printed[2]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--benchmark", "gsm8kk"], "unknown benchmark 'gsm8kk'; did you mean gsm8k"),
        (["--method", "debate"], "unknown method 'debate'; did you mean llm_debate"),
        (["--evaluator", "numerc"], "unknown evaluator 'numerc'; did you mean numeric"),
        (["--data", "missing.jsonl"], "missing.jsonl: file not found"),
        (["--model", "gpt-4o"], "needs a provider prefix"),
        (["--method", "llm_debate", "--config", "agents=0"], "greater than or equal to 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, expected):
    base = ["--method", "vanilla", "--benchmark", "gsm8k", "--data", GSM8K,
            "--model", f"scripted:{SCRIPT}", "--out", tmp_path / "o", "--quiet"]  # fmt: skip
    assert run_cli("run", *base, *args) == 2  # argparse: the later option wins
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err and "Traceback" not in err


def test_wrong_fields_and_unwritable_out(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q?", "solution": "#### 1"}\n')
    assert run_cli("run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", bad,
                   "--model", "scripted:echo", "--quiet", "--no-cache",
                   "--out", tmp_path / "o") == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "answer" in err and str(bad) in err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert gsm8k_run(blocker / "run") == 2
    assert "not writable" in capsys.readouterr().err


def test_invalid_sweep_names_file_line_and_field(tmp_path, capsys):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        "models: ['scripted:echo']\nmethods: [vanilla]\nbenchmarks:\n  - name: gsm8k\n"
        "    limit: none\n"
    )
    assert run_cli("sweep", sweep) == 2
    err = capsys.readouterr().err.strip()
    assert f"{sweep}:5: benchmarks[0].limit:" in err and "\n" not in err
    sweep.write_text("models: ['scripted:echo']\nmethods: [vanilla, debat]\nbenchmarks: [gsm8k]\n")
    assert run_cli("sweep", sweep) == 2
    err = capsys.readouterr().err.strip()
    assert f"{sweep}:2: methods[1]" in err and "unknown method 'debat'" in err


def test_data_import_and_path_and_cache_commands(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    assert run_cli("data", "import", "gsm8k", GSM8K) == 0
    said, imported = capsys.readouterr().out.strip().split(" into ")
    assert said == "imported 5 gsm8k tasks (test split)"
    imported = Path(imported)
    assert imported.is_file() and len(lines(imported)) == 5
    assert run_cli("data", "path", "gsm8k") == 0
    assert Path(capsys.readouterr().out.strip()) == imported
    out = tmp_path / "run"  # no --data: the imported copy is used
    assert run_cli("run", "--method", "vanilla", "--benchmark", "gsm8k", "--quiet",
                   "--model", f"scripted:{SCRIPT}", "--out", out) == 0  # fmt: skip
    assert len(lines(out / "results.jsonl")) == 5
    capsys.readouterr()
    assert run_cli("cache", "stats") == 0
    assert "5 responses" in capsys.readouterr().out
    assert run_cli("cache", "clear") == 0
    assert "removed 5" in capsys.readouterr().out
    typo = tmp_path / "typo.sqlite"
    for action in ("stats", "clear"):
        assert run_cli("cache", action, "--cache", typo) == 2
        assert capsys.readouterr().err.strip() == (
            f"maslab: error: {typo}: no response cache there (a run with the cache on makes one)"
        )
    assert not typo.exists()


def test_repeats_give_pass_at_k_the_spread_and_a_noise_note(tmp_path, capsys):
    draws = random.Random(3)
    golds = ["14", "2400", "90", "260", "37"]  # each task's gold: right one time in five
    with FakeOpenAIServer(lambda r: f"The answer is {draws.choice(golds)}.") as server:
        assert run_cli(
            "run", "--method", "cot", "--benchmark", "gsm8k", "--data", GSM8K,
            "--model", f"openai:fake@{server.base_url}", "--repeats", "4", "--concurrency", "1",
            "--no-cache", "--out", tmp_path / "run", "--quiet",
        ) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "repeats: single-run pass@1" in printed and "pass@4" in printed and "pass^4" in printed
    summary = summarize(RunStore(tmp_path / "run").results())
    assert summary.repeat_spread is not None and summary.repeat_spread[1] > summary.repeat_spread[0]
    assert run_cli("show", tmp_path / "run") == 0
    assert "pass@4" in capsys.readouterr().out
    assert "pass@4" in (tmp_path / "run" / "report.html").read_text()
    assert run_cli("compare", tmp_path / "run", tmp_path / "run") == 0
    printed = capsys.readouterr().out
    assert "5 paired tasks (4 and 4 repeats)" in printed and "permutation test" in printed
    assert "inside the run-to-run noise" in printed


def test_progress_of_a_resumed_run_covers_the_samples_finished_before():
    score = Score(value=1.0, correct=True, extracted="1")
    usage = {"calls": 2, "prompt_tokens": 10, "cached_prompt_tokens": 5}
    before = [
        ResultRecord(task_id=f"t{i}", status="ok", score=score, usage=usage) for i in range(3)
    ]
    progress = RunProgress("run", 6, done=before, console=Console(file=io.StringIO()))
    assert (progress.done, progress.tokens, progress.calls) == (3, 45, 6)
    (bar,) = progress._bar.tasks
    assert bar.completed == 3 and bar.fields["figures"][0][0][0].startswith("acc 100.0% [")


def test_progress_shows_no_accuracy_for_measurements():
    score = Score(value=0.5, correct=False, extracted="0.5", measurement=True)
    done = [ResultRecord(task_id=f"t{i}", status="ok", score=score) for i in range(3)]
    progress = RunProgress("run", 6, done=done, console=Console(file=io.StringIO()))
    (bar,) = progress._bar.tasks
    assert not any(text.startswith("acc") for text, _ in bar.fields["figures"][0])


@pytest.mark.system
def test_a_second_run_on_a_directory_being_written_exits_2_naming_the_holder(tmp_path, capsys):
    """Two processes on one run directory would each run every sample: the second refuses."""
    data, out = tmp_path / "d.jsonl", tmp_path / "run"
    data.write_text(GSM8K.read_text())
    latency = AnswerThenHold(2)
    with FakeOpenAIServer(lambda r: "The answer is 14.", latency=latency) as server:
        command = vanilla_command(data, server, out, concurrency=1)
        first = subprocess.Popen(command)
        try:
            deadline = time.monotonic() + 120  # a guard against a hang
            results = out / "results.jsonl"
            while time.monotonic() < deadline and (not results.exists() or len(lines(results)) < 2):
                time.sleep(0.05)
            assert len(lines(results)) == 2  # the first holds its third call
            before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
            capsys.readouterr()
            assert main(command[3:]) == 2
            printed = capsys.readouterr()
            message = (printed.out + printed.err).strip()
            assert f"being written by another maslab process (pid {first.pid})" in message
            assert len(message.splitlines()) == 1
            assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
        finally:
            first.kill()
            first.wait()


def test_the_guides_offline_sweep_runs_offline(tmp_path, monkeypatch, capsys):
    guide = (ROOT / "docs" / "guide" / "sweep.md").read_text(encoding="utf-8")
    (command,) = [line for line in guide.splitlines() if "--model scripted:echo" in line]
    monkeypatch.chdir(tmp_path)  # its runs go under runs/ here
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))  # no dataset cached
    args = command.split("#")[0].split()[1:]
    args[1] = str(ROOT / args[1])  # examples/sweep.yaml
    assert main([*args, "--quiet"]) == 0, capsys.readouterr().out


def test_emoji_codes_in_printed_text_stay_as_written(capsys):
    from maslab.cli.console import console

    console.print("forms:x: 25.0% with probe:x: and :thumbs_up:", markup=False)
    assert capsys.readouterr().out.strip() == "forms:x: 25.0% with probe:x: and :thumbs_up:"
