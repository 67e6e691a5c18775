"""200 tasks through the real harness against a server injecting every fault kind.

Every (task, repeat) must end as exactly one record, scored or carrying its error's cause, and
the tokens the results account for (errored samples and superseded attempts included) must
equal the tokens the server served.
"""

from __future__ import annotations

import re
import time

import pytest

from maslab.cli import main
from maslab.store.run_store import SPENT_KEYS, ResultRecord, RunStore
from maslab.testing.fake_server import FakeOpenAIServer

pytestmark = pytest.mark.system

FAULTS = {"429": 0.2, "500": 0.05, "hang": 0.02, "malformed": 0.01, "empty_choices": 0.01}
TASKS = 200
CAUSE = re.compile(r"(RateLimited|ServerError|LLMTimeout|MalformedResponse): openai:fake@")


def _tokens(records: list[ResultRecord]) -> int:
    """Tokens the records account for: the method's calls and the scorer's."""
    return sum(
        int(r.usage.get(k, 0) + r.scoring_usage.get(k, 0)) for r in records for k in SPENT_KEYS
    )


def _check(store: RunStore, server: FakeOpenAIServer) -> tuple[int, int, int]:
    """The run's invariants; returns (scored, errored, tokens accounted for)."""
    lines = (store.dir / "results.jsonl").read_bytes().splitlines()
    records, superseded = store.records()
    assert len({r.key for r in records}) == len(records) == TASKS  # one per (task, repeat)
    assert len(lines) == len(records) + len(superseded)  # each line read once, as one or other
    traces = {t.task_id: t for t in store.traces()}
    for r in records:
        if r.status == "error":
            assert r.score is None and CAUSE.match(r.error or ""), r.error
            assert any(call.error for call in traces[r.task_id].calls)
        else:
            assert r.score is not None and r.error is None
    tokens = _tokens(records) + _tokens(superseded)
    assert tokens == server.served_prompt_tokens + server.served_completion_tokens
    errored = sum(r.status == "error" for r in records)
    return TASKS - errored, errored, tokens


def test_every_sample_is_accounted_for_under_injected_faults(tmp_path, capsys):
    run, endpoints = tmp_path / "run", tmp_path / "endpoints.yaml"
    command = ["run", "--method", "self_consistency", "--config", "k=3", "--benchmark", "arith",
               "--limit", str(TASKS), "--model", "openai:fake", "--endpoints", str(endpoints),
               "--concurrency", "64", "--no-cache", "--out", str(run), "--quiet"]  # fmt: skip
    with FakeOpenAIServer(faults=FAULTS, retry_after=0.01, seed=11) as server:
        # A client that gives up on a reply the server already counted cannot record its tokens,
        # so the timeout catches only the injected hangs, never a reply slowed by a busy machine
        # (0.3 s did: the server thread shares the test's process and cores).
        endpoints.write_text(
            f"fake:\n  - base_url: {server.base_url}\n    timeout: 2\n    max_concurrency: 64\n"
            "    retry: {attempts: 3, initial_wait: 0.01, max_wait: 0.05}\n"
        )
        started = time.monotonic()
        first = main(command)
        scored, errored, tokens = _check(RunStore(run), server)
        assert first == (1 if errored else 0) and errored > 0  # a few exhaust their attempts
        assert set(server.fault_counts) == set(FAULTS)  # every kind was injected
        faults, requests = server.fault_counts, server.requests
        main(command)  # the resume retries the errored samples; their spend stays counted
        rescored, reerrored, retokens = _check(RunStore(run), server)
        elapsed = time.monotonic() - started
        assert rescored > scored
    with capsys.disabled():
        print(
            f"\n{TASKS} tasks x 3 calls, {requests} requests, faults {faults}: "
            f"{scored} scored, {errored} errored, {tokens:,} tokens recorded = served; "
            f"after a resume {rescored} scored, {reerrored} errored, {retokens:,} = served; "
            f"{elapsed:.1f} s"
        )
