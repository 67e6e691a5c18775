"""tool_agent on BFCL end to end: a model that replays the ground truth through native tool calls
makes the whole path (episode, tool loop, environment, the composed answer, scoring) score
right; a model that skips a turn's calls scores wrong at that turn."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from bfcl_play import Turns, gold_calls, native_calls, sample_of, single_answer, wrong

from maslab.bench.benchmark import get_benchmark
from maslab.llm.types import ChatRequest
from maslab.methods.tool_agent import ToolAgent
from maslab.testing import Reply, ScriptedModel

pytestmark = pytest.mark.usefixtures("bfcl_wheel")


def replaying(turns_of: dict[str, Turns]) -> Callable[[ChatRequest], Reply | str]:
    """A responder that, at each user turn of a sample, makes that turn's calls, then closes the
    turn once their results are back."""

    def respond(request: ChatRequest) -> Reply | str:
        if request.messages[-1]["role"] == "tool":
            return "Done."
        users = [m for m in request.messages if m["role"] == "user"]
        calls = turns_of[sample_of(request)][len(users) - 1]
        return native_calls(calls) if calls else "Nothing to call."

    return respond


@pytest.mark.parametrize("category", ["base", "long_context", "miss_func", "miss_param"])
def test_replaying_the_ground_truth_scores_every_multi_turn_task_right(category):
    benchmark = get_benchmark("bfcl_multi_turn")(category=category)
    tasks = benchmark.load()
    model = ScriptedModel(replaying({t.id: gold_calls(t) for t in tasks}), native=["tools"])
    assert len(tasks) == 200 and wrong(ToolAgent(), benchmark, tasks, model) == {}


def test_skipping_a_turns_calls_fails_at_that_turn():
    benchmark = get_benchmark("bfcl_multi_turn")(category="base")
    turns = {t.id: gold_calls(t) for t in benchmark.load()}
    task = next(t for t in benchmark.load() if len(turns[t.id]) > 1 and turns[t.id][1])
    skipped = {task.id: [turns[task.id][0], [], *turns[task.id][2:]]}
    model = ScriptedModel(replaying(skipped), native=["tools"])
    assert wrong(ToolAgent(), benchmark, [task], model)[task.id].startswith("turn 1:")


@pytest.mark.parametrize("category", ["simple", "multiple", "parallel", "parallel_multiple"])
def test_replaying_the_ground_truth_scores_every_single_turn_task_right(category):
    benchmark = get_benchmark("bfcl_single")(category=category)
    tasks = benchmark.load()
    answers = {t.id: single_answer(t) for t in tasks}
    model = ScriptedModel(
        lambda request: native_calls(answers[sample_of(request)]), native=["tools"]
    )
    assert wrong(ToolAgent(), benchmark, tasks, model) == {}
    assert len(model.calls) == len(tasks)  # declared tools: one reply each, nothing executed
