"""The signals study on a noisy scripted solver and a scripted reader: the samples it reads
(each signal's flagged, and random ones), its verdicts kept and not asked again on a resume,
and the precision table."""

from __future__ import annotations

import re

import orjson
import pytest
from helpers import coin_flip_solver

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.store.records import ResultRecord
from maslab.studies.catalogue.signals import PER_SIGNAL, RANDOM, READINGS, chosen

TASKS = get_benchmark("arith")().load(limit=10)


class Reader:
    """Marks a sample worth reading when it was scored wrong; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: ChatRequest) -> str:
        self.calls += 1
        wrong = "Its verdict: wrong" in last_user_message(request)
        return orjson.dumps({"worth_reading": wrong, "reason": "scored wrong" if wrong else
                             "plain"}).decode()  # fmt: skip


@pytest.fixture
def reader(monkeypatch, tmp_path) -> Reader:
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))  # nothing replayed
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    solver, scripted = coin_flip_solver(TASKS), Reader()
    register_provider("coin")(lambda name, settings: ScriptedModel(solver, name="coin:x"))
    register_provider("reader")(lambda name, settings: ScriptedModel(scripted, name="reader:x"))
    return scripted


def test_the_reader_reads_flagged_and_random_samples_once(reader, tmp_path, capsys):
    out = tmp_path / "s"
    run = ["study", "run", "signals", "--model", "coin:x", "--model-role", "reader=reader:x",
           "--limit", "10", "--out", str(out), "--quiet"]  # fmt: skip
    assert main(run) == 0
    printed = capsys.readouterr().out
    lines = (out / READINGS).read_bytes().splitlines()
    assert reader.calls == len(lines) > 0
    readings = [orjson.loads(line) for line in lines]
    assert {r["reader"] for r in readings} == {"reader:x"}
    assert {r["run"].split("/")[1] for r in readings} == {"llm_debate", "mad", "self_consistency"}
    assert "Worth reading, by signal, on coin:x" in printed
    baseline = re.search(r"^random samples +worth reading +(\S+)", printed, re.M)
    assert baseline is not None
    assert re.search(r"^unparsed|^answer_flips|^final_disagreement", printed, re.M)
    assert f"the reader: {len(lines)} samples read, {len(lines)} calls" in printed

    calls = reader.calls
    assert main(run) == 0  # resumed: every sample read already
    assert reader.calls == calls and len((out / READINGS).read_bytes().splitlines()) == calls


def test_the_samples_read_are_drawn_the_same_on_every_resume():
    records = [
        ResultRecord(task_id=f"t{i}", status="ok", signals={"repetition": float(i % 2)})
        for i in range(60)
    ]
    by_signal, drawn = chosen("arith/mad/m", records, seed=3)
    again = chosen("arith/mad/m", records, seed=3)
    assert (by_signal, drawn) == again
    assert len(by_signal["repetition"]) == PER_SIGNAL and len(drawn) == RANDOM
    assert all(r.signals["repetition"] > 0 for r in by_signal["repetition"])
    assert chosen("arith/mad/m", records, seed=4)[1] != drawn
