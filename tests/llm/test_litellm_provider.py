"""litellm: lazy import, a clear error without the extra, error mapping (stand-in module)."""

from __future__ import annotations

import socket
import subprocess
import sys
import types

import pytest

from maslab.cli import main
from maslab.errors import (
    ConfigError,
    ConnectionRefused,
    LLMConnectionError,
    LLMTimeout,
    RateLimited,
    ServerError,
)
from maslab.llm.registry import check_model, load_model
from maslab.llm.retry import RetryPolicy


@pytest.mark.system
def test_importing_maslab_does_not_import_litellm():
    code = "import sys, maslab, maslab.llm.registry, methods; print('litellm' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_missing_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", None)  # makes `import litellm` fail
    with pytest.raises(ConfigError, match=r"pip install 'maslab\[litellm\]'"):
        load_model("litellm:anthropic/claude")


class FakeRateLimit(Exception):
    status_code = 429

    def __init__(self) -> None:
        super().__init__("slow down")
        self.response = types.SimpleNamespace(headers={"retry-after": "0.01"})


class Timeout(Exception):
    pass


def wrapped(cause: Exception, status: int) -> Exception:
    """What litellm raises for a refused connection: a status error raised from the cause."""
    error = type("InternalServerError", (Exception,), {"status_code": status})("Connection\nerror.")
    error.__cause__ = cause
    return error


def stand_in(outcomes: list):
    module = types.ModuleType("litellm")
    calls = []

    async def acompletion(**kwargs):
        calls.append(kwargs)
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    module.acompletion = acompletion
    module.calls = calls
    return module


async def test_litellm_calls_are_mapped_and_retried(monkeypatch):
    ok = {
        "model": "claude",
        "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    module = stand_in([FakeRateLimit(), ok])
    monkeypatch.setitem(sys.modules, "litellm", module)
    model = load_model("litellm:anthropic/claude", retry=RetryPolicy(initial_wait=0))
    completion = await model.chat("hello", temperature=0)
    assert (completion.text, completion.usage.prompt_tokens) == ("hi", 3)
    assert module.calls[0]["num_retries"] == 0 and module.calls[0]["temperature"] == 0
    assert module.calls[0]["_skip_mcp_handler"] is True  # tools are plain functions, never MCP


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (FakeRateLimit(), RateLimited),
        (Timeout("late"), LLMTimeout),
        (type("E", (Exception,), {"status_code": 502})("bad gateway"), ServerError),
        (type("Timeout", (Exception,), {"status_code": 408})("took\ntoo long"), LLMTimeout),
        (wrapped(ConnectionRefusedError(111, "refused"), 500), LLMConnectionError),
    ],
)
async def test_litellm_errors_become_typed_errors(monkeypatch, error, expected):
    monkeypatch.setitem(sys.modules, "litellm", stand_in([error]))
    model = load_model("litellm:x", retry=RetryPolicy(attempts=1))
    with pytest.raises(expected) as raised:
        await model.chat("hello")
    assert "\n" not in str(raised.value)


def needing(*missing: str) -> types.ModuleType:
    """A stand-in litellm whose ``validate_environment`` says ``missing`` are unset."""
    module = stand_in([])
    module.validate_environment = lambda model: {
        "keys_in_environment": not missing, "missing_keys": list(missing)
    }  # fmt: skip
    return module


def test_a_missing_provider_key_is_named_before_any_call(monkeypatch):
    monkeypatch.setitem(sys.modules, "litellm", needing("GROQ_API_KEY"))
    with pytest.raises(ConfigError) as missing:
        check_model("litellm:groq/llama3-8b")
    assert str(missing.value) == (
        "environment variable GROQ_API_KEY is not set (model 'litellm:groq/llama3-8b' needs it)"
    )
    check_model("litellm:groq/llama3-8b", keys=False)  # a sweep file's spec, before its key
    monkeypatch.setitem(sys.modules, "litellm", needing("GOOGLE_API_KEY", "GEMINI_API_KEY"))
    with pytest.raises(ConfigError, match="GOOGLE_API_KEY or GEMINI_API_KEY is not set"):
        check_model("litellm:gemini/gemini-pro")
    monkeypatch.setitem(sys.modules, "litellm", needing("OLLAMA_API_BASE"))  # it has a default
    check_model("litellm:ollama/llama3")
    monkeypatch.setitem(sys.modules, "litellm", needing("HUGGINGFACE_API_KEY"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="HUGGINGFACE_API_KEY is not set"):
        check_model("litellm:huggingface/zephyr")
    monkeypatch.setenv("HF_TOKEN", "hf_x")  # litellm's calls read it too
    check_model("litellm:huggingface/zephyr")


def test_a_run_without_its_litellm_key_exits_2_and_writes_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "litellm", needing("GROQ_API_KEY"))
    out = tmp_path / "run"
    code = main(["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2",
                 "--model", "litellm:groq/llama3-8b", "--out", str(out), "--no-cache"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "GROQ_API_KEY is not set" in err
    assert not out.exists()


@pytest.mark.system
def test_litellm_itself_names_the_key(monkeypatch):
    pytest.importorskip("litellm")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="environment variable ANTHROPIC_API_KEY is not set"):
        check_model("litellm:anthropic/claude-3-haiku-20240307")


def refused_at(url: str) -> Exception:
    """litellm's error for a refused connection: its own exceptions hold a placeholder request,
    the innermost the real one (httpx's ``ConnectError``, raised from the OS's refusal)."""
    refusal = ConnectionRefusedError(111, "Connect call failed")
    connect = type("ConnectError", (Exception,), {})("All connection attempts failed")
    connect.request = types.SimpleNamespace(url=url)
    connect.__cause__ = refusal
    error = wrapped(connect, 500)
    error.request = types.SimpleNamespace(url="https://api.openai.com/v1")
    return error


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8000/v1/chat/completions", ConnectionRefused),
        ("http://localhost:11434/api/generate", ConnectionRefused),
        ("http://gpu1:8000/v1/chat/completions", LLMConnectionError),
    ],
)
async def test_a_refused_connection_on_this_machine_is_not_retried(monkeypatch, url, expected):
    module = stand_in([refused_at(url), refused_at(url)])
    monkeypatch.setitem(sys.modules, "litellm", module)
    model = load_model("litellm:openai/m", retry=RetryPolicy(attempts=2, initial_wait=0))
    with pytest.raises(LLMConnectionError) as raised:
        await model.chat("hello")
    assert type(raised.value) is expected
    assert len(module.calls) == (1 if expected is ConnectionRefused else 2)


@pytest.mark.system
async def test_litellm_itself_refused_on_this_machine_stops_at_once(monkeypatch):
    pytest.importorskip("litellm")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    model = load_model("litellm:openai/m", retry=RetryPolicy(attempts=3, initial_wait=1))
    with pytest.raises(ConnectionRefused) as raised:
        await model.chat("hello")
    assert raised.value.attempts == 1 and "connection refused" in str(raised.value)
