"""llama-cpp-python's own OpenAI-compatible server on 127.0.0.1 with the embedded SmolLM2-135M
GGUF model, for system tests (a test helper, not tests): skips when the ``local`` or the
server's extra is not installed."""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO

import pytest

from maslab.errors import ConfigError
from maslab.llm.local import resolve_gguf

STARTUP_S = 120.0
ALIAS = "smollm2"
"""The model name the server answers to."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    """Poll ``url`` until it answers 200; fail with the server's log if it dies or is late."""
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(url, timeout=2) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.2)
    log.seek(0)
    tail = log.read().decode("utf-8", "replace")[-2000:]
    pytest.fail(f"llama.cpp server at {url} not ready (exit code {process.poll()}):\n{tail}")


@contextlib.contextmanager
def llama_server(*options: str, n_ctx: int = 1024) -> Iterator[str]:
    """Run the server on a free port with ``options`` (``--chat_format ...``) and a context
    window of ``n_ctx`` tokens; yields its base URL, stops it after."""
    pytest.importorskip("llama_cpp", reason="the 'local' extra is not installed")
    for module in ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            pytest.skip("llama-cpp-python's server extra is not installed (the 'dev' extra has it)")
    try:
        gguf = resolve_gguf("smollm2-135m")
    except ConfigError as exc:
        pytest.skip(str(exc))
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
               "--model_alias", ALIAS, "--host", "127.0.0.1", "--port", str(port),
               "--n_ctx", str(n_ctx), *options]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_ready(f"http://127.0.0.1:{port}/v1/models", process, log)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
