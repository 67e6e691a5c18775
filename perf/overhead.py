"""Framework overhead per model call: real methods through the Runner on a zero-latency model.

The model is a scripted one that answers every call at once with the same short reply (so
prompts grow as in a real debate, never by echoing), served through the same stack a run
builds (ModelPool, retry, the run's gate). Every run writes its manifest, results and traces
(every call's ledger record) to a temporary run directory, as a real run does. The model's own
CPU time (its script and token counts) is measured and subtracted: what is left is maslab's.

Three views, for llm_debate (3 agents x 2 rounds, majority vote) and vanilla on `arith` tasks:

* run: the whole run at the run's default concurrency: (wall time - model time) / calls, and
  (process CPU - model time) / calls. It covers everything a sample costs (context, method,
  scoring, result and trace lines, reading the results back at the end), shared out over its
  calls.
* sample: the same run with one sample at a time (concurrency 1): per sample, (the wall and the
  CPU time from the previous sample's result to its own - its model time) / its calls, as
  median and p99. The first sample (warm-up) is left out.
* call: the call path alone: CALLS sequential ``agent.reply`` calls in one context the Runner
  made (its pool, gate, budget and sampling) on the tasks' prompts, each timed from entry to
  return minus the model's own time, as median and p99.

    python perf/overhead.py [--tasks 200] [--calls 2000] [--cache] [--profile] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import cProfile
import itertools
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import arguments, print_machine, print_table, spread, top_functions, write_json

from maslab import defaults
from maslab.harness.runner import RunConfig, Runner
from maslab.llm.registry import ModelSettings, register_provider
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Middleware
from maslab.store.run_store import ResultRecord
from maslab.testing import ScriptedModel

REPLY = (
    "Start from the first count and apply each change in order, checking every step. "
    "The answer is 42."
)
METHODS: dict[str, dict[str, Any]] = {"llm_debate": {"agents": 3, "rounds": 2}, "vanilla": {}}
SPEC = "perf:fixed"


class TimedModel(ScriptedModel):
    """A scripted model that keeps (when it ended, its CPU seconds) for each of its calls."""

    def __init__(self) -> None:
        super().__init__(lambda request: REPLY, name=SPEC)
        self.spans: list[tuple[float, float]] = []

    async def complete(self, request: ChatRequest) -> Completion:
        cpu = time.thread_time()
        completion = await super().complete(request)
        self.spans.append((time.perf_counter(), time.thread_time() - cpu))
        return completion

    def seconds(self, start: float = float("-inf"), end: float = float("inf")) -> float:
        """Its own time in the calls that ended in (start, end]."""
        lo = bisect.bisect_right(self.spans, (start, float("inf")))
        hi = bisect.bisect_right(self.spans, (end, float("inf")))
        return sum(seconds for _, seconds in self.spans[lo:hi])


@register_provider("perf")
def _perf(name: str, settings: ModelSettings) -> ChatModelBase:
    return TimedModel()


def _timed(runner: Runner) -> TimedModel:
    model = runner.models.get(SPEC)
    while isinstance(model, Middleware):
        model = model.inner
    assert isinstance(model, TimedModel)
    return model


Finished = list[tuple[float, float, ResultRecord]]


def _runner(
    method: str, tasks: int, concurrency: int, out: Path, cache: bool
) -> tuple[Runner, Finished]:
    """An opened Runner and the list its listener appends each finished sample to, with the
    wall and CPU time it finished at."""
    config = RunConfig(
        method=method,
        method_config=METHODS[method],
        benchmark="arith",
        benchmark_options={"size": tasks},
        model=SPEC,
        concurrency=concurrency,
        cache=str(out / "cache.sqlite") if cache else None,
        out=str(out / "run"),
    )
    finished: Finished = []
    runner = Runner(
        config,
        listener=lambda record: finished.append((time.perf_counter(), time.process_time(), record)),
    )
    runner.open()
    return runner, finished


def _calls(record: ResultRecord) -> int:
    """The sample's model calls, the method's and the evaluator's."""
    return int(record.usage["calls"] + record.scoring_usage.get("calls", 0))


def whole_run(method: str, tasks: int, out: Path, cache: bool) -> dict[str, Any]:
    """One run at the default concurrency: wall and CPU per call, the model's time left out."""
    runner, _ = _runner(method, tasks, defaults.CONCURRENCY, out, cache)
    cpu, wall = time.process_time(), time.perf_counter()
    records = asyncio.run(runner.run())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    calls = sum(map(_calls, records))
    model = _timed(runner).seconds()
    return {
        "samples": len(records),
        "calls": calls,
        "wall_s": wall,
        "model_s": model,
        "wall_us": (wall - model) / calls * 1e6,
        "cpu_us": (cpu - model) / calls * 1e6,
        "calls_per_s": calls / wall,
    }


def per_sample(method: str, tasks: int, out: Path, cache: bool) -> dict[str, Any]:
    """One run, one sample at a time: per sample, (its time - its model time) / its calls."""
    runner, finished = _runner(method, tasks, 1, out, cache)
    asyncio.run(runner.run())
    model = _timed(runner)
    wall, cpu = [], []
    for (start, start_cpu, _), (end, end_cpu, record) in itertools.pairwise(finished):
        own, calls = model.seconds(start, end), _calls(record)
        wall.append((end - start - own) / calls * 1e6)
        cpu.append((end_cpu - start_cpu - own) / calls * 1e6)
    return {
        **{f"sample_{k}_us": v for k, v in spread(wall).items()},
        **{f"sample_cpu_{k}_us": v for k, v in spread(cpu).items()},
    }


def call_path(calls: int, out: Path, cache: bool) -> dict[str, Any]:
    """``calls`` sequential agent.reply calls in one context the Runner made: entry to return,
    minus the model's own time."""
    runner, _ = _runner("vanilla", calls, defaults.CONCURRENCY, out, cache)
    prompts = [task.prompt() for task in runner.tasks]

    async def replies() -> list[float]:
        ctx = runner.solver.context("call-path", 0, asyncio.Semaphore(defaults.CONCURRENCY), None)
        agent = ctx.agent("solver")
        model = _timed(runner)
        times = []
        for prompt in prompts:
            started, own = time.perf_counter(), model.seconds()
            await agent.reply(prompt, round=0, remember=False)
            times.append((time.perf_counter() - started - (model.seconds() - own)) * 1e6)
        await runner.models.aclose()
        return times

    times = asyncio.run(replies())[len(prompts) // 10 :]  # the first tenth warms up
    runner.store.close()
    return {"calls": len(times), **{f"{k}_us": v for k, v in spread(times).items()}}


def measure(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    rows = []
    for method in METHODS:
        run = whole_run(method, args.tasks, tmp / f"{method}-run", args.cache)
        one = per_sample(method, args.tasks, tmp / f"{method}-sample", args.cache)
        rows.append({"method": method, **run, **one})
    return rows


def profile(args: argparse.Namespace, tmp: Path) -> dict[str, str]:
    """CPU-time cProfile of one more run per method (apart, so it never slows the figures)."""
    found = {}
    for method in METHODS:
        runner, _ = _runner(method, args.tasks, defaults.CONCURRENCY, tmp / method, args.cache)
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        asyncio.run(runner.run())
        profiler.disable()
        found[method] = top_functions(profiler, 15)
    return found


COLUMNS = [
    ("method", "method"), ("calls", "calls"), ("wall_us", "run µs/call"),
    ("cpu_us", "CPU µs/call"), ("calls_per_s", "calls/s"), ("sample_median_us", "sample median"),
    ("sample_p99_us", "p99"), ("sample_cpu_median_us", "sample CPU median"),
    ("sample_cpu_p99_us", "p99"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--tasks", type=int, default=200, help="arith tasks per method")
    parser.add_argument("--calls", type=int, default=2000, help="calls of the call path")
    parser.add_argument("--cache", action="store_true", help="with the response cache on")
    parser.add_argument("--profile", action="store_true", help="cProfile top 15 per method")
    args = parser.parse_args()
    info = print_machine()
    print(
        f"{args.tasks} arith tasks per method, zero-latency scripted model, ledger and traces on, "
        f"response cache {'on' if args.cache else 'off'}; runs at concurrency "
        f"{defaults.CONCURRENCY}, samples one at a time; µs per call, the model's own time left "
        "out"
    )
    with tempfile.TemporaryDirectory() as tmp:
        rows = measure(args, Path(tmp))
        path = call_path(args.calls, Path(tmp) / "call-path", args.cache)
        found = profile(args, Path(tmp) / "profile") if args.profile else None
    print_table(rows, COLUMNS)
    print(
        f"call path (agent.reply, {path['calls']} sequential calls): median "
        f"{path['median_us']:.1f} µs, p99 {path['p99_us']:.1f} µs"
    )
    result: dict[str, Any] = {"machine": info, "tasks": args.tasks, "runs": rows, "call": path}
    if found:
        result["profile"] = found
        for method, text in found.items():
            print(f"\ncProfile (CPU time), {method}, one more run at concurrency "
                  f"{defaults.CONCURRENCY}:")  # fmt: skip
            print(text)
    write_json(args.json, result)


if __name__ == "__main__":
    main()
