"""Playing BFCL's ground truth through a method (test helpers, not tests): the ground truth as
answers and as native calls, the sample a request belongs to, and scoring a method's runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helpers import lines, native_reply, run_cli

from maslab.bench.benchmark import Benchmark
from maslab.bench.evaluation import Score, get_evaluator
from maslab.benchmarks.bfcl.environment import BFCLEnvironment
from maslab.core.context import Context
from maslab.core.method import Method
from maslab.core.task import Task
from maslab.evaluators.bfcl import gold_turns
from maslab.llm.types import ChatRequest
from maslab.testing import Reply, ScriptedModel

Turns = list[list[dict[str, Any]]]


def single_answer(task: Task) -> list[dict[str, Any]]:
    """The first possible answer as calls: an option of ``""`` omits an optional parameter."""
    parameters = {tool["name"]: tool["parameters"] for tool in task.tools}
    calls = []
    for possible in json.loads(task.gold):
        ((name, options),) = possible.items()
        schema = parameters[name]
        arguments = {}
        for key, values in options.items():
            given = [value for value in values if value != ""]
            optional = "" in values and key not in schema["required"]
            if given and key in schema["properties"] and not optional:
                arguments[key] = _first(given[0])
        calls.append({"name": name, "arguments": arguments})
    return calls


def _first(value: Any) -> Any:
    """A possible object holds lists of possible values per key: take the first of each."""
    if isinstance(value, dict):
        return {key: values[0] for key, values in value.items() if values and values[0] != ""}
    if isinstance(value, list):
        return [_first(item) if isinstance(item, dict) else item for item in value]
    return value


def gold_calls(task: Task) -> Turns:
    """A multi-turn task's ground truth as the answer contract's calls, turn by turn."""
    environment = BFCLEnvironment.for_task(task)
    return [[call.as_json() for call in turn] for turn in gold_turns(task, environment)]


def native_calls(calls: list[dict[str, Any]]) -> Reply:
    """One reply making all of ``calls`` (the answer contract's ``{"name", "arguments"}``)
    natively, in order."""
    return native_reply(*((c["name"], c["arguments"]) for c in calls))


def sample_of(request: ChatRequest) -> str:
    """The sample a request belongs to (its draw scope names it)."""
    return request.scope.split("\x1f")[1]


def wrong(
    method: Method, benchmark: Benchmark, tasks: Sequence[Task], model: ScriptedModel
) -> dict[str, str]:
    """The tasks ``method`` gets wrong on ``model``, each sample run as a run makes it (a fresh
    environment where the benchmark has one, the benchmark's evaluator), with why."""

    async def score(task: Task) -> Score:
        ctx = Context(model, environment=benchmark.environment(task), sample_id=task.id)
        solution = await method.run_sample(task, ctx)
        return await get_evaluator(benchmark.evaluator)().score(task, solution.answer, ctx=ctx)

    async def every_task() -> list[Score]:
        return await asyncio.gather(*map(score, tasks))

    scores = asyncio.run(every_task())
    return {t.id: s.explanation or "" for t, s in zip(tasks, scores, strict=True) if not s.correct}


def assert_run_delivers_every_turn(method: str, out: Path) -> None:
    """``maslab run`` of ``method`` on three ``bfcl_multi_turn`` tasks with the echo model ends
    well, every turn of each episode delivered (none cut short)."""
    status = run_cli("run", "--method", method, "--benchmark", "bfcl_multi_turn", "--limit", "3",
                     "--model", "scripted:echo", "--no-cache", "--quiet", "--out", out)  # fmt: skip
    records = lines(out / "results.jsonl")
    assert status == 0 and len(records) == 3
    assert all(
        r["metadata"]["turns_delivered"] == len(json.loads(r["answer"])) > 1 for r in records
    )
