"""The studies that ask maslab's own questions (cost-frontier, randomness, tool-use) end to end
on scripted models, and the analyses they rest on."""

from __future__ import annotations

import re

import pytest
from helpers import coin_flip_solver

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel
from maslab.studies.catalogue.cost_frontier import METHODS as FRONTIER_METHODS
from maslab.studies.catalogue.cost_frontier import frontier

TASKS = get_benchmark("arith")().load(limit=6)


@pytest.fixture
def noisy(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))  # the user's stays clean
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    solver = coin_flip_solver(TASKS)
    register_provider("coin")(lambda name, settings: ScriptedModel(solver, name="coin:x"))


def study(name: str, out, *extra: str) -> int:
    return main(["study", "run", name, "--model", "coin:x", "--out", str(out), "--quiet",
                 "--max-cells", "8", *extra])  # fmt: skip


def test_frontier_keeps_the_undominated():
    points = {"a": (0.5, 10.0), "b": (0.6, 20.0), "c": (0.55, 30.0), "d": (0.6, 20.0)}
    assert frontier(points) == {"a", "b", "d"}  # c: b is more accurate for less; b, d tie


def test_cost_frontier_runs_every_method_and_places_each(noisy, tmp_path, capsys):
    assert study("cost-frontier", tmp_path / "s", "--limit", "6") == 0
    printed = capsys.readouterr().out
    rows = {
        m: line for line in printed.splitlines() for m in FRONTIER_METHODS
        if re.match(rf"{m} +by tokens ", line)
    }  # fmt: skip
    assert set(rows) == set(FRONTIER_METHODS)
    standings = [line.split("by tokens", 1)[1].strip() for line in rows.values()]
    assert "frontier" in standings
    assert any(
        s.startswith("beaten by ") and s.endswith(("detected)", "noise)")) for s in standings
    )
    assert "Cost and accuracy on coin:x, arith" in (tmp_path / "s" / "study.html").read_text()


def test_randomness_measures_the_spread_and_what_a_difference_needs(noisy, tmp_path, capsys):
    assert study("randomness", tmp_path / "s", "--limit", "6") == 0  # five repeats by default
    printed = capsys.readouterr().out
    assert "Single-run pass@1 on coin:x" in printed
    repeats = re.search(r"^vanilla +repeats +(\d+)$", printed, re.M)
    assert repeats and repeats[1] == "5"
    spread = float(re.search(r"^vanilla +spread +(\S+)$", printed, re.M)[1])
    assert spread > 0  # the coin lands differently on different repeats
    assert re.search(r"^self_consistency − vanilla +tasks needed at 5 repeats +", printed, re.M)


def test_tool_use_runs_each_method_on_each_category(bfcl_wheel, tmp_path, capsys):
    out = tmp_path / "s"
    assert main(["study", "run", "tool-use", "--model", "scripted:echo", "--limit", "1",
                 "--out", str(out), "--quiet"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "study tool-use: 12 of 12 runs finished" in printed
    for method in ("tool_agent", "planner_executor", "conductor"):
        assert re.search(rf"^{method} +miss_param +", printed, re.M)
    assert re.search(r"^planner_executor − tool_agent +base +", printed, re.M)
