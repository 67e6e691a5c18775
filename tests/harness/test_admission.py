"""A run holds as many samples open as it admits, however many it has to do: each is taken up
as an earlier one ends, so a run of 50,000 tasks does not make 50,000 waiting coroutines."""

from __future__ import annotations

import asyncio

from maslab.harness.runner import RunConfig, Runner


def test_a_run_keeps_only_its_admitted_samples_open(tmp_path):
    config = RunConfig(
        method="vanilla",
        benchmark="arith",
        benchmark_options={"size": 40},
        model="scripted:echo",
        concurrency=3,
        cache=None,
        out=str(tmp_path / "run"),
    )
    runner = Runner(config)
    solve = runner.solver.solve
    open_now, peak, tasks = 0, 0, []

    async def counted(*args):  # type: ignore[no-untyped-def]
        nonlocal open_now, peak
        open_now += 1
        peak = max(peak, open_now)
        tasks.append(len(asyncio.all_tasks()))
        try:
            return await solve(*args)
        finally:
            open_now -= 1

    runner.solver.solve = counted  # type: ignore[method-assign]
    records = asyncio.run(runner.run())
    assert len(records) == 40 and all(r.status == "ok" for r in records)
    assert peak == 3
    assert max(tasks) <= 8  # 3 workers and a few of the run's own tasks, not one per sample (40)
