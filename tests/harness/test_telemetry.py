"""``--otel``: a run's spans through the SDK's in-memory exporter: one for the run, one per
sample inside it, one per model call inside its sample with the GenAI attributes and maslab's,
one per tool call; and nothing recorded, at no cost, while export is off."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

import maslab
from maslab import telemetry
from maslab.cli import main

sdk = pytest.importorskip("opentelemetry.sdk.trace.export")
memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")


@pytest.fixture
def spans() -> Iterator[memory.InMemorySpanExporter]:
    exporter = memory.InMemorySpanExporter()
    telemetry.enable(sdk.SimpleSpanProcessor(exporter))
    yield exporter
    telemetry.disable()


def test_a_run_its_samples_and_their_calls_are_nested_spans(spans, tmp_path):
    run = maslab.evaluate("llm_debate", "arith", "scripted:echo", limit=2, out=tmp_path / "run",
                          cache=False, progress=False)  # fmt: skip
    found = spans.get_finished_spans()
    [whole] = [s for s in found if s.name == "maslab run llm_debate arith"]
    samples = [s for s in found if s.name.startswith("maslab sample ")]
    calls = [s for s in found if s.name == "chat scripted:echo"]
    assert whole.attributes["maslab.method"] == "llm_debate"
    assert whole.attributes["gen_ai.request.model"] == "scripted:echo"
    assert len(samples) == 2 and all(s.parent.span_id == whole.context.span_id for s in samples)
    assert {s.attributes["maslab.task"] for s in samples} == {r.task_id for r in run.records}
    assert len(calls) == sum(r.usage["calls"] for r in run.records) == 12
    by_sample = {s.context.span_id: s.attributes["maslab.task"] for s in samples}
    for call in calls:
        assert by_sample[call.parent.span_id] == call.attributes["maslab.task"]
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.usage.input_tokens"] > 0
        assert call.attributes["gen_ai.response.finish_reasons"] == ("stop",)
        assert call.attributes["maslab.agent"].startswith("debater_")
    assert {c.attributes["maslab.round"] for c in calls} == {0, 1}


def test_a_tool_call_is_a_span(spans):
    from maslab.core.context import Context
    from maslab.core.environment import Environment

    class Echo(Environment):
        def functions(self, turn: int) -> list[dict]:
            return []

        def execute(self, name: str, arguments: dict) -> str:
            return str(arguments)

    ctx = Context("scripted:echo", sample_id="t", environment=Echo())
    ctx.call_tool("agent", "look", {"x": 1})
    [span] = spans.get_finished_spans()
    assert span.name == "execute_tool look"
    assert span.attributes["gen_ai.tool.name"] == "look"
    assert span.attributes["maslab.tool_error"] is False


def test_off_by_default_nothing_is_recorded(tmp_path):
    assert not telemetry.enabled()
    with telemetry.span("anything", {"a": 1}) as span:
        assert span is None


def test_run_otel_sends_the_spans_to_the_collector_the_environment_names(tmp_path, monkeypatch):
    trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    received: list[bytes] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
    try:
        assert main(["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2",
                     "--model", "scripted:echo", "--out", str(tmp_path / "run"), "--no-cache",
                     "--quiet", "--otel"]) == 0  # fmt: skip
    finally:
        telemetry.disable()  # flushes, as the process's exit would
        server.shutdown()
    names = []
    for body in received:
        request = trace_service.ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                names += [span.name for span in scope.spans]
    assert sorted(names) == sorted(
        ["maslab run vanilla arith", *(f"maslab sample arith-test-000{i}" for i in (0, 1)),
         "chat scripted:echo", "chat scripted:echo"]
    )  # fmt: skip
