"""What a study would run, before it runs (``maslab study plan``): each benchmark's tasks (or
why they cannot load), each method's calls per task, and the calls in all.

A method's calls per task are measured, not guessed from its formula: one task, on a scripted
model that gives one short answer to everything (:data:`PILOT_REPLY`; every role on it), in a
scratch directory, on the study's benchmark when its data is here, else on ``arith``. A short
fixed reply keeps a discussion's prompts from growing as an echo's would. Methods that stop
early when their agents agree, or loop until a check passes or a game ends, may take fewer or
more calls on a real model.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from maslab.bench.benchmark import get_benchmark
from maslab.errors import MaslabError
from maslab.harness.runner import RunConfig, Runner
from maslab.harness.sweep import Cell

PILOT_REPLY = "I agree. The answer is \\boxed{1}."
PILOT_BENCHMARK = "arith"


@dataclass(frozen=True)
class BenchmarkPlan:
    label: str
    tasks: int | None
    problem: str = ""
    """Why its tasks cannot load (None tasks), e.g. its data is not fetched."""


@dataclass(frozen=True)
class MethodPlan:
    label: str
    calls_per_task: float | None
    measured_on: str
    formula: str
    problem: str = ""


@dataclass(frozen=True)
class Plan:
    """The benchmarks and methods of a study's cells, and the calls its runnable cells make."""

    benchmarks: tuple[BenchmarkPlan, ...]
    methods: tuple[MethodPlan, ...]
    runs: int
    runnable: int
    calls: float

    @property
    def calls_per_task(self) -> float | None:
        """The calls one task of a benchmark costs across every method of the grid, per model
        and repeat (None when a method's pilot failed)."""
        counts = [m.calls_per_task for m in self.methods]
        return None if None in counts else sum(c for c in counts if c is not None)


def pilot(config: RunConfig, benchmark: str | None = None) -> float:
    """The method calls one task of ``config`` (on ``benchmark`` instead of its own, if given)
    takes on a scripted model that always says :data:`PILOT_REPLY`; a MaslabError when it
    cannot run."""
    from maslab import api

    with tempfile.TemporaryDirectory(prefix="maslab-pilot-") as scratch:
        script = Path(scratch) / "pilot.json"
        script.write_text(json.dumps({".": PILOT_REPLY}))
        pilot_model = f"scripted:{script}"
        roles = {name: {"model": pilot_model} for name in config.model_roles}
        update = {
            "model": pilot_model, "model_roles": roles, "limit": 1, "repeats": 1, "cache": None,
            "endpoints": None, "out": str(Path(scratch) / "run"), "optimize_on": None,
            "optimize_limit": None, "evaluator": None, "evaluator_options": {},
        }  # fmt: skip
        if benchmark is not None:
            update.update(benchmark=benchmark, benchmark_options={}, split="test", data=None)
        runner = Runner(config.model_copy(update=update))
        result = asyncio.run(api.execute(runner, progress=False, report=False))
    return result.summary.mean_calls


def plan(cells: list[Cell]) -> Plan:
    """The plan of a study whose sweep has ``cells``."""
    from maslab.core.method import get_method

    benchmarks: dict[str, BenchmarkPlan] = {}
    for cell in cells:
        label = cell.benchmark_label or cell.benchmark
        if label in benchmarks:
            continue
        try:
            bench = get_benchmark(cell.benchmark)(**cell.config.benchmark_options)
            tasks = len(bench.load(cell.config.split, limit=cell.config.limit))
            benchmarks[label] = BenchmarkPlan(label, tasks)
        except MaslabError as exc:
            benchmarks[label] = BenchmarkPlan(label, None, str(exc))
    methods: dict[str, MethodPlan] = {}
    for cell in cells:
        if cell.label in methods:
            continue
        formula = get_method(cell.method).calls
        here = benchmarks[cell.benchmark_label or cell.benchmark].tasks is not None
        try:
            calls = pilot(cell.config) if here else pilot(cell.config, PILOT_BENCHMARK)
            on = cell.benchmark if here else PILOT_BENCHMARK
            methods[cell.label] = MethodPlan(cell.label, calls, on, formula)
        except MaslabError as exc:
            methods[cell.label] = MethodPlan(cell.label, None, "", formula, str(exc))
    total, runnable = 0.0, 0
    for cell in cells:
        count = benchmarks[cell.benchmark_label or cell.benchmark].tasks
        per_task = methods[cell.label].calls_per_task
        if count is not None and per_task is not None:
            runnable += 1
            total += count * per_task * cell.config.repeats
    return Plan(tuple(benchmarks.values()), tuple(methods.values()), len(cells), runnable, total)
