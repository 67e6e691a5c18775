"""maslab against real OpenAI-compatible servers: llama-cpp-python's own server
(``python -m llama_cpp.server``) on 127.0.0.1 with the embedded SmolLM2-135M GGUF model, through
the ``openai:`` provider on both transports and through ``litellm:``.

What llama-cpp-python's server (0.3.x) does, as these tests pin down:

* structured output only as ``{"type": "json_object", "schema": ...}`` (a grammar); OpenAI's
  ``{"type": "json_schema", ...}`` fails validation, reported as HTTP 500. An endpoint with
  ``structured_output: json_object`` makes maslab send the schema in the first form. The
  grammar lets raw control characters (a newline) into strings, which strict JSON forbids, so
  replies are read with ``strict=False``, as :mod:`maslab.kit.parsing` reads them.
* with the GGUF's own chat template (the default): a tool call only when ``tool_choice`` names
  the function (its arguments held to the schema by a grammar); ``auto`` and ``required`` yield
  plain text. The template renders ``tool`` turns, so a round trip reaches the model.
* with ``--chat_format chatml-function-calling``: ``auto`` tool calls too (``required`` fails
  with HTTP 500), but that template drops ``tool`` turns from the prompt: the model never sees a
  tool's result.
* request validation errors are HTTP 500s; a prompt over the context window is a 400, which
  maslab reads as :class:`~maslab.errors.ContextTooLong`.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from secrets import token_hex
from typing import Any

import aiohttp
import pytest
from llama_server import free_port, llama_server

from maslab.core.context import Context
from maslab.core.task import Task
from maslab.errors import ContextTooLong, LLMConnectionError, ServerError
from maslab.evaluators.llm_judge import LLMJudgeEvaluator
from maslab.kit.structured import json_params
from maslab.llm.endpoints import Endpoint
from maslab.llm.registry import load_model
from maslab.llm.retry import RetryPolicy

pytestmark = pytest.mark.system

TRANSPORTS = ["http", "sdk"]
ONCE = RetryPolicy(attempts=1)
STORY = [{"role": "system", "content": "You are terse."},
         {"role": "user", "content": "Write a long story about a cat."}]  # fmt: skip
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "a + b",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
CALL_ADD = {"type": "function", "function": {"name": "add"}}
CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 24},
        "population": {"type": "integer", "minimum": 0},
    },
    "required": ["city", "population"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The server with the GGUF's own chat template."""
    with llama_server() as url:
        yield url


@pytest.fixture(scope="module")
def function_calling_server() -> Iterator[str]:
    with llama_server("--chat_format", "chatml-function-calling") as url:
        yield url


def model_at(base_url: str, transport: str = "http", retry: RetryPolicy = ONCE, **options: Any):
    endpoint = Endpoint(base_url=base_url, model="smollm2", transport=transport, **options)
    return load_model("openai:smol", endpoints={"smol": [endpoint]}, retry=retry)


async def raw_chat(base_url: str, **body: Any) -> dict[str, Any]:
    """One chat completion straight over HTTP, for comparison."""
    async with aiohttp.ClientSession() as session:
        url = f"{base_url}/chat/completions"
        async with session.post(url, json={"model": "smollm2", **body}) as response:
            assert response.status == 200, await response.text()
            return await response.json()


# -- openai: provider, both transports -----------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_usage_is_what_the_server_reports(server, transport):
    model = model_at(server, transport)
    ctx = Context(model)
    completion = await ctx.chat(STORY, max_tokens=8, temperature=0)
    raw = await raw_chat(server, messages=STORY, max_tokens=8, temperature=0)
    usage = raw["usage"]
    assert not completion.usage.estimated
    assert completion.usage.prompt_tokens == usage["prompt_tokens"] > 10
    assert completion.usage.completion_tokens == usage["completion_tokens"] == 8
    assert completion.finish_reason == raw["choices"][0]["finish_reason"] == "length"
    assert completion.text.strip()
    record = ctx.ledger.records[0]
    assert (record.prompt_tokens, record.completion_tokens) == (usage["prompt_tokens"], 8)
    assert record.finish_reason == "length"
    await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_logprobs_come_back_for_every_token(server, transport):
    model = model_at(server, transport)
    completion = await model.chat("Hi", max_tokens=3, temperature=0, logprobs=True, top_logprobs=2)
    assert completion.logprobs is not None and len(completion.logprobs) == 3
    for token in completion.logprobs:
        assert token.logprob <= 0 and len(token.top) == 2
        assert token.top[0] == (token.token, token.logprob)  # greedy: the likeliest token
    await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_structured_output_is_json_valid_for_the_schema(server, transport):
    model = model_at(server, transport, structured_output="json_object")
    assert model.supports("structured_output") and not model.supports("tools")
    completion = await model.chat(
        "Name a city and its population, as JSON.",
        max_tokens=48,
        temperature=0,
        **json_params(model, "city", CITY),
    )
    value = json.loads(completion.text, strict=False)
    assert set(value) == {"city", "population"}
    assert isinstance(value["city"], str) and len(value["city"]) <= 24
    assert isinstance(value["population"], int) and value["population"] >= 0
    await model.aclose()


async def test_the_json_schema_form_is_a_one_line_server_error_here(server):
    model = model_at(server, structured_output=True)
    with pytest.raises(ServerError) as raised:
        await model.chat("q", max_tokens=4, **json_params(model, "city", CITY))
    message = str(raised.value)
    assert "HTTP 500" in message and "'text' or 'json_object'" in message and "\n" not in message
    await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_named_tool_call_round_trip_reaches_the_model(server, transport):
    model = model_at(server, transport)
    ask = [{"role": "user", "content": "Add 2 and 3."}]
    first = await model.chat(ask, tools=[ADD], tool_choice=CALL_ADD, max_tokens=32, temperature=0)
    assert first.finish_reason == "tool_calls" and first.text == ""
    (call,) = first.tool_calls
    arguments = json.loads(call.arguments)
    assert call.name == "add" and set(arguments) == {"a", "b"}
    assert all(isinstance(v, (int, float)) for v in arguments.values())
    turn = {"role": "assistant", "content": "", "tool_calls": [call.to_wire()]}

    async def answer(result: str):
        result_turn = {"role": "tool", "tool_call_id": call.id, "content": result}
        return await model.chat([*ask, turn, result_turn], max_tokens=8, temperature=0)

    short, long = await answer("5"), await answer("The sum is 5. " * 10)
    assert short.text.strip() and short.finish_reason in ("stop", "length")
    assert long.usage.prompt_tokens > short.usage.prompt_tokens + 20  # the result is in the prompt
    await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_prompt_over_the_context_window_is_rejected_once(server, transport):
    model = model_at(server, transport, retry=RetryPolicy(attempts=3, initial_wait=0))
    with pytest.raises(ContextTooLong) as raised:
        await model.chat("word " * 1200, max_tokens=8)
    error = raised.value
    assert error.status == 400 and error.attempts == 1  # not retried
    assert "maximum context length is 1024 tokens" in str(error) and "\n" not in str(error)
    await model.aclose()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_auto_tool_choice_with_the_function_calling_chat_format(
    function_calling_server, transport
):
    model = model_at(function_calling_server, transport, tools=True)
    assert model.supports("tools")
    completion = await model.chat(
        "Add 2 and 3 with the add function.", tools=[ADD], tool_choice="auto", temperature=0
    )
    assert completion.finish_reason == "tool_calls"
    assert [c.name for c in completion.tool_calls] == ["add"]
    assert set(json.loads(completion.tool_calls[0].arguments)) == {"a", "b"}
    await model.aclose()


async def test_the_judge_uses_structured_output_on_a_real_server(server):
    model = model_at(server, structured_output="json_object")
    ctx = Context(model, sampling={"max_tokens": 16, "seed": 1})
    task = Task(id="t", question="What is 2 + 2?", gold="4")
    score = await LLMJudgeEvaluator(judge=model).score(task, "The answer is 4.", ctx=ctx)
    extract, compare = ctx.ledger.records
    assert extract.purpose == compare.purpose == "scoring" and compare.finish_reason == "stop"
    assert json.loads(compare.response) in ({"verdict": "CORRECT"}, {"verdict": "INCORRECT"})
    assert not score.explanation.startswith("unclear verdict")
    await model.aclose()


# -- litellm: provider ---------------------------------------------------------------------------


@pytest.fixture
def litellm_at(server, monkeypatch):
    """``litellm:openai/smollm2`` pointed at the server (litellm reads these variables)."""
    if importlib.util.find_spec("litellm") is None:  # not imported here: maslab imports it
        pytest.skip("the 'litellm' extra is not installed")
    monkeypatch.setenv("OPENAI_BASE_URL", server)
    monkeypatch.setenv("OPENAI_API_KEY", f"sk-local-{token_hex(8)}")
    return lambda: load_model("litellm:openai/smollm2", retry=ONCE)


async def test_litellm_usage_is_what_the_server_reports(server, litellm_at):
    model = litellm_at()
    ctx = Context(model)
    completion = await ctx.chat(STORY, max_tokens=8, temperature=0)
    usage = (await raw_chat(server, messages=STORY, max_tokens=8, temperature=0))["usage"]
    assert not completion.usage.estimated and completion.finish_reason == "length"
    assert completion.usage.prompt_tokens == usage["prompt_tokens"]
    assert completion.usage.completion_tokens == usage["completion_tokens"] == 8
    assert ctx.usage.total_tokens == usage["total_tokens"]


async def test_litellm_passes_tools_schema_and_logprobs_through(litellm_at):
    model = litellm_at()
    called = await model.chat(
        "Add 2 and 3.", tools=[ADD], tool_choice=CALL_ADD, max_tokens=32, temperature=0
    )
    assert [c.name for c in called.tool_calls] == ["add"]
    constrained = await model.chat(
        "Name a city.",
        max_tokens=48,
        temperature=0,
        response_format={"type": "json_object", "schema": CITY},
    )
    assert set(json.loads(constrained.text, strict=False)) == {"city", "population"}
    scored = await model.chat("Hi", max_tokens=2, temperature=0, logprobs=True, top_logprobs=1)
    assert scored.logprobs is not None and len(scored.logprobs) == 2


async def test_litellm_errors_are_typed_and_one_line(litellm_at, monkeypatch):
    model = litellm_at()
    with pytest.raises(ContextTooLong) as raised:
        await model.chat("word " * 1200, max_tokens=8)
    assert raised.value.status == 400 and "maximum context length" in str(raised.value)
    assert "\n" not in str(raised.value)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(LLMConnectionError):
        await model.chat("hello", max_tokens=2)
