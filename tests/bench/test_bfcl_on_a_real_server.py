"""The agentic methods on BFCL against a real server: ``tool_agent``, ``planner_executor`` and
``conductor`` on one task of ``bfcl_single`` and one of ``bfcl_multi_turn``, through
llama-cpp-python's own OpenAI-compatible server with the embedded SmolLM2-135M model and native
tools (``--chat_format chatml-function-calling``; an endpoint with ``tools: true``).

The model is far too small to solve the tasks; what must hold is the protocol. Every sample
finishes and is scored; every token is the server's count; every function call the server
returned is parsed, executed on the sample's environment (or, on declared tools, answered with)
and recorded, in the order the replies made them; every turn of an episode is delivered (up to
a turn that reached the step cap, where ``tool_agent`` ends the episode, as BFCL does). The
methods' step caps are lowered so that the six runs take minutes, not an hour.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_server import ALIAS, llama_server

import maslab
from maslab.kit.parsing import parse_json_object
from maslab.store.records import Trace, TraceCall
from maslab.store.run_store import RunStore

pytestmark = pytest.mark.system

METHODS = {  # the method's config, the completion tokens per call
    "tool_agent": ({"max_steps": 2}, 64),
    "planner_executor": ({"max_steps": 2}, 64),
    "conductor": ({"planner_steps": 1, "specialist_steps": 1}, 256),  # its actions are long
}
BENCHMARKS = ["bfcl_single", "bfcl_multi_turn"]


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An endpoints file naming the server, native tools on (BFCL's wheel first: no server is
    started for tests that would skip)."""
    from maslab.benchmarks.bfcl.wheel import WHEEL

    if not WHEEL.path.is_file():
        pytest.skip("BFCL's wheel is not in the data cache: run `maslab data fetch bfcl`")
    with llama_server("--chat_format", "chatml-function-calling", n_ctx=8192) as url:
        file = tmp_path_factory.mktemp("server") / "endpoints.yaml"
        file.write_text(
            f"smol:\n  - base_url: {url}\n    model: {ALIAS}\n    tools: true\n"
            "    structured_output: json_object\n"
        )
        yield file


def calls_of(reply: TraceCall) -> list[tuple[str, dict[str, Any]]]:
    """The function calls of one reply, as name and arguments (arguments that are no JSON
    object count as none, as the tool loop reads them)."""
    return [(c.name, parse_json_object(c.arguments) or {}) for c in reply.tool_calls]


def native_calls(trace: Trace) -> list[tuple[str, dict[str, Any]]]:
    """The function calls the server returned, in order."""
    return [call for reply in trace.calls for call in calls_of(reply)]


@pytest.mark.parametrize("benchmark", BENCHMARKS)
@pytest.mark.parametrize("method", METHODS)
def test_the_tool_protocol_holds_against_a_real_server(endpoints, tmp_path, method, benchmark):
    run = maslab.evaluate(
        method,
        benchmark,
        "openai:smol",
        endpoints=endpoints,
        config=METHODS[method][0],
        limit=1,
        max_tokens=METHODS[method][1],
        cache=False,
        out=tmp_path / "run",
    )
    (record,) = run.records
    (trace,) = RunStore(run.dir).traces()
    assert record.score is not None, record.error
    failed = [c for c in trace.calls if c.error is not None]
    if record.status == "budget":  # a runaway reply filled the context window: scored all the same
        assert record.metadata["budget"].startswith("context window full")
        assert len(failed) == 1 and failed[0] is trace.calls[-1]
    else:
        assert record.status == "ok" and not failed
    answered = [c for c in trace.calls if c.error is None]
    assert answered and all(c.prompt_tokens > 0 and c.finish_reason for c in answered)
    assert not any(c.estimated for c in answered)  # every count is the server's
    returned = native_calls(trace)
    if method == "tool_agent":  # its first request offers the functions: the model calls one
        assert returned
    if benchmark == "bfcl_multi_turn":
        # every call the server returned ran on the environment, in order, and is counted
        assert [(t.name, t.arguments) for t in trace.tools] == returned
        assert record.tool_calls == len(returned) and record.tool_errors <= len(returned)
        turns = json.loads(record.answer or "")
        delivered = record.metadata["turns_delivered"]
        assert len(turns) > 1 and 1 <= delivered <= len(turns)
        assert all(turn == [] for turn in turns[delivered:])  # no calls at turns not given
        if delivered < len(turns):  # tool_agent ends the episode at a capped turn, as BFCL does
            assert record.metadata["capped"]
        assert [c for turn in turns for c in turn] == [
            {"name": n, "arguments": a} for n, a in returned
        ]
    else:
        # declared tools: nothing runs; the answer is the first reply's calls that made any
        assert not trace.tools and record.tool_calls == 0
        first = next((calls_of(c) for c in trace.calls if c.tool_calls), [])
        assert json.loads(record.answer or "") == [{"name": n, "arguments": a} for n, a in first]
        assert record.score.extracted is not None  # the evaluator read the calls
