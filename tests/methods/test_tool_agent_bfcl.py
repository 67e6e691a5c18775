"""tool_agent on BFCL end to end: a model that replays the ground truth through native tool calls
makes the whole path (episode, tool loop, environment, the composed answer, scoring) score
right; a model that skips a turn's calls scores wrong at that turn."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from bfcl_answers import single_answer

from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import Score, get_evaluator
from maslab.benchmarks.bfcl.environment import BFCLEnvironment
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.evaluators.bfcl import gold_turns
from maslab.llm.types import ChatRequest, FunctionCall
from maslab.methods.tool_agent import ToolAgent
from maslab.testing import Reply, ScriptedModel

pytestmark = pytest.mark.usefixtures("bfcl_wheel")

Turns = list[list[dict[str, Any]]]


def calling(calls: list[dict[str, Any]]) -> Reply:
    """One reply making all of ``calls`` natively, in order."""
    return Reply(
        tool_calls=tuple(
            FunctionCall(f"call_{i}", c["name"], json.dumps(c["arguments"]))
            for i, c in enumerate(calls)
        )
    )


def replaying(turns_of: dict[str, Turns]) -> Callable[[ChatRequest], Reply | str]:
    """A responder that, at each user turn of a task (its sample, known by the request's draw
    scope), makes that turn's calls, then closes the turn once their results are back."""

    def respond(request: ChatRequest) -> Reply | str:
        if request.messages[-1]["role"] == "tool":
            return "Done."
        sample = request.scope.split("\x1f")[1]
        users = [m for m in request.messages if m["role"] == "user"]
        calls = turns_of[sample][len(users) - 1]
        return calling(calls) if calls else "Nothing to call."

    return respond


async def solve_and_score(task: Task, model: ScriptedModel) -> Score:
    """One sample as a run makes it: a fresh environment, the method, the benchmark's scoring."""
    benchmark = get_benchmark("bfcl_multi_turn")()
    ctx = Context(model, environment=benchmark.environment(task), sample_id=task.id)
    solution = await ToolAgent().run_sample(task, ctx)
    return await get_evaluator(benchmark.evaluator)().score(task, solution.answer, ctx=ctx)


def multi_turn(category: str) -> tuple[list[Task], dict[str, Turns]]:
    tasks = get_benchmark("bfcl_multi_turn")(category=category).load()
    turns = {
        t.id: [[c.as_json() for c in turn] for turn in gold_turns(t, BFCLEnvironment.for_task(t))]
        for t in tasks
    }
    return tasks, turns


@pytest.mark.parametrize("category", ["base", "long_context", "miss_func", "miss_param"])
def test_replaying_the_ground_truth_scores_every_multi_turn_task_right(category):
    tasks, turns = multi_turn(category)
    model = ScriptedModel(replaying(turns), native=["tools"])

    async def all_tasks() -> list[Score]:
        return await asyncio.gather(*(solve_and_score(t, model) for t in tasks))

    scores = asyncio.run(all_tasks())
    wrong = {t.id: s.explanation for t, s in zip(tasks, scores, strict=True) if not s.correct}
    assert len(tasks) == 200 and wrong == {}


def test_skipping_a_turns_calls_fails_at_that_turn():
    tasks, turns = multi_turn("base")
    task = next(t for t in tasks if len(turns[t.id]) > 1 and turns[t.id][1])
    skipped = {task.id: [turns[task.id][0], [], *turns[task.id][2:]]}
    model = ScriptedModel(replaying(skipped), native=["tools"])
    score = asyncio.run(solve_and_score(task, model))
    assert not score.correct and score.details["first_failed_turn"] == 1


@pytest.mark.parametrize("category", ["simple", "multiple", "parallel", "parallel_multiple"])
def test_replaying_the_ground_truth_scores_every_single_turn_task_right(category):
    benchmark = get_benchmark("bfcl_single")(category=category)
    tasks = benchmark.load()
    answers = {t.id: single_answer(t) for t in tasks}

    def respond(request: ChatRequest) -> Reply:
        return calling(answers[request.scope.split("\x1f")[1]])

    model = ScriptedModel(respond, native=["tools"])

    async def score(task: Task) -> Score:
        ctx = Context(model, sample_id=task.id)
        solution = await ToolAgent().run_sample(task, ctx)
        return await get_evaluator(benchmark.evaluator)().score(task, solution.answer, ctx=ctx)

    async def all_tasks() -> list[Score]:
        return await asyncio.gather(*map(score, tasks))

    scores = asyncio.run(all_tasks())
    assert [t.id for t, s in zip(tasks, scores, strict=True) if not s.correct] == []
    assert len(model.calls) == len(tasks)  # declared tools: one reply each, nothing executed
