"""litellm: lazy import, a clear error without the extra, error mapping (stand-in module)."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from maslab.errors import ConfigError, LLMConnectionError, LLMTimeout, RateLimited, ServerError
from maslab.llm.registry import load_model
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
