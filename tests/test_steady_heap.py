"""`maslab run` keeps the cyclic garbage collector off start-up's objects while it runs."""

from __future__ import annotations

import gc

from maslab.cli import main
from maslab.cli.run import YOUNG_GENERATION
from maslab.runner import Runner


def test_run_freezes_start_up_objects_and_collects_less_often(tmp_path, monkeypatch):
    seen: list[tuple[int, int]] = []
    run = Runner.run

    async def watched(self: Runner):  # type: ignore[no-untyped-def]
        seen.append((gc.get_freeze_count(), gc.get_threshold()[0]))
        return await run(self)

    monkeypatch.setattr(Runner, "run", watched)
    before = (gc.get_freeze_count(), gc.get_threshold())
    status = main(
        ["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2",
         "--model", "scripted:echo", "--out", str(tmp_path / "run"), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert status == 0
    [(frozen, young)] = seen
    assert frozen > 0 and young == YOUNG_GENERATION
    assert (gc.get_freeze_count(), gc.get_threshold()) == before  # restored afterwards
