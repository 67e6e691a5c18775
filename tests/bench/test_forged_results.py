"""End to end: answer code run by the `code` evaluator cannot touch the live run's files."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from maslab.cli import main
from maslab.sandbox import BACKEND_VARIABLE, missing_isolation

pytestmark = pytest.mark.system

FORGER = """
import glob, json, os

forged = json.dumps({{"task_id": "HumanEval/0", "repeat": 0, "status": "ok",
                     "score": {{"value": 1.0, "correct": True, "extracted": "x"}}}})
targets = [{results!r}]
if {roam!r}:  # every route to the live file; only where the sandbox is meant to block them all
    targets += glob.glob("/proc/*/cwd/results.jsonl") + glob.glob("/proc/*/cwd/*/results.jsonl")
    targets += glob.glob("/proc/*/root{results}")
for path in targets:
    try:
        with open(path, "a") as f:
            f.write(forged + "\\n")
        print("forged", path)
    except OSError as e:
        print("blocked", path, e)

def has_close_elements(numbers, threshold):
    return False
"""


def forge(tmp_path: Path, *flags: str, roam: bool = True) -> list[dict]:
    """Run HumanEval (3 tasks) with answer code that appends a forged record to the live run's
    results.jsonl by its path and, with ``roam``, by every route through /proc it knows (which
    reaches other processes' runs too: only where isolation is to stop it); the records the
    run ends with."""
    out = tmp_path / "run"
    results = out / "results.jsonl"
    script = tmp_path / "forger.yaml"
    answer = "```python\n" + FORGER.format(results=str(results), roam=roam) + "```"
    script.write_text(json.dumps({".": answer}))
    code = main(["run", "--method", "vanilla", "--benchmark", "humaneval", "--limit", "3",
                 "--model", f"scripted:{script}", "--out", str(out), "--no-cache", "--quiet",
                 *flags])  # fmt: skip
    assert code == 0
    return [orjson.loads(line) for line in results.read_bytes().splitlines()]


def test_answer_code_cannot_forge_a_result_record(tmp_path):
    if missing := missing_isolation():
        pytest.skip(f"no full isolation here: {missing}")
    rows = forge(tmp_path, "--strict-sandbox")
    assert len(rows) == 3 and all("usage" in r for r in rows)  # the run's own lines only
    assert not any(r["score"]["correct"] for r in rows)  # the answer is wrong on every task


def test_without_isolation_the_same_attack_succeeds_only_when_opted_in(
    tmp_path, monkeypatch, capsys
):
    """The attack above is real: with the namespaces off, it gets its line in (by the run's own
    path alone: unconfined, the /proc routes would write into every run on the machine). So
    such a machine refuses to run answer code, in one line, writing nothing, unless the user
    opts in; the opt-in is recorded and shown."""
    monkeypatch.setenv(BACKEND_VARIABLE, "none")
    with pytest.raises(AssertionError):  # exit 2 is not 0
        forge(tmp_path, roam=False)
    err = capsys.readouterr().err.strip()
    assert "model-written code cannot run isolated here: no filesystem, network" in err
    assert "--unsafe-no-sandbox" in err and "\n" not in err
    assert not (tmp_path / "run").exists()

    rows = forge(tmp_path, "--unsafe-no-sandbox", roam=False)
    assert any("usage" not in r for r in rows)
    recorded = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())["sandbox"]
    assert recorded["unsafe_no_sandbox"] and recorded["missing"] == ["filesystem", "network"]
    assert "--unsafe-no-sandbox: model-written code could run" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html")]) == 0
    assert "--unsafe-no-sandbox: model-written code could run" in (tmp_path / "r.html").read_text()
