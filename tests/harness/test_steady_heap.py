"""`maslab run` and `maslab sweep` keep the cyclic garbage collector off start-up's objects
while they run."""

from __future__ import annotations

import gc

import pytest

from maslab.cli import main
from maslab.cli.run import YOUNG_GENERATION
from maslab.harness.runner import Runner

pytestmark = pytest.mark.system

SWEEP = """out: {out}
models: [scripted:echo]
methods: [vanilla, cot]
benchmarks: [{{name: arith, options: {{size: 2}}}}]
limit: 2
cache: false
"""


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_runs_freeze_start_up_objects_and_collect_less_often(tmp_path, monkeypatch, command):
    seen: list[tuple[int, int]] = []
    run = Runner.run_pending

    async def watched(self: Runner):  # type: ignore[no-untyped-def]
        seen.append((gc.get_freeze_count(), gc.get_threshold()[0]))
        return await run(self)

    monkeypatch.setattr(Runner, "run_pending", watched)
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
