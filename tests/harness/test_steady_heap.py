"""`maslab` commands and a blocking `maslab.evaluate` keep the cyclic garbage collector off
start-up's objects while they work."""

from __future__ import annotations

import gc

import pytest

from maslab.cli import main
from maslab.harness.heap import YOUNG_GENERATION
from maslab.harness.runner import Runner

pytestmark = pytest.mark.system


def _heap() -> tuple[int, int]:
    """The objects frozen and the young generation's threshold, now."""
    return gc.get_freeze_count(), gc.get_threshold()[0]


def _watch_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The heap as each run starts its samples, noted in the list returned."""
    seen: list[tuple[int, int]] = []
    run = Runner.run_pending

    async def watched(self: Runner) -> None:
        seen.append(_heap())
        await run(self)

    monkeypatch.setattr(Runner, "run_pending", watched)
    return seen


SWEEP = """out: {out}
models: [scripted:echo]
methods: [vanilla, cot]
benchmarks: [{{name: arith, options: {{size: 2}}}}]
limit: 2
cache: false
"""


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_runs_freeze_start_up_objects_and_collect_less_often(tmp_path, monkeypatch, command):
    seen = _watch_runs(monkeypatch)
    before = (gc.get_freeze_count(), gc.get_threshold())
    if command == "run":
        argv = ["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2", "--model",
                "scripted:echo", "--out", str(tmp_path / "run"), "--no-cache"]  # fmt: skip
    else:
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(SWEEP.format(out=tmp_path / "runs"))
        argv = ["sweep", str(sweep)]
    assert main([*argv, "--quiet"]) == 0
    assert seen and all(frozen > 0 and young == YOUNG_GENERATION for frozen, young in seen)
    assert (gc.get_freeze_count(), gc.get_threshold()) == before  # restored afterwards


def test_a_reading_command_runs_on_a_steady_heap_too(tmp_path, monkeypatch):
    from maslab.report import show

    run = tmp_path / "run"
    argv = ["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2", "--model",
            "scripted:echo", "--out", str(run), "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    seen: list[tuple[int, int]] = []
    real = show.show_run
    monkeypatch.setattr(
        show,
        "show_run",
        lambda *a, **k: seen.append(_heap()) or real(*a, **k),
    )
    before = (gc.get_freeze_count(), gc.get_threshold())
    assert main(["show", str(run)]) == 0
    assert seen and seen[0][0] > 0 and seen[0][1] == YOUNG_GENERATION
    assert (gc.get_freeze_count(), gc.get_threshold()) == before


@pytest.mark.parametrize("caller", ["plain code", "a running event loop"])
def test_a_blocking_evaluate_runs_on_a_steady_heap(tmp_path, monkeypatch, caller):
    import asyncio

    import maslab

    seen = _watch_runs(monkeypatch)
    before = (gc.get_freeze_count(), gc.get_threshold())

    def evaluate() -> maslab.RunResult:
        return maslab.evaluate(
            "vanilla", "arith", "scripted:echo", limit=2, cache=False, out=tmp_path / "run"
        )

    async def in_a_loop() -> maslab.RunResult:  # a notebook's cell: the run goes on a thread
        return evaluate()

    result = evaluate() if caller == "plain code" else asyncio.run(in_a_loop())
    assert result.summary.n == 2
    assert seen and seen[0][0] > 0 and seen[0][1] == YOUNG_GENERATION
    assert (gc.get_freeze_count(), gc.get_threshold()) == before
