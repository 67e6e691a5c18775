"""The run format (:mod:`maslab.store.records`): its records round-trip; every line every
writer writes is exactly what the types describe (a field a writer adds without typing it
fails here); runs written before the format was versioned still read, everywhere; a run of a
newer format is refused in one line."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import Shelf, agent_of
from pydantic import BaseModel
from rich.console import Console

import maslab
from maslab.analysis.attribution import failed
from maslab.bench.benchmark import _BENCHMARKS, register_benchmark
from maslab.benchmarks.arith import Arith
from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, MethodState, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.errors import RequestRejected
from maslab.harness.shard import merge
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import Reply, ScriptedModel
from maslab.llm.types import ChatRequest, FunctionCall
from maslab.report import build_report
from maslab.report.show import show_task
from maslab.store.records import (
    ATTRIBUTIONS,
    FILES,
    FORMAT_VERSION,
    LEARNED_STATE,
    LOCK,
    MANIFEST,
    SCORINGS,
    TRACES,
    FormatTooNew,
    Manifest,
    ResultRecord,
    Trace,
)
from maslab.store.run_store import RunStore
from maslab.store.trace_index import index_path
from maslab.viewer import pages
from maslab.viewer.runs import Run

NOT_RECORDS = {LOCK, index_path(Path(TRACES)).name, "report.html"}
"""The files of a run directory that hold no records (the report is read by people)."""

# --- a run that makes every writer write every part of the format -----------------------------

ADD = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}


def _respond(request: ChatRequest) -> str | Reply:
    agent = agent_of(request)
    if agent == "a":
        if request.messages[-1]["role"] == "tool":
            return "With the tool's help: \\boxed{42}."
        return Reply("Let me add.", (FunctionCall("call_1", "add", '{"a": 40, "b": 2}'),))
    if agent == "c":
        raise RequestRejected("this request is refused", model="probe", status=400)
    if agent == "b":
        return Reply("I agree: \\boxed{42}, and would go on", finish_reason="length")
    return f"{agent} noted it."


@register_method("format_probe")
class FormatProbe(Method):
    """Writes a trace with every part of the format: a topology, a native tool call and the tool
    turn answering it, a failed call, a scoring call, addressed, posted and annotated messages,
    a call on the environment and a refused one; its second task errors; it learns in an
    optimisation step."""

    paper = category = calls = "test only"

    class LearnedState(MethodState):
        seen: list[str]

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.seen: list[str] = []

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        for task in tasks:
            await ctx.agent("learner").reply(task.prompt())
        self.seen = [task.id for task in tasks]

    def learned_state(self) -> FormatProbe.LearnedState:
        return self.LearnedState(seen=self.seen)

    def load_learned_state(self, state: FormatProbe.LearnedState) -> None:
        self.seen = list(state.seen)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        ctx.topology = Topology.complete(["a", "b"])
        a, b = ctx.agent("a"), ctx.agent("b")
        asked = await a.reply(task.prompt(), round=0, recipients=("b",), tools=[ADD])
        [call] = asked.metadata["tool_calls"]
        ctx.post("calculator", "error: add is busy", kind="observation", round=0)
        tool_turn = {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": "42"}
        answered = await ctx.chat([*a.history, tool_turn], agent="a", round=1)
        ctx.post("a", answered.text, round=1, metadata={"via": "tool"})
        with contextlib.suppress(RequestRejected):
            await ctx.chat("refuse this", agent="c", round=1)
        await ctx.chat("is 42 right?", agent="judge", purpose="scoring")
        final = await b.reply(answered.text, round=1)
        if ctx.environment is not None:  # the optimisation step has none
            ctx.call_tool("a", "put", {"key": "sum", "value": "42"})
            ctx.call_tool("b", "take", {"key": "product"})
        if task.id.endswith("1"):
            raise ValueError("the probe fell over")
        return Solution(answer=final.content, metadata={"seen": self.seen})


@pytest.fixture
def probe_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("probe")(
        lambda name, settings: ScriptedModel(_respond, name=f"probe:{name}", native=("tools",))
    )
    _BENCHMARKS.names()
    monkeypatch.setattr(_BENCHMARKS, "_classes", dict(_BENCHMARKS._classes))

    @register_benchmark("arith_on_a_shelf")
    class ArithOnAShelf(Arith):
        """arith, each sample with a shelf to put things on."""

        def environment(self, task: Task) -> Shelf:
            return Shelf()


def _evaluate(out: Path, **options: Any) -> maslab.RunResult:
    options = {"limit": 3, "cache": False, "progress": False, "out": out, **options}
    return maslab.evaluate("format_probe", "arith_on_a_shelf", "probe:x", **options)


# --- what "exactly what the types describe" means ---------------------------------------------


def _extras(value: object, where: str) -> Iterator[str]:
    """The fields that a record (or a record within it) holds beyond its type's."""
    if isinstance(value, BaseModel):
        for name in value.model_extra or {}:
            yield f"{where}.{name}"
        for name in type(value).model_fields:
            yield from _extras(getattr(value, name), f"{where}.{name}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _extras(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _extras(item, f"{where}.{key}")


def assert_exact(model: type[BaseModel], data: bytes, where: str) -> None:
    """``data`` (one line or file) validates strictly as ``model``, holds no field it does not
    type, and is what the record writes back."""
    record = model.model_validate_json(data, strict=True)
    assert not list(_extras(record, where)), f"{where}: untyped fields {list(_extras(record, ''))}"
    written = record.model_dump(mode="json", exclude_unset=True)
    assert written == orjson.loads(data), f"{where}: not what {model.__name__} describes"


def assert_run_conforms(directory: Path) -> dict[str, int]:
    """Every file of the run ``directory`` checked against :data:`FILES`; lines per file."""
    checked = {}
    for path in sorted(directory.iterdir()):
        if path.name in NOT_RECORDS:
            continue
        assert path.name in FILES, f"{path.name}: a file the run format does not define"
        model = FILES[path.name]
        if path.suffix == ".jsonl":
            lines = path.read_bytes().splitlines()
            for number, line in enumerate(lines, 1):
                assert_exact(model, line, f"{path.name}:{number}")
            checked[path.name] = len(lines)
        else:
            assert_exact(model, path.read_bytes(), path.name)
            checked[path.name] = 1
    return checked


def _difference(given: object, kept: object, where: str = "") -> str | None:
    """Where ``kept`` first differs from ``given`` (JSON values); None if nowhere."""
    if isinstance(given, dict) and isinstance(kept, dict):
        for key in given.keys() | kept.keys():
            if key not in kept:
                return f"{where}.{key} untyped"
            if (found := _difference(given.get(key), kept[key], f"{where}.{key}")) is not None:
                return found
        return None
    if isinstance(given, list) and isinstance(kept, list) and len(given) == len(kept):
        for i, (a, b) in enumerate(zip(given, kept, strict=True)):
            if (found := _difference(a, b, f"{where}[{i}]")) is not None:
                return found
        return None
    return None if given == kept else f"{where}: {given!r} kept as {kept!r}"


@dataclass
class Written:
    """What the writers gave the record types (see :func:`written`)."""

    traces: int = 0
    records: int = 0
    dropped: list[str] = field(default_factory=list)
    """What the types dropped of it."""


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> Written:
    """Watches what the writers give the record types and what the types drop of it: each
    trace's fields (as :func:`maslab.harness.samples.trace` gathers them from the ledger, the
    transcript and the topology, before they are checked), and each appended record's."""
    seen = Written()
    validate = Trace.model_validate

    def checked_trace(data: Any, **options: Any) -> Trace:
        trace = validate(data, **options)
        seen.traces += 1
        if (where := _difference(orjson.loads(orjson.dumps(data)), trace.line())) is not None:
            seen.dropped.append(f"trace {trace.key}: {where}")
        return trace

    def checked_record(record: ResultRecord) -> None:
        seen.records += 1
        if extra := set(vars(record)) - set(ResultRecord.model_fields):
            seen.dropped.append(f"record {record.key}: {sorted(extra)}")

    append, append_optimization = RunStore.append, RunStore.append_optimization

    def checked_append(store: RunStore, record: ResultRecord, trace: Trace) -> None:
        checked_record(record)
        append(store, record, trace)

    def checked_optimization(store: RunStore, record: ResultRecord, trace: Trace) -> None:
        checked_record(record)
        append_optimization(store, record, trace)

    monkeypatch.setattr(Trace, "model_validate", checked_trace)
    monkeypatch.setattr(RunStore, "append", checked_append)
    monkeypatch.setattr(RunStore, "append_optimization", checked_optimization)
    return seen


def test_every_line_every_writer_writes_is_exactly_what_the_format_types(
    tmp_path, probe_provider, written
):
    run = _evaluate(tmp_path / "run", optimize_on="dev", optimize_limit=2)
    assert (written.traces, written.records, written.dropped) == (4, 4, [])
    assert [r.status for r in run.records] == ["ok", "error", "ok"]
    attributed = len(failed(run.records))
    assert attributed and main(["attribute", str(run.dir), "--judge-model", "probe:judge"]) == 0
    for evaluator in (["exact"], ["llm_judge", "--judge-model", "probe:judge"]):
        assert main(["score", str(run.dir), "--evaluator", *evaluator]) == 0
    checked = assert_run_conforms(run.dir)
    assert checked == {
        LEARNED_STATE: 1, MANIFEST: 1, "optimize.jsonl": 1, "optimize_traces.jsonl": 1,
        "results.jsonl": 3, TRACES: 3, ATTRIBUTIONS: attributed, SCORINGS: 2 * 2,
    }  # fmt: skip
    assert run.manifest.format_version == FORMAT_VERSION

    # every part of a trace was written, so every part was checked
    trace = next(RunStore(run.dir).traces("arith-test-0000"))
    calls = {call.agent: call for call in reversed(trace.calls)}  # each agent's first
    assert calls["a"].tool_calls[0].name == "add" and calls["c"].error
    assert calls["judge"].purpose == "scoring" and calls["b"].finish_reason == "length"
    turns = [turn for call in trace.calls for turn in call.messages]
    assert any(t.tool_calls for t in turns) and any(t.tool_call_id and t.name for t in turns)
    assert trace.topology is not None and trace.topology.edges
    assert trace.roles == {"a": "a", "b": "b"}  # c calls without an agent
    assert [m.kind for m in trace.messages] == ["message", "observation", "message", "message"]
    assert trace.messages[0].recipients == ("b",) and trace.messages[2].metadata == {"via": "tool"}
    assert trace.answers is not None and len(trace.answers) == len(trace.messages)
    assert [(t.agent, t.name, t.error) for t in trace.tools] == [
        ("a", "put", False), ("b", "take", True),
    ]  # fmt: skip
    assert (run.records[0].tool_calls, run.records[0].tool_errors) == (2, 1)
    [optimization] = RunStore(run.dir).optimizations()
    assert optimization.status == "ok"


def test_a_merge_writes_the_format_too(tmp_path, probe_provider, written):
    shards = [_evaluate(tmp_path / f"s{i}", shard=(i, 2)).dir for i in (1, 2)]
    assert (written.traces, written.dropped) == (3, [])
    merged = merge(shards, tmp_path / "merged")
    assert assert_run_conforms(merged)[TRACES] == 3
    assert RunStore(merged).manifest().format_version == FORMAT_VERSION


# --- round trips -------------------------------------------------------------------------------

FULL_TRACE = {
    "task_id": "t1", "repeat": 2, "prompt": "What is 40 + 2?",
    "calls": [{
        "sample_id": "t1", "agent": "a", "round": 0, "model": "openai:m", "prompt_tokens": 12,
        "completion_tokens": 5, "latency_s": 0.5, "cached": True, "estimated": True,
        "error": None, "draw": 1, "purpose": "method",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 40 + 2?", "name": "asker"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}},
            ]},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
        ],
        "response": "42", "finish_reason": "stop",
        "tool_calls": [{"id": "c2", "name": "done", "arguments": '{"x": 1}'}], "attempts": 3,
    }],
    "program_calls_refused": 1, "program_calls_failed": 2,
    "messages": [{"sender": "a", "content": "42", "round": 0, "recipients": ["b"],
                  "kind": "message", "metadata": {"tool_calls": [{"id": "c2"}]}}],
    "topology": {"name": "pair", "nodes": [{"name": "a", "attrs": {"role": "solver"}},
                                           {"name": "b", "attrs": {}}],
                 "edges": [{"source": "a", "target": "b", "attrs": {"weight": 1.5}}]},
    "answers": ["42"],
    "tools": [{"turn": 1, "agent": "a", "name": "put", "arguments": {"key": "k", "value": 1},
               "result": "error: full", "error": True, "duration_s": 0.001}],
}  # fmt: skip


def test_a_trace_with_every_field_round_trips():
    trace = Trace.model_validate(FULL_TRACE)
    assert trace.line() == FULL_TRACE
    line = orjson.dumps(trace.line())
    assert line.startswith(b'{"task_id":"t1","repeat":2,')  # what the trace index reads
    assert Trace.model_validate_json(line) == trace
    assert_exact(Trace, line, "the trace")
    assert trace.calls[0].tokens == 17 and trace.key == ("t1", 2)
    assert (
        Topology.from_dict(orjson.loads(trace.topology.as_json())).to_dict()
        == (FULL_TRACE["topology"])
    )


def test_records_round_trip_through_a_run_directory(tmp_path):
    manifest = Manifest(method="m", benchmark="b", model="scripted:echo", evaluator="numeric",
                        task_ids=["t1"], repeats=3, shard=(1, 2))  # fmt: skip
    record = ResultRecord.model_validate(
        {"task_id": "t1", "repeat": 2, "status": "ok", "answer": "42", "gold": "42",
         "score": {"value": 1.0, "correct": True, "extracted": "42", "details": {"k": [1]}},
         "usage": {"calls": 1.0}, "usage_by_model": {"m": {"calls": 1.0}},
         "signals": {"retries": 2.0}, "metadata": {"why": "because"}, "elapsed_s": 0.25,
         "tool_calls": 3, "tool_errors": 1}
    )  # fmt: skip
    trace = Trace.model_validate(FULL_TRACE)
    store = RunStore(tmp_path)
    store.open(manifest)
    store.append(record, trace)
    store.append_optimization(record.model_copy(update={"task_id": "optimize"}), trace)
    store.close()
    store.write_learned_state({"seen": ["t0"]}, method="m", split="dev", tasks=1)

    assert store.manifest() == manifest and manifest.format_version == FORMAT_VERSION
    assert store.results() == [record] and list(store.traces()) == [trace]
    assert store.optimizations()[0].task_id == "optimize"
    assert store.learned_state() == (True, {"seen": ["t0"]})
    assert_run_conforms(tmp_path)


# --- runs written before the format was versioned ----------------------------------------------

# As the first maslab wrote them (issue 1): no format_version, no task_ids, no usage by model,
# no signals; calls without attempts, purpose, finish_reason or tool_calls; no answers; no
# traces.idx. Each line is orjson.dumps of the dict, as that writer's.
OLDEST_MANIFEST = {
    "method": "llm_debate", "method_config": {"agents": 2, "rounds": 2}, "benchmark": "arith",
    "split": "test", "limit": 2, "seed": 0, "data": None, "dataset_hash": "9f2c1e", "tasks": 2,
    "model": "scripted:echo", "sampling": {"temperature": 0.7}, "repeats": 1,
    "evaluator": "numeric", "budget": {}, "created": "2026-11-21T12:00:00+00:00",
    "maslab_version": "0.1.0", "git_commit": None, "python": "3.11.7",
}  # fmt: skip
USAGE = {"calls": 4, "cached_calls": 0, "failed_calls": 0, "prompt_tokens": 120,
         "completion_tokens": 40, "cached_prompt_tokens": 0, "cached_completion_tokens": 0,
         "latency_s": 0.0}  # fmt: skip


def _oldest_result(task: str, extracted: str, correct: bool) -> dict[str, Any]:
    return {
        "task_id": task, "repeat": 0, "status": "ok", "answer": f"The answer is {extracted}.",
        "gold": "42", "usage": USAGE, "elapsed_s": 0.02, "error": None, "metadata": {},
        "score": {"value": float(correct), "correct": correct, "extracted": extracted,
                  "explanation": "" if correct else f"expected '42', got '{extracted}'"},
    }  # fmt: skip


def _oldest_trace(task: str, said: Sequence[str]) -> dict[str, Any]:
    """A debate of two agents over two rounds; ``said`` is each of their four messages."""
    calls, messages = [], []
    for i, text in enumerate(said):
        agent, round_ = f"debater_{i % 2 + 1}", i // 2
        calls.append({
            "sample_id": task, "agent": agent, "round": round_, "model": "scripted:echo",
            "prompt_tokens": 30, "completion_tokens": 10, "latency_s": 0.0, "cached": False,
            "error": None, "draw": 0, "messages": [{"role": "user", "content": "What is 6*7?"}],
            "response": text,
        })  # fmt: skip
        messages.append({"sender": agent, "content": text, "round": round_, "recipients": None,
                         "kind": "message", "metadata": {}})  # fmt: skip
    topology = {
        "name": "complete",
        "nodes": [{"name": "debater_1", "attrs": {}}, {"name": "debater_2", "attrs": {}}],
        "edges": [{"source": "debater_1", "target": "debater_2", "attrs": {}},
                  {"source": "debater_2", "target": "debater_1", "attrs": {}}],
    }  # fmt: skip
    return {"task_id": task, "repeat": 0, "prompt": "What is 6*7?", "calls": calls,
            "messages": messages, "topology": topology}  # fmt: skip


LOOPING = "I keep coming back to the same sum and the answer is 41."


def _write_lines(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))


def oldest_run(directory: Path) -> Path:
    """Task a debated its way to 42 (right); task b's debater_1 repeated itself, 41 (wrong)."""
    directory.mkdir()
    (directory / MANIFEST).write_bytes(orjson.dumps(OLDEST_MANIFEST, option=orjson.OPT_INDENT_2))
    _write_lines(
        directory / "results.jsonl",
        [_oldest_result("a", "42", True), _oldest_result("b", "41", False)],
    )
    _write_lines(
        directory / TRACES,
        [
            _oldest_trace("a", ["I say 40.", "I say 42.", "Agreed, it is 42.", "Yes, 42."]),
            _oldest_trace("b", [LOOPING, "Perhaps 41.", LOOPING, "Then 41."]),
        ],
    )
    return directory


def last_unversioned_run(directory: Path) -> Path:
    """The oldest run as the last maslab before the version wrote it: the same lines with the
    fields added since (answers, attempts, signals, task_ids, ...), still no format_version."""
    oldest_run(directory)
    manifest = {**OLDEST_MANIFEST, "task_ids": ["a", "b"], "model_roles": {}, "native": True,
                "benchmark_options": {}, "evaluator_options": {}, "optimize": {}, "shard": None,
                "concurrency": 8, "endpoint_caps": {}, "sandbox": {}, "merged_from": None,
                "missing_shards": []}  # fmt: skip
    (directory / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    results = [
        orjson.loads(line) for line in (directory / "results.jsonl").read_bytes().splitlines()
    ]
    for row in results:
        repeated = float(row["task_id"] == "b")  # as the writer stored them: each signal's value
        signals = {"unparsed": 0.0, "budget_stop": 0.0, "errors": 0.0, "repetition": repeated}
        row.update(usage_by_model={"scripted:echo": USAGE}, scoring_usage={}, signals=signals)
    _write_lines(directory / "results.jsonl", results)
    traces = [orjson.loads(line) for line in (directory / TRACES).read_bytes().splitlines()]
    for row in traces:
        for call in row["calls"]:
            call.update(estimated=False, purpose="method", finish_reason="stop", tool_calls=[],
                        attempts=1)  # fmt: skip
        row.update(program_calls_refused=0, program_calls_failed=0)
        row["answers"] = [text.rstrip(".").split()[-1] for text in
                          (m["content"] for m in row["messages"])]  # fmt: skip
    _write_lines(directory / TRACES, traces)
    return directory


@pytest.mark.parametrize("written", [oldest_run, last_unversioned_run])
def test_a_run_written_before_the_format_was_versioned_still_reads(tmp_path, capsys, written):
    run_dir = written(tmp_path / "old")
    run = maslab.load_run(run_dir)
    assert run.manifest.format_version == 0
    assert [(r.task_id, r.correct) for r in run.records] == [("a", True), ("b", False)]
    assert run.accuracy == 0.5

    [trace] = RunStore(run_dir).traces("b")
    assert [call.attempts for call in trace.calls] == [1] * 4  # each absent field: its default
    assert trace.calls[0].purpose == "method" and trace.program_calls_refused == 0

    assert main(["show", str(run_dir)]) == 0
    assert "llm_debate" in capsys.readouterr().out
    console = Console(file=io.StringIO(), width=120)
    show_task(RunStore(run_dir), "b", 0, console)
    assert LOOPING in console.file.getvalue()

    assert main(["triage", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "b" in out and "repetition" in out  # computed from the old trace
    if written is oldest_run:
        assert "not computable on 2 of 2 samples" in out  # no answers recorded

    page = build_report([run_dir], tmp_path / "report.html").read_text()
    assert "Agreed, it is 42." in page and "<svg" in page

    viewer_run = Run.open(0, run_dir)
    shown = pages.transcript(viewer_run, viewer_run.records[1], viewer_run.trace(("b", 0)), "", {})
    assert "Perhaps 41." in shown


def test_an_old_run_resumes_into_the_current_format(tmp_path):
    run_dir = last_unversioned_run(tmp_path / "old")
    store = RunStore(run_dir)
    old = store.manifest()
    assert store.open(old.model_copy(update={"format_version": FORMAT_VERSION})) == {
        ("a", 0), ("b", 0),
    }  # fmt: skip
    store.close()
    assert orjson.loads((run_dir / MANIFEST).read_bytes())["format_version"] == FORMAT_VERSION
    assert [t.task_id for t in store.traces()] == ["a", "b"]  # the older lines, as they were


# --- a newer format ----------------------------------------------------------------------------


def _newer(run_dir: Path) -> Path:
    manifest = orjson.loads((run_dir / MANIFEST).read_bytes())
    manifest["format_version"] = FORMAT_VERSION + 1
    (run_dir / MANIFEST).write_bytes(orjson.dumps(manifest))
    return run_dir


def test_a_run_of_a_newer_format_is_refused_in_one_line(tmp_path, capsys):
    run_dir = _newer(last_unversioned_run(tmp_path / "new"))
    newer = f"run format {FORMAT_VERSION + 1}"
    with pytest.raises(FormatTooNew, match=f"written by a newer maslab \\({newer}; maslab"):
        maslab.load_run(run_dir)
    report = ["report", run_dir, "-o", tmp_path / "r.html"]
    for command in (["show", run_dir], ["show", run_dir, "a"], ["triage", run_dir], report,
                    ["export", run_dir]):  # fmt: skip
        assert main([str(arg) for arg in command]) == 2, command
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "written by a newer maslab" in err, command
    assert not (tmp_path / "r.html").exists()

    store = RunStore(run_dir)
    with pytest.raises(FormatTooNew):  # never appended to, by a resume
        store.open(Manifest.model_validate({**OLDEST_MANIFEST, "task_ids": ["a", "b"]}))
    with pytest.raises(FormatTooNew):  # nor its traces read alone
        list(RunStore(run_dir).traces_of([("a", 0)]))


def test_a_trace_line_that_is_no_trace_is_skipped_with_a_warning(tmp_path, caplog):
    run_dir = oldest_run(tmp_path / "run")
    lines = (run_dir / TRACES).read_bytes().splitlines(keepends=True)
    broken = orjson.loads(lines[1])
    broken["calls"][0]["prompt_tokens"] = "many"
    (run_dir / TRACES).write_bytes(lines[0] + orjson.dumps(broken) + b"\n")
    assert dict(RunStore(run_dir).traces_of([("a", 0), ("b", 0)]))[("b", 0)] is None
    assert "the trace of b repeat 0 skipped: not a trace (calls.0.prompt_tokens" in caplog.text
