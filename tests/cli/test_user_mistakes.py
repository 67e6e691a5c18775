"""User mistakes end in one clear line and a non-zero exit (CLI) or a typed error (Python).

Each CLI row runs ``maslab.cli.main`` in-process and checks the exit status, that stderr is
exactly one line without a traceback, and that it holds the row's key phrase. Placeholders in
argv and file contents: ``{tmp}`` (the test's directory), ``{run}`` (a finished run),
``{empty}`` (a run without results), ``{data}`` and ``{script}`` (the CLI fixtures).
"""

from __future__ import annotations

import asyncio
import errno
import io
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from holding import AnswerThenHold, interruptible
from rich.console import Console

from maslab import ConfigError, Context, get_benchmark, get_method, load_model
from maslab.bench.evaluation import Score
from maslab.cli import main
from maslab.core.method import Method, list_methods
from maslab.harness.progress import RunProgress
from maslab.report.show import show_task
from maslab.sandbox import BACKEND_VARIABLE
from maslab.store.run_store import ResultRecord, RunStore
from maslab.testing.fake_server import FakeOpenAIServer

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
DATA = FIXTURES / "gsm8k_small.jsonl"
SCRIPT = FIXTURES / "answers.yaml"
RUN = (
    "run",
    "--method",
    "vanilla",
    "--benchmark",
    "gsm8k",
    "--data",
    "{data}",
    "--model",
    "scripted:{script}",
    "--out",
    "{tmp}/out",
    "--no-cache",
    "--quiet",
)
ENDPOINTS = "qwen:\n  - base_url: http://127.0.0.1:9/v1\n"
SWEEP = "models: ['scripted:{script}']\nmethods: [vanilla]\nbenchmarks: [gsm8k]\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A finished 2-task run, the same run with other task ids, and one with no results."""
    root = tmp_path_factory.mktemp("runs")
    run = root / "run"
    argv = [a.format(data=DATA, script=SCRIPT, tmp=root) for a in RUN]
    assert main([*argv[:-4], "--out", str(run), "--no-cache", "--quiet", "--limit", "2"]) == 0
    other = root / "other"
    shutil.copytree(run, other)
    rows = [orjson.loads(line) for line in (other / "results.jsonl").read_bytes().splitlines()]
    (other / "results.jsonl").write_bytes(
        b"".join(orjson.dumps({**r, "task_id": "other-" + r["task_id"]}) + b"\n" for r in rows)
    )
    manifest = orjson.loads((other / "manifest.json").read_bytes())
    manifest["task_ids"] = ["other-" + task for task in manifest["task_ids"]]
    (other / "manifest.json").write_bytes(orjson.dumps(manifest))
    empty = root / "empty"
    empty.mkdir()
    shutil.copy(run / "manifest.json", empty / "manifest.json")
    return {"run": run, "other": other, "empty": empty}


def no_datasets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` fails


def disk_full_after_one_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    append = RunStore.append
    written = []

    def full(self: RunStore, result: ResultRecord, trace: dict) -> None:
        if written:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.dir / "results.jsonl"))
        written.append(result)
        append(self, result, trace)

    monkeypatch.setattr(RunStore, "append", full)


def read_only_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    opened = pathlib.Path.open

    def refuse(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if not set(mode) & set("wax+"):
            return opened(self, mode, *args, **kwargs)
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    def no_temporary_file(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(kwargs.get("dir")))

    monkeypatch.setattr(pathlib.Path, "open", refuse)
    monkeypatch.setattr(tempfile, "mkstemp", no_temporary_file)  # atomic writes start there


@dataclass(frozen=True)
class Cli:
    """One command-line mistake and what it must give."""

    argv: tuple[str, ...]
    phrase: str
    status: int = 2
    files: dict[str, str] = field(default_factory=dict)
    patch: Callable[[pytest.MonkeyPatch], None] | None = None
    writes: bool = False  # whether {tmp}/out may exist afterwards


CLI = {
    # compare
    "compare a directory that is not a run": Cli(
        ("compare", "{tmp}", "{run}"), "not a maslab run (no manifest.json)"
    ),
    "compare a file": Cli(
        ("compare", "{tmp}/x.txt", "{run}"), "not a run directory", files={"x.txt": "hi"}
    ),
    "compare a missing directory": Cli(("compare", "{tmp}/nope", "{run}"), "no such run"),
    "compare runs with no shared task": Cli(("compare", "{run}", "{other}"), "share no task"),
    "compare with an empty run": Cli(("compare", "{run}", "{empty}"), "has no results yet"),
    # writing
    "a full disk during a run": Cli(
        (*RUN, "--concurrency", "1"),
        "No space left on device (free some space first); 1 sample saved",
        status=1,
        patch=disk_full_after_one_sample,
        writes=True,
    ),
    "report into a read-only place": Cli(
        ("report", "{run}", "--out", "{tmp}/r.html"),
        "Read-only file system",
        status=1,
        patch=read_only_disk,
    ),
    "report to a path under a file": Cli(
        ("report", "{run}", "-o", "{tmp}/x.txt/r.html"),
        "x.txt is a file, not a directory",
        files={"x.txt": "hi"},
    ),
    "report to a directory": Cli(("report", "{run}", "-o", "{tmp}"), "is a directory; name"),
    "report of a directory that is not a run": Cli(("report", "{tmp}"), "not a maslab run"),
    "report with a malformed prices file": Cli(
        ("report", "{run}", "-o", "{tmp}/r.html", "--prices", "{tmp}/p.yaml"),
        "p.yaml:1: gpt: Input should be a valid tuple",
        files={"p.yaml": "gpt: 3\n"},
    ),
    # data files
    "an empty data file": Cli(
        (*RUN, "--data", "{tmp}/e.jsonl"), "e.jsonl: no records", files={"e.jsonl": ""}
    ),
    "an empty JSON list": Cli(
        (*RUN, "--data", "{tmp}/e.json"), "e.json: no records", files={"e.json": "[]"}
    ),
    "records without a required field": Cli(
        (*RUN, "--data", "{tmp}/d.jsonl"),
        "record 1 (line 3): missing field 'answer'",
        files={"d.jsonl": '\n\n{"question": "q"}\n{"question": "r"}\n'},
    ),
    "a data file that is not JSON": Cli(
        (*RUN, "--data", "{tmp}/d.jsonl"), "d.jsonl:1: invalid JSON", files={"d.jsonl": "no\n"}
    ),
    "a directory as the data file": Cli((*RUN, "--data", "{tmp}"), "is a directory; name a"),
    # values
    "--max-tokens -1": Cli((*RUN, "--max-tokens", "-1"), "--max-tokens: must be at least 1"),
    "--max-tokens 0": Cli((*RUN, "--max-tokens", "0"), "--max-tokens: must be at least 1"),
    "--temperature -3": Cli((*RUN, "--temperature", "-3"), "must be between 0 and 2, got -3"),
    "--temperature 9": Cli((*RUN, "--temperature", "9"), "must be between 0 and 2, got 9"),
    "--limit -1": Cli((*RUN, "--limit", "-1"), "--limit: must be at least 1"),
    "--repeats 0": Cli((*RUN, "--repeats", "0"), "--repeats/--epochs: must be at least 1"),
    "--concurrency 0": Cli((*RUN, "--concurrency", "0"), "--concurrency: must be at least 1"),
    "--max-sample-seconds 0": Cli((*RUN, "--max-sample-seconds", "0"), "must be above 0"),
    "--seed abc": Cli((*RUN, "--seed", "abc"), "argument --seed: invalid int value"),
    "--config agents=abc": Cli(
        (*RUN, "--method", "llm_debate", "--config", "agents=abc"),
        "llm_debate config: agents: Input should be a valid integer",
    ),
    "an unknown config key": Cli((*RUN, "--config", "agnets=3"), "agnets: Extra inputs"),
    "an agent temperature of 5": Cli(
        (*RUN, "--method", "relay", "--model-role", "strong.temperature=5"),
        "model_roles.strong: temperature: Input should be less than or equal to 2",
    ),
    "an unknown provider for one agent": Cli(
        (*RUN, "--method", "relay", "--model-role", "strong=nope:x"),
        "unknown model provider 'nope' in 'nope:x'",
    ),
    "a misspelt model role": Cli(
        (*RUN, "--method", "mad", "--model-role", "jduge=scripted:echo"),
        "mad has no role or agent 'jduge'; did you mean judge? roles: affirmative, negative, "
        "moderator, judge",
    ),
    "a model role without a model": Cli(
        (*RUN, "--model-role", "solver"), "--model-role: 'solver' is not NAME=MODEL"
    ),
    "--out is a file": Cli((*RUN, "--out", "{tmp}/x.txt"), "--out", files={"x.txt": "hi"}),
    # names
    "an unknown method": Cli((*RUN, "--method", "debat"), "unknown method 'debat'"),
    "an unknown benchmark": Cli((*RUN, "--benchmark", "gsm9k"), "unknown benchmark 'gsm9k'"),
    "an unknown evaluator": Cli((*RUN, "--evaluator", "numerc"), "did you mean numeric"),
    "a model without a provider": Cli((*RUN, "--model", "gpt-4o"), "needs a provider prefix"),
    # endpoints
    "an alias typo with an endpoints file": Cli(
        (*RUN, "--model", "openai:qwn", "--endpoints", "{tmp}/e.yaml"),
        "'openai:qwn' is not in the endpoints file; did you mean qwen?",
        files={"e.yaml": ENDPOINTS},
    ),
    "a malformed endpoints file": Cli(
        (*RUN, "--endpoints", "{tmp}/e.yaml"), "e.yaml:2: invalid YAML", files={"e.yaml": "a: [\n"}
    ),
    "an endpoint whose timeout is infinite": Cli(
        (*RUN, "--model", "openai:qwen", "--endpoints", "{tmp}/e.yaml"),
        "e.yaml:3: qwen[0].timeout: Input should be a finite number",
        files={"e.yaml": f"{ENDPOINTS}    timeout: .inf\n"},
    ),
    "a model spec that names no model": Cli(
        (*RUN, "--model", "openai:"), "model spec 'openai:' names no model after 'openai:'"
    ),
    "an endpoints file that is a list": Cli(
        ("list", "models", "--endpoints", "{tmp}/e.yaml"),
        "e.yaml:1: Input should be a valid",
        files={"e.yaml": "- a\n"},
    ),
    # judges
    "agreement with llm_judge and no judge": Cli(
        ("agreement", "{run}", "numeric", "llm_judge"), "llm_judge needs a judge model"
    ),
    "agreement on a run without results": Cli(
        ("agreement", "{empty}", "numeric", "exact"), "no answers to score"
    ),
    "run with llm_judge and no judge": Cli(
        (*RUN, "--evaluator", "llm_judge"), "llm_judge needs a judge model"
    ),
    "a judge model for an evaluator without one": Cli(
        (*RUN, "--judge-model", "scripted:echo"), "not for numeric"
    ),
    # show
    "show a task that does not exist": Cli(
        ("show", "{run}", "tset-0"), "no task 'tset-0'; did you mean test-0"
    ),
    "show a repeat that does not exist": Cli(
        ("show", "{run}", "test-0", "--repeat", "3"), "has no repeat 3; it has 0"
    ),
    "show a negative repeat": Cli(("show", "{run}", "test-0", "--repeat", "-1"), "at least 0"),
    "show a file": Cli(("show", "{run}/results.jsonl"), "not a run directory"),
    # sweeps
    "a malformed sweep file": Cli(
        ("sweep", "{tmp}/s.yaml"), "s.yaml:2: invalid YAML", files={"s.yaml": "models: [\n"}
    ),
    "a sweep with llm_judge and no judge": Cli(
        ("sweep", "{tmp}/s.yaml"),
        "llm_judge needs a judge model",
        files={"s.yaml": SWEEP + "evaluator: llm_judge\n"},
    ),
    "a sweep with a bad sampling key": Cli(
        ("sweep", "{tmp}/s.yaml"),
        "s.yaml:4: sampling: max_tokens: Input should be greater",
        files={"s.yaml": SWEEP + "sampling: {max_tokens: -1}\n"},
    ),
    "a sweep with an alias typo": Cli(
        ("sweep", "{tmp}/s.yaml"),
        "models: model 'openai:qwn' is not in the endpoints file",
        files={
            "e.yaml": ENDPOINTS,
            "s.yaml": "endpoints: {tmp}/e.yaml\nmodels: [openai:qwn]\n"
            "methods: [vanilla]\nbenchmarks: [gsm8k]\n",
        },
    ),
    "a sweep --only term that is not KEY=GLOB": Cli(
        ("sweep", "{tmp}/s.yaml", "--only", "colour=red"),
        "'colour=red' is not KEY=GLOB with KEY one of method, benchmark, model",
        files={"s.yaml": SWEEP},
    ),
    "a sweep --only that matches no cell": Cli(
        ("sweep", "{tmp}/s.yaml", "--only", "method=debate"),
        "--only method=debate matches no cell; the cells: gsm8k/vanilla/scripted:",
        files={"s.yaml": SWEEP},
    ),
    "a sweep --model with an unknown provider": Cli(
        ("sweep", "{tmp}/s.yaml", "--model", "opena:gpt-4o"),
        "unknown model provider 'opena' in 'opena:gpt-4o'; did you mean 'openai'?",
        files={"s.yaml": SWEEP},
    ),
    "a sweep none of whose cells can start": Cli(
        ("sweep", "{tmp}/s.yaml", "--quiet"),
        "s.yaml could start; the table above says why",
        files={"s.yaml": SWEEP},
        patch=no_datasets,
    ),
    # --import
    "--import of a file that does not exist": Cli(
        ("list", "methods", "--import", "{tmp}/nope.py"), "nope.py: file not found"
    ),
    "--import of a module that does not exist": Cli(
        (*RUN, "--import", "no_such_module_xyz"),
        "--import no_such_module_xyz: ModuleNotFoundError: No module named 'no_such_module_xyz'",
    ),
    "--import of a file that raises": Cli(
        ("sweep", "{tmp}/s.yaml", "--import", "{tmp}/raises.py"),
        "raises.py: RuntimeError: boom",
        files={"s.yaml": SWEEP, "raises.py": "raise RuntimeError('boom')\n"},
    ),
    "--import of a file with a syntax error": Cli(
        ("list", "methods", "--import", "{tmp}/broken.py"),
        "broken.py: SyntaxError: invalid syntax (broken.py, line 1)",
        files={"broken.py": "def (\n"},
    ),
    # data commands
    "data fetch without the hf extra": Cli(
        ("data", "fetch", "gsm8k"),
        "pip install 'maslab[hf]'; or, with the data in a file",
        patch=no_datasets,
    ),
    "data fetch given a FILE": Cli(("data", "fetch", "gsm8k", "x.jsonl"), "takes no FILE"),
    "data import without a FILE": Cli(("data", "import", "gsm8k"), "needs a FILE"),
    "data path of data not fetched": Cli(
        ("data", "path", "gsm8k", "--split", "train"),
        "gsm8k train data is not in the cache",
        status=1,
    ),
    "data path of an unknown benchmark": Cli(("data", "path", "gsm9k"), "unknown benchmark"),
    # cache commands: a mistyped file is not made
    "cache stats of a file that does not exist": Cli(
        ("cache", "stats", "--cache", "{tmp}/out"), "out: no response cache there"
    ),
    "cache clear of a file that does not exist": Cli(
        ("cache", "clear", "--cache", "{tmp}/out"), "out: no response cache there"
    ),
    # the sandbox
    "answer code where it cannot be isolated": Cli(
        (*RUN[:4], "humaneval", "--limit", "1", *RUN[7:]),
        "model-written code cannot run isolated here: no filesystem, network",
        patch=lambda monkeypatch: monkeypatch.setenv(BACKEND_VARIABLE, "none"),
    ),
}


@pytest.mark.parametrize("case", CLI.values(), ids=CLI.keys())
def test_a_cli_mistake_is_one_line(case: Cli, runs, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    places = {"tmp": tmp_path, "data": DATA, "script": SCRIPT, **runs}

    def fill(text: str) -> str:
        for name, value in places.items():
            text = text.replace(f"{{{name}}}", str(value))
        return text

    for name, text in case.files.items():
        (tmp_path / name).write_text(fill(text))
    if case.patch is not None:
        case.patch(monkeypatch)
    assert main([fill(a) for a in case.argv]) == case.status
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and case.phrase in err, err
    assert case.writes or not (tmp_path / "out").exists()


def test_a_run_stopped_by_a_full_disk_resumes_with_nothing_lost(tmp_path, monkeypatch, capsys):
    argv = [a.replace("{data}", str(DATA)).replace("{script}", str(SCRIPT))
            .replace("{tmp}", str(tmp_path)) for a in (*RUN, "--concurrency", "1")]  # fmt: skip
    with monkeypatch.context() as patch:
        disk_full_after_one_sample(patch)
        assert main(argv) == 1
    assert len(RunStore(tmp_path / "out").results()) == 1
    assert main(argv) == 0
    assert len(RunStore(tmp_path / "out").results()) == 5
    assert "accuracy 60.0%" in capsys.readouterr().out


@dataclass(frozen=True)
class Api:
    """One Python API mistake and the typed error it must raise."""

    call: Callable[[], object]
    phrase: str
    error: type[Exception] = ConfigError


API = {
    "a method config that is a number": Api(
        lambda: get_method("llm_debate")(5), "llm_debate config must be a mapping"
    ),
    "a method name that is not a string": Api(lambda: get_method(5), "method name is a string"),
    "an agent temperature out of range": Api(
        lambda: Context("scripted:echo", model_roles={"strong": {"temperature": 5}}),
        "model_roles.strong: temperature",
    ),
    "a model role the method does not have": Api(
        lambda: get_method("llm_debate")(agents=2).run(
            "q", "scripted:echo", model_roles={"debater_3": "scripted:echo"}
        ),
        "roles: debater, aggregator; agents: debater_1, debater_2",
    ),
    "endpoints with a URL for a list": Api(
        lambda: load_model("openai:x", endpoints={"x": "http://a"}),
        "x: Input should be a valid list",
    ),
    "endpoints that are a number": Api(
        lambda: load_model("openai:x", endpoints=5), "endpoints must be a YAML file path"
    ),
    "an alias typo in an endpoints table": Api(
        lambda: load_model("openai:qwn", endpoints={"qwen": [{"base_url": "http://a"}]}),
        "did you mean qwen? known: qwen",
    ),
    "a model spec that is not a string": Api(lambda: load_model(5), "model spec is a string"),
    "a context model that is a number": Api(lambda: Context(123), "Context model must be"),
    "no context model": Api(lambda: Context(None), "Context model must be"),
    "a context budget as a dict": Api(
        lambda: Context("scripted:echo", budget={"max_calls": 1}), "budget must be a Budget"
    ),
    "a context seed as text": Api(
        lambda: Context("scripted:echo", seed="1"), "seed must be an int"
    ),
    "a temperature of 9": Api(
        lambda: Context("scripted:echo", sampling={"temperature": 9}),
        "sampling: temperature: Input should be less than or equal to 2",
    ),
    "max_tokens of -1": Api(
        lambda: Context("scripted:echo", sampling={"max_tokens": -1}), "sampling: max_tokens"
    ),
    "a misspelt sampling key": Api(
        lambda: Context("scripted:echo", sampling={"tempreature": 1}), "tempreature: Extra"
    ),
    "sampling that is not a mapping": Api(
        lambda: Context("scripted:echo", sampling=0.5), "sampling must be a mapping"
    ),
    "a gate that is not a semaphore": Api(
        lambda: Context("scripted:echo", gate=3), "gate must be an asyncio"
    ),
}


@pytest.mark.parametrize("case", API.values(), ids=API.keys())
def test_a_python_mistake_is_a_typed_one_line_error(case: Api):
    with pytest.raises(case.error) as info:
        case.call()
    assert case.phrase in str(info.value) and "\n" not in str(info.value)


def test_empty_data_is_an_error_in_python_too(tmp_path):
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match="no records"):
        get_benchmark("gsm8k")().load(data=empty)


def test_explicit_default_server_bypasses_the_endpoints_file(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    table = {"qwen": [{"base_url": "http://127.0.0.1:8/v1"}]}
    assert load_model("openai:qwen", endpoints=table).name == "openai:qwen"
    assert load_model("openai:gpt-4o@default", endpoints=table).name == "openai:gpt-4o@default"


def test_list_methods_copes_with_a_plugin_without_a_docstring(monkeypatch, capsys):
    from maslab.core import method

    list_methods()  # discover the bundled methods first
    plugin = type("NoDoc", (Method,), {})
    monkeypatch.setitem(method._METHODS._classes, "zz_plugin", plugin)
    assert main(["list", "methods"]) == 0
    assert "zz_plugin" in (out := capsys.readouterr().out) and "(no description)" in out


def test_show_wraps_a_long_question_instead_of_cutting_it(runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs["run"], run)
    words = [f"word{i:03d}" for i in range(60)]
    traces = [orjson.loads(line) for line in (run / "traces.jsonl").read_bytes().splitlines()]
    traces[0]["prompt"] = " ".join(words)
    traces[0]["messages"][0]["content"] = "reply " + " ".join(reversed(words))
    (run / "traces.jsonl").write_bytes(b"".join(orjson.dumps(t) + b"\n" for t in traces))
    console = Console(file=io.StringIO(), width=40, soft_wrap=True)  # as the CLI's console
    show_task(RunStore(run), traces[0]["task_id"], 0, console)
    printed = console.file.getvalue()
    assert all(printed.count(word) == 2 for word in words)
    assert max(len(line) for line in printed.splitlines()) <= 40


def test_progress_keeps_count_elapsed_and_eta_at_80_columns():
    score = Score(value=1.0, correct=True, extracted="1")
    usage = {"calls": 6, "prompt_tokens": 12_345}
    done = [
        ResultRecord(task_id=f"t{i}", status="ok", score=score, usage=usage)
        if i % 9
        else ResultRecord(task_id=f"t{i}", status="error", usage=usage)
        for i in range(300)
    ]
    label = "llm_debate · gsm8k · openai:Qwen/Qwen2.5-72B-Instruct"
    for width in (80, 100, 160):
        console = Console(file=io.StringIO(), width=width)
        progress = RunProgress(label, 1319, done=done, console=console)
        console.print(progress._bar.get_renderable())
        (line,) = console.file.getvalue().splitlines()
        assert "300/1319" in line and "0:00:0" in line and "eta -:--:--" in line, line
        assert "acc 88.7% [" in line and "errors 34" in line, line
    assert label in line and "tokens 3,703,500" in line and "calls 1,800" in line


def maslab(*args: str, **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "maslab.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
        **kwargs,
    )


@pytest.mark.system
@pytest.mark.parametrize(
    ("signum", "name", "status"),
    [(signal.SIGTERM, "SIGTERM", 143), (signal.SIGINT, "Ctrl-C", 130)],
)
def test_a_signal_says_what_was_saved(tmp_path, signum, name, status):
    out = tmp_path / "run"
    # two answers, then 5 s a request: the signal lands mid-run even 15 s late (and the call in
    # flight, which the run waits for, ends by itself)
    latency = AnswerThenHold(2, hold_s=5)
    with FakeOpenAIServer(lambda r: "The answer is 14.", latency=latency) as server:
        process = maslab(
            "run", "--method", "vanilla", "--benchmark", "gsm8k", "--data", str(DATA),
            "--model", f"openai:fake@{server.base_url}", "--out", str(out), "--no-cache",
            "--quiet", "--concurrency", "1",
        )  # fmt: skip
        deadline = time.monotonic() + 120  # a guard against a hang
        while time.monotonic() < deadline and len(RunStore(out).results()) < 2:
            time.sleep(0.05)
        process.send_signal(signum)
        _, err = process.communicate(timeout=30)
    saved = len(RunStore(out).results())
    assert process.returncode == status
    assert err.strip() == (
        f"maslab: interrupted by {name}; {saved} samples saved in {out}; "
        "run the same command again to resume"
    )
    assert 2 <= saved < 5


def test_sigterm_in_the_middle_of_a_task_leaves_no_task_holding_it():
    """A SIGTERM that lands while a task runs (writing a request, say) stops the run from the
    loop: the task is cancelled with the rest, instead of keeping the exception for asyncio to
    print at exit after the one-line message (which a loaded machine made happen)."""
    from maslab.cli import _terminate
    from maslab.cli.console import Terminated

    tasks: list[asyncio.Task] = []

    async def interrupted() -> None:
        _terminate(signal.SIGTERM, None)  # as the handler runs between two of its bytecodes
        await asyncio.sleep(3600)

    async def run() -> None:
        tasks.append(asyncio.ensure_future(interrupted()))
        await tasks[0]

    with pytest.raises(Terminated):
        asyncio.run(run())
    assert tasks[0].cancelled()
    with pytest.raises(Terminated):  # no loop running: at once, as before
        _terminate(signal.SIGTERM, None)


@pytest.mark.system
def test_a_closed_stdout_ends_quietly_with_141():
    process = maslab("list", "methods")
    process.stdout.close()  # the reader is gone before maslab writes
    err = process.stderr.read()
    assert process.wait(timeout=60) == 141 and err == ""
