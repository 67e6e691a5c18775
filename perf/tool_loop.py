"""The tool loop's overhead per step: ms of wall and CPU per step of `act` on a zero-latency model.

A step is one reply of the agent and the call it makes (`add` on a counter: a trivial
environment). The scripted model calls at every reply, so each episode runs its --steps replies
to the cap, the history growing as it does in a real loop. The model's own CPU time (its script
and token counts) is measured and subtracted from both figures: what is left is maslab's. Four
paths, each over --episodes episodes one after another:

* native: `act` in a bare Context, the calls as the reply's tool calls and each result a
  ``tool`` turn.
* text: the same with a model without native tools: the calls written as a JSON list in the
  reply's text and parsed from it, the results one user turn.
* runner context: native `act` in contexts the Runner made (its pool, gate, budget, and the
  ledger recording every call).
* runner, whole run: tool_agent through the Runner on one counter episode per task, native:
  everything the run does besides (the episode, scoring, result and trace lines written, the
  traces' tool lists included), shared out over the steps.

    python perf/tool_loop.py [--episodes 50] [--steps 20] [--json PATH]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchkit import arguments, print_machine, print_table, write_json

from maslab import defaults
from maslab.bench.benchmark import Benchmark, register_benchmark
from maslab.core.context import Context
from maslab.core.environment import Environment
from maslab.core.task import Task
from maslab.harness.runner import RunConfig, Runner
from maslab.kit.acting import act
from maslab.llm.registry import ModelSettings, register_provider
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, FunctionCall, Middleware
from maslab.plugin_config import PluginConfig
from maslab.testing import Reply, ScriptedModel

ADD = {
    "name": "add",
    "description": "Add n to the counter and return its new value.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}
NATIVE_CALL = Reply(tool_calls=(FunctionCall("call_0", "add", '{"n": 1}'),))
WRITTEN_CALL = '[{"name": "add", "arguments": {"n": 1}}]'
SPEC = "perf_tools:counter"


class Counter(Environment):
    """A counter that ``add`` raises: the least an environment can do."""

    def __init__(self) -> None:
        self.total = 0

    def functions(self, turn: int) -> list[dict[str, Any]]:
        return [ADD]

    def execute(self, name: str, arguments: Mapping[str, Any]) -> str:
        self.total += int(arguments["n"])
        return str(self.total)


class TimedModel(ScriptedModel):
    """A scripted model that calls ``add`` at every reply and sums its own CPU seconds."""

    def __init__(self, native: bool) -> None:
        super().__init__(
            lambda request: NATIVE_CALL if native else WRITTEN_CALL,
            name=SPEC,
            native=["tools"] if native else [],
        )
        self.own_s = 0.0

    async def complete(self, request: ChatRequest) -> Completion:
        cpu = time.thread_time()
        completion = await super().complete(request)
        self.own_s += time.thread_time() - cpu
        return completion


@register_provider("perf_tools")
def _perf_tools(name: str, settings: ModelSettings) -> ChatModelBase:
    return TimedModel(native=True)


@register_benchmark("perf_counter")
class CounterEpisodes(Benchmark):
    """One-turn episodes on a fresh counter each (``size`` of them)."""

    class Config(PluginConfig):
        size: int = 10

    def packaged_records(self, split: str) -> list[dict[str, Any]]:
        return [{"id": f"c{i}"} for i in range(self.config.size)]

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        return self.task(record["id"], "Count up.", "-")

    def environment(self, task: Task) -> Counter:
        return Counter()


def _figures(path: str, steps: int, wall: float, cpu: float, model: float) -> dict[str, Any]:
    """A path's row: ms per step of wall and CPU, the model's own time left out."""
    return {
        "path": path,
        "steps": steps,
        "wall_ms": (wall - model) / steps * 1000,
        "cpu_ms": (cpu - model) / steps * 1000,
        "model_ms": model / steps * 1000,
    }


async def _episodes(new_context: Any, model: TimedModel, episodes: int, steps: int) -> int:
    """``episodes`` capped ``act`` loops, each in a new context; the steps they took."""
    taken = 0
    for i in range(episodes):
        ctx: Context = new_context(i)
        acted = await act(ctx.agent("agent"), "Count up.", [ADD], max_steps=steps, round=0)
        assert acted.capped and len(acted.calls) == steps
        taken += acted.steps
    return taken


def bare(native: bool, episodes: int, steps: int) -> dict[str, Any]:
    """``act`` in bare contexts, on the native or the text path."""
    model = TimedModel(native)

    def new_context(i: int) -> Context:
        return Context(model, environment=Counter(), sample_id=f"e{i}")

    wall, cpu = time.perf_counter(), time.process_time()
    taken = asyncio.run(_episodes(new_context, model, episodes, steps))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return _figures("native" if native else "text", taken, wall, cpu, model.own_s)


def _runner(episodes: int, steps: int, out: Path) -> tuple[Runner, TimedModel]:
    config = RunConfig(
        method="tool_agent",
        method_config={"max_steps": steps},
        benchmark="perf_counter",
        benchmark_options={"size": episodes},
        model=SPEC,
        out=str(out),
    )
    runner = Runner(config)
    runner.open()
    model = runner.models.get(SPEC)
    while isinstance(model, Middleware):
        model = model.inner
    assert isinstance(model, TimedModel)
    return runner, model


def runner_context(episodes: int, steps: int, out: Path) -> dict[str, Any]:
    """``act`` in contexts the Runner made: its pool, gate, budget and ledger."""
    runner, model = _runner(episodes, steps, out)
    gate = asyncio.Semaphore(defaults.CONCURRENCY)

    def new_context(i: int) -> Context:
        return runner.solver.context(f"e{i}", 0, gate, runner.config.budget(), Counter())

    async def run() -> int:
        taken = await _episodes(new_context, model, episodes, steps)
        await runner.models.aclose()
        return taken

    wall, cpu = time.perf_counter(), time.process_time()
    taken = asyncio.run(run())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    runner.store.close()
    return _figures("runner context", taken, wall, cpu, model.own_s)


def whole_run(episodes: int, steps: int, out: Path) -> dict[str, Any]:
    """tool_agent through the Runner: per step, the whole run's time."""
    runner, model = _runner(episodes, steps, out)
    wall, cpu = time.perf_counter(), time.process_time()
    records = asyncio.run(runner.run())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert all(r.status == "ok" and r.tool_calls == steps for r in records), records
    taken = int(sum(r.usage["calls"] for r in records))
    return _figures("runner, whole run", taken, wall, cpu, model.own_s)


COLUMNS = [
    ("path", "path"), ("steps", "steps"), ("wall_ms", "wall ms/step", "{:.3f}"),
    ("cpu_ms", "CPU ms/step", "{:.3f}"), ("model_ms", "model ms/step (left out)", "{:.3f}"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--episodes", type=int, default=50, help="episodes per path")
    parser.add_argument("--steps", type=int, default=20, help="steps per episode (its cap)")
    args = parser.parse_args()
    info = print_machine()
    print(
        f"{args.episodes} episodes of {args.steps} steps per path, one call per step on a "
        "counter, zero-latency scripted model; ms per step, the model's own time left out"
    )
    bare(True, 1, 2)  # a warm-up episode: first-use costs (lazy imports) are no step's
    rows = [bare(True, args.episodes, args.steps), bare(False, args.episodes, args.steps)]
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(runner_context(args.episodes, args.steps, Path(tmp) / "context"))
        rows.append(whole_run(args.episodes, args.steps, Path(tmp) / "run"))
    print_table(rows, COLUMNS)
    write_json(args.json, {"machine": info, "episodes": args.episodes, "paths": rows})


if __name__ == "__main__":
    main()
