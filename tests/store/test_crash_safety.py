"""A run SIGKILLed at random points and re-run each time ends exactly as an uninterrupted one."""

from __future__ import annotations

import hashlib
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from helpers import lines

from maslab.cli import main
from maslab.store.run_store import RunStore
from maslab.testing.fake_server import FakeOpenAIServer

pytestmark = pytest.mark.system

GSM8K = Path(__file__).parents[1] / "fixtures" / "cli" / "gsm8k_small.jsonl"
TASKS, REPEATS, KILLS = 24, 2, 5


def answer(request) -> str:
    """Right for two questions in three, by a stable hash of the question; never by timing."""
    prompt = " ".join(m["content"] for m in request.messages)
    task, gold = re.search(r"\(#(\d+), gold (\d+)\)", prompt).groups()
    wrong = int(hashlib.sha256(task.encode()).hexdigest(), 16) % 3 == 0
    return f"The answer is {int(gold) + 1 if wrong else gold}."


def write_data(path: Path) -> None:
    rows = [orjson.loads(line) for line in GSM8K.read_bytes().splitlines()]
    out = []
    for i in range(TASKS):
        row = rows[i % len(rows)]
        gold = row["answer"].split("####")[-1].strip().replace(",", "")
        out.append({**row, "question": f"{row['question']} (#{i}, gold {gold})"})
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in out))


def by_key(run: Path) -> dict[tuple[str, int], bool]:
    records = lines(run / "results.jsonl", torn=True)
    return {(r["task_id"], r["repeat"]): r["score"]["correct"] for r in records}


def test_five_sigkills_then_resume_equal_an_uninterrupted_run(tmp_path):
    data = tmp_path / "data.jsonl"
    write_data(data)
    rng = random.Random(2026)
    with FakeOpenAIServer(answer, latency=(0.01, 0.05), seed=1) as server:

        def command(out: Path, cache: Path) -> list[str]:
            return [
                sys.executable, "-m", "maslab.cli", "run", "--method", "llm_debate",
                "--config", "agents=2", "--config", "rounds=2", "--benchmark", "gsm8k",
                "--data", str(data), "--repeats", str(REPEATS), "--concurrency", "4",
                "--model", f"openai:fake@{server.base_url}", "--cache", str(cache),
                "--out", str(out), "--quiet",
            ]  # fmt: skip

        reference = tmp_path / "reference"
        assert main(command(reference, tmp_path / "ref-cache.sqlite")[3:]) == 0

        out, cache = tmp_path / "killed", tmp_path / "cache.sqlite"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        finished_at_kill = []
        for _ in range(KILLS):
            before = len(lines(out / "results.jsonl", torn=True))
            target = before + rng.randint(1, 6)
            process = subprocess.Popen(command(out, cache), env=env, stdout=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (
                len(lines(out / "results.jsonl", torn=True)) < target
            ):
                if process.poll() is not None:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.08))  # land anywhere: mid-call, mid-write, mid-rewrite
            process.send_signal(signal.SIGKILL)
            process.wait()
            finished_at_kill.append(len(lines(out / "results.jsonl", torn=True)))
        print("records at each kill:", finished_at_kill)
        assert finished_at_kill[-1] < TASKS * REPEATS, "the kills must land before the end"
        subprocess.run(command(out, cache), env=env, check=True, timeout=120,
                       stdout=subprocess.DEVNULL)  # fmt: skip

    results = lines(out / "results.jsonl", torn=True)
    keys = [(r["task_id"], r["repeat"]) for r in results]
    assert len(keys) == len(set(keys)) == TASKS * REPEATS  # exactly one record per sample
    assert all(r["status"] == "ok" for r in results)
    # a trace whose result a kill cut off stays in the file; the re-run's trace wins
    traces = [t.key for t in RunStore(out).traces()]
    assert sorted(traces) == sorted(keys)
    assert by_key(out) == by_key(reference)
