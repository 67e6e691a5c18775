"""Native model features: tool calls, structured output and logprobs through every layer, and
the endpoint option that says which ones a server has."""

from __future__ import annotations

import orjson
import pytest

from maslab.core.context import Context
from maslab.errors import ConfigError, MalformedResponse, RequestRejected
from maslab.llm.cache import ResponseCache
from maslab.llm.endpoints import Endpoint, load_endpoints
from maslab.llm.openai_compat import completion_from_payload, error_for_status
from maslab.llm.registry import load_model
from maslab.llm.retry import RetryPolicy
from maslab.llm.types import Completion, FunctionCall, TokenLogprob, Usage, make_request
from maslab.testing import FakeOpenAIServer, Reply, ScriptedModel

TRANSPORTS = ["http", "sdk"]
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
JSON_SCHEMA = {
    "type": "json_schema",
    "json_schema": {"name": "a", "schema": SCHEMA, "strict": True},
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}}},
    },
}


def test_tool_turns_survive_make_request_in_the_wire_format():
    call = FunctionCall("call_1", "add", '{"a": 1}').to_wire()
    request = make_request(
        [
            {"role": "user", "content": "add", "junk": 1},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "1"},
        ]
    )
    assert request.messages == (
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "1", "tool_call_id": "call_1"},
    )


def test_the_cache_key_covers_schema_tools_tool_choice_and_logprobs():
    plain = make_request("q", temperature=0)
    other_schema = {
        "type": "json_schema",
        "json_schema": {"name": "a", "schema": {**SCHEMA, "required": []}, "strict": True},
    }
    variants = [
        make_request("q", temperature=0, response_format=JSON_SCHEMA),
        make_request("q", temperature=0, response_format=other_schema),
        make_request("q", temperature=0, response_format={"type": "json_object"}),
        make_request("q", temperature=0, tools=[ADD]),
        make_request("q", temperature=0, tools=[ADD], tool_choice="auto"),
        make_request("q", temperature=0, logprobs=True),
        make_request("q", temperature=0, logprobs=True, top_logprobs=3),
    ]
    keys = {r.fingerprint("m") for r in [plain, *variants]}
    assert len(keys) == len(variants) + 1
    # a request without native features keeps the key it always had
    assert plain.fingerprint("m") == make_request("q", temperature=0).fingerprint("m")
    assert "tools" not in plain.params() and "response_format" not in plain.params()


def test_tool_calls_and_logprobs_are_read_from_a_reply():
    reply = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "add", "arguments": '{"a": 2}'}},
                        {"type": "function", "function": {"name": "neg", "arguments": {"a": 3}}},
                    ],
                },
                "logprobs": {"content": [
                    {"token": "x", "logprob": -0.5, "top_logprobs": [
                        {"token": "x", "logprob": -0.5}, {"token": "y", "logprob": -1.0}]}
                ]},
                "finish_reason": "tool_calls",
            }
        ],
    }  # fmt: skip
    completion = completion_from_payload(reply, "m", 0.0, make_request("q"))
    assert completion.text == "" and completion.finish_reason == "tool_calls"
    assert completion.tool_calls == (
        FunctionCall("c1", "add", '{"a": 2}'),
        FunctionCall("call_1", "neg", '{"a":3}'),
    )
    assert completion.logprobs == (TokenLogprob("x", -0.5, (("x", -0.5), ("y", -1.0))),)
    assert completion.usage.estimated and completion.usage.completion_tokens > 0


@pytest.mark.parametrize("calls", ["add", [{"function": "add"}], [{"function": {"name": 3}}]])
def test_unreadable_tool_calls_are_malformed(calls):
    reply = {"choices": [{"message": {"content": "", "tool_calls": calls}}]}
    with pytest.raises(MalformedResponse, match="tool_calls"):
        completion_from_payload(reply, "m", 0.0, make_request("q"))


def test_a_multi_line_error_body_becomes_a_one_line_message():
    error = error_for_status(500, "1 validation error:\n  {'type': 'literal_error'}\n", "m", None)
    assert "\n" not in str(error) and "1 validation error: {'type'" in str(error)


def test_the_cache_replays_tool_calls_logprobs_and_the_finish_reason(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    completion = Completion(
        "",
        Usage(3, 4),
        "m",
        finish_reason="tool_calls",
        tool_calls=(FunctionCall("c1", "add", "{}"),),
        logprobs=(TokenLogprob("a", -0.1, (("a", -0.1),)),),
    )
    cache.put("k", completion)
    hit = cache.get("k")
    assert hit is not None and hit.cached
    assert (hit.tool_calls, hit.logprobs, hit.finish_reason) == (
        completion.tool_calls,
        completion.logprobs,
        "tool_calls",
    )


def fake_model(server: FakeOpenAIServer, transport: str, **endpoint: object):
    table = {"fake": [Endpoint(base_url=server.base_url, transport=transport, **endpoint)]}
    return load_model("openai:fake", endpoints=table, retry=RetryPolicy(attempts=1))


@pytest.mark.system
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_both_transports_send_native_fields_and_read_tool_calls(transport):
    with FakeOpenAIServer(lambda request: Reply.calling("add", {"a": 2})) as server:
        model = fake_model(server, transport)
        completion = await model.chat(
            "add",
            tools=[ADD],
            tool_choice="auto",
            response_format=JSON_SCHEMA,
            logprobs=True,
            top_logprobs=2,
        )
        body = server.request_log[0]["body"]
        assert body["tools"] == [ADD] and body["tool_choice"] == "auto"
        assert body["response_format"] == JSON_SCHEMA
        assert (body["logprobs"], body["top_logprobs"]) == (True, 2)
        assert completion.tool_calls == (FunctionCall("call_1", "add", '{"a":2}'),)
        assert completion.finish_reason == "tool_calls"
        assert completion.usage.completion_tokens == server.served_completion_tokens > 0
        await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_json_object_endpoint_gets_the_schema_in_llama_cpp_pythons_form(transport):
    with FakeOpenAIServer(['{"answer": "4"}']) as server:
        model = fake_model(server, transport, structured_output="json_object")
        await model.chat("q", response_format=JSON_SCHEMA)
        sent = server.request_log[0]["body"]["response_format"]
        assert sent == {"type": "json_object", "schema": SCHEMA}
        await model.aclose()


def test_capabilities_default_on_for_openai_only(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    openai = load_model("openai:gpt-4o-mini", cache=None)
    assert openai.supports("structured_output") and openai.supports("tools")
    adhoc = load_model("openai:qwen@http://127.0.0.1:9/v1")
    assert not adhoc.supports("structured_output") and not adhoc.supports("tools")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert not load_model("openai:gpt-4o-mini").supports("tools")


def test_the_endpoints_file_sets_capabilities_seen_through_every_layer(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        "vllm:\n"
        "  - base_url: http://127.0.0.1:9/v1\n"
        "    structured_output: true\n"
        "    tools: true\n"
        "llama:\n"
        "  - base_url: http://127.0.0.1:9/v1\n"
        "    structured_output: json_object\n"
        "mixed:\n"
        "  - base_url: http://127.0.0.1:9/v1\n"
        "    tools: true\n"
        "  - base_url: http://127.0.0.1:8/v1\n"
        "openai-off:\n"
        "  - base_url: https://api.openai.com/v1\n"
        "    tools: false\n"
    )
    table = load_endpoints(path)
    cache = tmp_path / "cache.sqlite"
    vllm = load_model("openai:vllm", endpoints=table, cache=cache)  # cache, retry, balancer
    assert vllm.supports("structured_output") and vllm.supports("tools")
    llama = load_model("openai:llama", endpoints=table)
    assert llama.supports("structured_output") and not llama.supports("tools")
    assert not load_model("openai:mixed", endpoints=table).supports("tools")  # not every replica
    off = load_model("openai:openai-off", endpoints=table)
    assert off.supports("structured_output") and not off.supports("tools")


def test_a_bad_capability_value_is_a_config_error(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text("m:\n  - base_url: http://127.0.0.1:9/v1\n    structured_output: sometimes\n")
    with pytest.raises(ConfigError, match="structured_output"):
        load_endpoints(path)


async def test_the_call_record_keeps_the_finish_reason_and_tool_calls():
    model = ScriptedModel([Reply.calling("add", {"a": 1}), Reply("cut", finish_reason="length")])
    ctx = Context(model)
    await ctx.chat("add", tools=[ADD])
    await ctx.chat("more")
    first, second = ctx.ledger.records
    assert first.finish_reason == "tool_calls" and first.tool_calls[0].name == "add"
    assert second.finish_reason == "length" and second.tool_calls == ()
    assert orjson.loads(orjson.dumps(first.to_dict()))["tool_calls"] == [
        {"id": "call_1", "name": "add", "arguments": '{"a":1}'}
    ]


async def test_an_agent_keeps_native_tool_calls_in_its_history_and_message():
    model = ScriptedModel([Reply.calling("add", {"a": 1})], native=["tools"])
    ctx = Context(model)
    agent = ctx.agent("a")
    message = await agent.reply("add one", tools=[ADD])
    assert message.metadata["tool_calls"] == (FunctionCall("call_1", "add", '{"a":1}'),)
    assert agent.history[-1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [FunctionCall("call_1", "add", '{"a":1}').to_wire()],
    }
    assert model.requests[0].tools == (ADD,)
    assert model.supports("tools") and not model.supports("structured_output")


async def test_local_models_reject_tools_they_would_ignore(tmp_path):
    from maslab.llm.local import LocalModel

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    model = LocalModel(str(gguf))
    assert model.supports("structured_output") and not model.supports("tools")
    with pytest.raises(RequestRejected, match="tool_choice naming the function"):
        model._params(make_request("q", tools=[ADD], tool_choice="auto"))
    named = {"type": "function", "function": {"name": "add"}}
    params = model._params(
        make_request("q", tools=[ADD], tool_choice=named, response_format=JSON_SCHEMA)
    )
    assert params["response_format"] == {"type": "json_object", "schema": SCHEMA}


def test_the_report_shows_a_cut_reply_and_tool_calls():
    from maslab.report.call_html import call_html
    from maslab.store.records import TraceCall

    record = TraceCall.model_validate({
        "agent": "a", "response": "", "finish_reason": "length",
        "tool_calls": [{"id": "c", "name": "add", "arguments": '{"a": "<1>"}'}],
    })  # fmt: skip
    html = call_html(record)
    assert "cut at max_tokens" in html
    assert "<b>tool calls</b><pre>add({&quot;a&quot;: &quot;&lt;1&gt;&quot;})" in html
    assert "cut at max_tokens" not in call_html(record.model_copy(update={"finish_reason": "stop"}))
