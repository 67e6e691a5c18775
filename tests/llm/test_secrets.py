"""Secrets never persist: the registry, redaction, and a canary key through a whole CLI run."""

from __future__ import annotations

import base64
import json
import sys
import types
from pathlib import Path
from secrets import token_hex

import orjson
import pytest

from maslab.cli import main
from maslab.errors import LLMError, ServerError
from maslab.llm.registry import load_model
from maslab.llm.retry import RetryPolicy
from maslab.secrets import (
    MARKER,
    redact,
    redact_bytes,
    register_environment_secrets,
    register_secret,
    scrub,
)
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace
from maslab.testing.fake_server import FakeOpenAIServer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc123def456ghi789", f"Authorization: Bearer {MARKER}"),
        (
            '{"Authorization": "Bearer eyJhbGciOi.J9abc123"}',
            f'{{"Authorization": "Bearer {MARKER}"}}',
        ),
        (
            "curl -H 'authorization: Bearer 0123456789abcdef'",
            f"curl -H 'authorization: Bearer {MARKER}'",
        ),
        ("OPENAI_API_KEY=sk-proj-ABCDEFGHIJ1234567890 run", f"OPENAI_API_KEY={MARKER} run"),
        ('{"api_key": "zq81XYZ0987abcdefg"}', f'{{"api_key": "{MARKER}"}}'),
        ("x-api-key: 0123456789abcdefXYZ", f"x-api-key: {MARKER}"),
        ("key sk-ant-api03-abcdefghijklmnop1234 end", f"key {MARKER} end"),
        ("line\nsk-abcdefghijklmnop1234", f"line\n{MARKER}"),
    ],
)
def test_credential_shapes_are_redacted(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The answer is 42.",
        "api_key = os.environ['OPENAI_API_KEY']",
        "def f(api_key: str | None = None): ...",
        'headers = {"Authorization": f"Bearer {token}"}',
        "the bearer of bad news uses sk-learn-compatible estimators; task-0123456789abcdef",
    ],
)
def test_ordinary_text_and_code_are_left_alone(text):
    assert redact(text) is text


def test_registered_values_are_redacted_everywhere_and_short_ones_ignored():
    value = f"zq{token_hex(10)}"  # no credential shape: only the registry knows it
    assert redact(f"a {value} b") == f"a {value} b"
    register_secret(value)
    register_secret("short")
    register_secret("")
    register_secret(None)
    assert redact(f"a {value} b; token: {value}") == f"a {MARKER} b; token: {MARKER}"
    assert redact("a short b") == "a short b"
    assert scrub(f'{{"t": "{value}"}}'.encode()) == f'{{"t": "{MARKER}"}}'.encode()
    clean = b'{"t": "nothing"}'
    assert scrub(clean) is clean and redact_bytes(clean) is clean


def test_redacting_json_lines_keeps_them_json():
    row = {"answer": 'config {"api_key": "zq81XYZ0987abcdefg"}\nsk-abcdefghijklmnop1234'}
    line = redact_bytes(orjson.dumps(row))
    assert orjson.loads(line) == {"answer": f'config {{"api_key": "{MARKER}"}}\n{MARKER}'}


def test_credential_named_environment_variables_are_registered(monkeypatch):
    value, other = f"zq{token_hex(10)}", f"zq{token_hex(10)}"
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", value)
    monkeypatch.setenv("MASLAB_PLAIN_SETTING", other)
    register_environment_secrets()
    assert redact(f"{value} {other}") == f"{MARKER} {other}"


def test_llm_error_messages_are_redacted():
    value = f"zq{token_hex(10)}"
    register_secret(value)
    error = ServerError(f"HTTP 500: bad key {value}; Authorization: Bearer abcdef0123456789")
    assert str(error) == f"HTTP 500: bad key {MARKER}; Authorization: Bearer {MARKER}"
    assert isinstance(error, LLMError)


async def test_litellm_keys_are_registered_and_scrubbed_from_replies(monkeypatch):
    key = f"zq{token_hex(10)}"
    monkeypatch.setenv("SOME_VENDOR_API_KEY", key)
    replies = [{"choices": [{"message": {"content": f"you sent {key}"}}], "model": "m"}]

    async def acompletion(**kwargs: object) -> object:
        if replies:
            return replies.pop()
        raise RuntimeError(f"401 for key {key}")

    monkeypatch.setitem(sys.modules, "litellm", types.SimpleNamespace(acompletion=acompletion))
    model = load_model("litellm:vendor/m", retry=RetryPolicy(attempts=1))
    completion = await model.chat("hello")
    assert completion.text == f"you sent {MARKER}" and key not in str(completion.raw)
    with pytest.raises(LLMError) as failed:
        await model.chat("again")
    assert key not in str(failed.value) and MARKER in str(failed.value)


def _leaks(root: Path, secrets: list[str]) -> list[str]:
    """Files under ``root`` whose bytes hold any of ``secrets``."""
    return [
        str(path)
        for path in root.rglob("*")
        if path.is_file() and any(s.encode() in path.read_bytes() for s in secrets)
    ]


@pytest.mark.system
def test_a_canary_key_reaches_no_file_and_no_terminal(tmp_path, monkeypatch, capsys):
    canary, wrong = f"sk-canary-{token_hex(16)}", f"sk-canary-{token_hex(16)}"
    monkeypatch.setenv("MASLAB_CANARY_KEY", canary)
    monkeypatch.setenv("MASLAB_CANARY_WRONG_KEY", wrong)
    with FakeOpenAIServer(api_key=canary, echo_key=True, faults={"500": 0.3}, seed=5) as server:
        endpoints = tmp_path / "endpoints.yaml"
        endpoint = f"  - base_url: {server.base_url}\n    api_key_env: MASLAB_CANARY_%s\n"
        endpoints.write_text(  # two endpoints, one with a wrong key; an alias with that one only
            "canary:\n" + endpoint % "KEY" + "    retry: {attempts: 2, initial_wait: 0}\n"
            + endpoint % "WRONG_KEY"
            + "refused:\n" + endpoint % "WRONG_KEY" + "    retry: {attempts: 1}\n"
        )  # fmt: skip
        run, refused, cache = tmp_path / "run", tmp_path / "refused", tmp_path / "cache"
        command = ["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "12",
                   "--model", "openai:canary", "--endpoints", str(endpoints),
                   "--cache", str(cache / "llm.sqlite"), "--out", str(run), "--quiet"]  # fmt: skip
        # a 401 moves the call to the other endpoint; a sample fails on a 500 twice
        assert main(command) in (0, 1)
        assert main(command[:-1]) in (0, 1)  # resumed (progress bar on)
        alone = [*command[:8], "openai:refused", *command[9:13], "--out", str(refused), "--quiet"]
        assert main(alone) == 1  # every call refused: the run stops at once, "fix the endpoint"
        assert main(alone) == 1  # and again: the errored samples' first attempts are superseded
        assert server.fault_counts["500"] > 0
    assert main(["report", str(run), "-o", str(run / "report.html")]) == 0
    assert main(["report", str(refused), "-o", str(refused / "report.html")]) == 0
    ok = next(r for r in RunStore(run).results() if r.status == "ok")
    store = RunStore(refused)
    failed = [r for r in store.results() if r.status == "error"]
    assert main(["show", str(run)]) == 0 and main(["show", str(refused)]) == 0
    assert main(["show", str(run), ok.task_id]) == 0
    assert main(["show", str(refused), failed[0].task_id]) == 0
    printed = capsys.readouterr()
    assert _leaks(tmp_path, [canary, wrong]) == []
    assert canary not in printed.out + printed.err and wrong not in printed.out + printed.err
    # the server did echo the keys: in 401s, in 500s and in every completion
    assert any("HTTP 401" in (r.error or "") for r in failed) and store.superseded()
    assert all(f"(sent: Bearer {MARKER})" in (r.error or "") for r in failed)
    trace = next(RunStore(run).traces(ok.task_id))
    assert (trace.calls[0].response or "").startswith(f"Bearer {MARKER}\n")
    assert MARKER in printed.out


def test_result_and_trace_lines_are_redacted_as_written(tmp_path):
    key = f"sk-proj-{token_hex(20)}"  # e.g. in a provider bug's message, which the runner keeps
    store = RunStore(tmp_path / "run")
    manifest = Manifest(method="m", benchmark="b", model="openai:m", evaluator="e")
    store.open(manifest)
    failed = ResultRecord(task_id="t", status="error", error=f"RuntimeError: bad key {key}")
    store.append(
        failed, Trace.model_validate({"task_id": "t", "repeat": 0, "calls": [{"error": key}]})
    )
    store.close()
    store.open(manifest)  # the retry supersedes the errored line
    store.append(
        failed.model_copy(update={"status": "ok", "error": None}), Trace(task_id="t", repeat=0)
    )
    store.close()
    assert _leaks(tmp_path, [key]) == []
    assert store.superseded()[0].error == f"RuntimeError: bad key {MARKER}"


def _plant_old_run(directory: Path, secrets: list[str]) -> str:
    """A run directory written before redaction existed, with ``secrets`` in its lines."""
    directory.mkdir()
    manifest = {
        "method": "vanilla",
        "benchmark": "arith",
        "model": "openai:m",
        "evaluator": "numeric",
    }
    (directory / "manifest.json").write_bytes(orjson.dumps(manifest))
    leak = " ".join(secrets)
    result = {
        "task_id": "t1",
        "repeat": 0,
        "status": "error",
        "error": f"RuntimeError: {leak}",
        "gold": "1",
    }
    (directory / "results.jsonl").write_bytes(orjson.dumps(result) + b"\n")
    message = {"sender": "solver", "content": f"my key is {leak}", "round": 0, "kind": "reply"}
    trace = {"task_id": "t1", "repeat": 0, "prompt": f"use {leak}", "messages": [message],
             "calls": [{"agent": "solver", "model": "openai:m", "response": leak}]}  # fmt: skip
    (directory / "traces.jsonl").write_bytes(orjson.dumps(trace) + b"\n")
    return "t1"


def test_show_and_report_redact_runs_written_before(tmp_path, capsys):
    registered = f"zq{token_hex(10)}"
    register_secret(registered)
    long_key = f"sk-proj-{token_hex(78)}"  # 164 characters: wider than the terminal
    secrets = [registered, long_key]
    run = tmp_path / "old-run"
    task = _plant_old_run(run, secrets)
    assert main(["show", str(run)]) == 0
    assert main(["show", str(run), task]) == 0
    assert main(["report", str(run), "-o", str(tmp_path / "report.html")]) == 0
    printed = capsys.readouterr().out
    assert not any(s in printed for s in secrets) and MARKER in printed
    assert long_key[:24] not in printed.replace("\n", "")
    html = (tmp_path / "report.html").read_text()
    assert not any(s in html for s in secrets) and MARKER in html


def test_cli_error_messages_are_redacted(tmp_path, capsys):
    value = f"zq{token_hex(10)}"
    register_secret(value)
    missing = tmp_path / f"no-such-run-{value}"
    assert main(["show", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("maslab: error:") and value not in err and MARKER in err


async def test_a_key_a_server_echoes_encoded_reaches_neither_the_cache_nor_the_reply(
    tmp_path, monkeypatch
):
    """The server sends the key JSON-escaped character by character (plain once decoded),
    base64-encoded as ``Bearer <key>``, and upper-cased: the raw bytes hold none of the key's
    plain bytes, so a scrub of the raw body missed the first and the rest."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    key = f"sk-echo-{token_hex(12)}"
    monkeypatch.setenv("MASLAB_ECHO_KEY", key)
    escaped = "".join(f"\\u{ord(c):04x}" for c in key)
    bearer = base64.b64encode(f"Bearer {key}".encode()).decode()
    body = (
        '{"model": "m", "choices": [{"message": {"role": "assistant", "content": '
        f'"escaped {escaped} base64 {bearer} upper {key.upper()}'
        '"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 9}}'
    ).encode()
    assert key.encode() not in body

    async def completions(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    async with TestServer(app, host="127.0.0.1") as server:
        endpoints = {"echo": [{"base_url": f"{server.make_url('/v1')}", "api_key_env":
                               "MASLAB_ECHO_KEY"}]}  # fmt: skip
        cache = tmp_path / "cache.sqlite"
        model = load_model("openai:echo", endpoints=endpoints, cache=cache)
        reply = await model.chat("Hi")
        await model.aclose()
    assert reply.text == f"escaped {MARKER} base64 {MARKER} upper {MARKER}"
    forms = [key, bearer, key.upper()]
    assert not any(form in json.dumps(reply.raw) for form in forms)
    assert _leaks(tmp_path, forms) == []


def test_an_internal_errors_traceback_is_printed_redacted(tmp_path, monkeypatch, capsys):
    """A bug's traceback still reaches the terminal, for a report, but without the keys in it
    (a key in a learned-state file printed in clear)."""
    key = f"sk-learned-{token_hex(12)}"
    register_secret(key)

    def buggy(self: RunStore) -> Manifest:
        raise RuntimeError(f"cannot use state {{'importance': '{key}'}}")

    monkeypatch.setattr(RunStore, "manifest", buggy)
    assert main(["show", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and f"cannot use state {{'importance': '{MARKER}'}}" in err
    assert key not in err
    assert err.strip().splitlines()[-1].startswith("maslab: internal error (a bug)")


def test_line_redaction_is_the_texts_whatever_the_bytes_hold():
    from maslab.secrets import redact, redact_bytes

    token = "a1b2c3d4e5f6g7h8i9j0"
    for text in (
        f"api_key={token}",
        f"API_KEY={token}",
        f"api_\u212aey={token}",  # a Kelvin sign, which lower-cases to k
        f"Bearer {token} and é",
        "nothing to hide, é",
        "nothing to hide",
    ):
        data = text.encode()
        assert redact_bytes(data) == redact(text).encode()
