"""Episodes and the tool door: the context delivers a task's turns and records every call on
the sample's environment; the run builds the environment per sample, composes the answer of an
environment task from the calls, turn by turn, and records them (counts in the result, a typed
list in the trace)."""

from __future__ import annotations

import json

import pytest
from helpers import PUT, Shelf, lines

import maslab
from maslab.bench.benchmark import _BENCHMARKS, Benchmark, register_benchmark
from maslab.core.context import Budget, Context
from maslab.core.method import _METHODS, Method, register_method
from maslab.core.task import Solution, Task
from maslab.errors import ConfigError, ContextTooLong, ContextWindowFull, SampleEnded
from maslab.harness.samples import TOOL_RESULT_CHARS
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import ChatRequest
from maslab.store.records import TRACES
from maslab.store.run_store import RunStore

EPISODE = Task(id="e1", question="Put 1 under a.", turns=("Now take a.", ""), gold="-")


@pytest.fixture(autouse=True)
def own_registries(monkeypatch):
    for registry in (_METHODS, _BENCHMARKS):
        registry.names()
        monkeypatch.setattr(registry, "_classes", dict(registry._classes))


class WalksTheEpisode(Method):
    """At each turn: one model call, then the calls its reply names (``name key [value]`` per
    line), straight through the tool door (if there is an environment)."""

    async def solve(self, task: Task, ctx: Context) -> Solution:
        agent = ctx.agent("agent")
        said = ""
        async for turn in ctx.episode(task):
            said = (await agent.reply(turn.message or "(more functions)", round=turn.index)).content
            for line in said.splitlines() if ctx.environment else ():
                name, *args = line.split()
                ctx.call_tool(agent.name, name, dict(zip(("key", "value"), args, strict=False)))
        return Solution(answer=said)


class OneTurnOnly(Method):
    """A single-turn method: never asks for the episode; one call, one tool call."""

    async def solve(self, task: Task, ctx: Context) -> Solution:
        await ctx.agent("solo").reply(task.prompt())
        ctx.call_tool("solo", "put", {"key": "a", "value": "1"})
        return Solution(answer="I put it.")


# --- the context ---------------------------------------------------------------------------------


async def test_the_episode_delivers_each_turn_with_its_message_and_functions():
    ctx = Context(ScriptedModel(), environment=Shelf())
    seen = []
    async for turn in ctx.episode(EPISODE):
        seen.append((turn.index, turn.message, [f["name"] for f in turn.functions], ctx.turn))
    assert seen == [
        (0, EPISODE.prompt(), ["put", "take"], 0),
        (1, "Now take a.", ["put", "take", "clear"], 1),
        (2, "", ["put", "take", "clear"], 2),
    ]


async def test_without_an_environment_each_turn_offers_the_declared_tools():
    task = Task(id="d", question="Put 1 under a.", tools=(PUT,))
    turns = [turn async for turn in Context(ScriptedModel()).episode(task)]
    assert [(t.index, t.functions) for t in turns] == [(0, (PUT,))]


def test_the_tool_door_runs_records_and_turns_refusals_into_observations():
    ctx = Context(ScriptedModel(), environment=Shelf())
    assert ctx.call_tool("a", "put", {"key": "k", "value": "v"}).result == "put k"
    ctx.turn = 1
    refused = ctx.call_tool("b", "take", {"key": "missing"})
    assert (refused.result, refused.error) == ("error: nothing under 'missing'", True)
    records = [(r.turn, r.agent, r.name, r.arguments, r.result, r.error) for r in ctx.tool_calls]
    assert records == [
        (0, "a", "put", {"key": "k", "value": "v"}, "put k", False),
        (1, "b", "take", {"key": "missing"}, "error: nothing under 'missing'", True),
    ]
    assert all(r.duration_s >= 0 for r in ctx.tool_calls)
    assert ctx.usage.calls == 0  # no model call, no tokens


def test_the_tool_door_lets_an_environment_bug_through_and_refuses_without_one():
    with pytest.raises(KeyError):
        Context(ScriptedModel(), environment=Shelf()).call_tool("a", "boom", {})
    with pytest.raises(RuntimeError, match="no environment"):
        Context(ScriptedModel()).call_tool("a", "put", {})
    with pytest.raises(ConfigError, match="environment must be an Environment"):
        Context(ScriptedModel(), environment="shelf")


async def test_no_tool_call_starts_once_the_sample_has_ended():
    ctx = Context(ScriptedModel(), environment=Shelf())
    await ctx.settle()
    with pytest.raises(SampleEnded):
        ctx.call_tool("a", "put", {"key": "k", "value": "v"})


async def test_tool_calls_count_against_no_budget():
    ctx = Context(ScriptedModel(), environment=Shelf(), budget=Budget(max_calls=1))
    for _ in range(3):
        ctx.call_tool("a", "put", {"key": "k", "value": "v"})
    await ctx.agent("a").reply("still allowed")
    assert len(ctx.tool_calls) == 3 and ctx.usage.calls == 1


# --- the answer of an environment task ---------------------------------------------------------


async def test_the_answer_is_what_was_called_turn_by_turn_and_the_methods_text_is_kept():
    model = ScriptedModel(["put a 1\ntake b", "take a", "clear"])
    outcome = await WalksTheEpisode().arun(EPISODE, model, environment=Shelf())
    assert json.loads(outcome.answer) == [
        [{"name": "put", "arguments": {"key": "a", "value": "1"}},
         {"name": "take", "arguments": {"key": "b"}}],  # errored, still called
        [{"name": "take", "arguments": {"key": "a"}}],
        [{"name": "clear", "arguments": {}}],
    ]  # fmt: skip
    assert outcome.solution.metadata == {"method_answer": "clear", "turns_delivered": 3}


async def test_a_method_that_never_asks_for_the_episode_is_given_the_first_turn_only():
    model = ScriptedModel(["ok"])
    outcome = await OneTurnOnly().arun(EPISODE, model, environment=Shelf())
    assert json.loads(outcome.answer) == [
        [{"name": "put", "arguments": {"key": "a", "value": "1"}}],
        [],
        [],
    ]
    assert outcome.solution.metadata == {"method_answer": "I put it.", "turns_delivered": 1}
    assert len(model.calls) == 1 and model.requests[0].messages[-1]["content"] == EPISODE.prompt()


async def test_an_ordinary_task_keeps_the_methods_answer():
    task = Task(id="q", question="What is 6 * 7?")
    outcome = await WalksTheEpisode().arun(task, ScriptedModel(["42"]))
    assert outcome.answer == "42" and outcome.solution.metadata == {}


async def test_a_budget_stop_mid_episode_answers_with_the_calls_made_so_far():
    model = ScriptedModel(["put a 1", "take a", "clear"])
    outcome = await WalksTheEpisode().arun(
        EPISODE, model, environment=Shelf(), budget=Budget(max_calls=2)
    )
    assert json.loads(outcome.answer) == [
        [{"name": "put", "arguments": {"key": "a", "value": "1"}}],
        [{"name": "take", "arguments": {"key": "a"}}],
        [],
    ]
    metadata = outcome.solution.metadata
    assert metadata["turns_delivered"] == 3 and "calls" in metadata["budget"]
    assert metadata["method_answer"] == ""


async def test_a_full_context_window_ends_the_episode_like_a_budget_with_the_calls_so_far():
    def respond(request: ChatRequest) -> str:
        if len(request.messages) > 3:  # the third turn's prompt does not fit
            raise ContextTooLong("HTTP 400: maximum context length is 64 tokens", status=400)
        return "put a 1" if len(request.messages) == 1 else "take a"

    ctx = Context(ScriptedModel(respond), environment=Shelf())
    solution = await WalksTheEpisode().run_sample(EPISODE, ctx)
    assert isinstance(ctx.budget_stop, ContextWindowFull)
    assert json.loads(solution.answer) == [
        [{"name": "put", "arguments": {"key": "a", "value": "1"}}],
        [{"name": "take", "arguments": {"key": "a"}}],
        [],
    ]
    assert solution.metadata["budget"].startswith("context window full: ")
    assert "maximum context length" in solution.metadata["budget"]
    assert ctx.ledger.records[-1].error is not None  # the failed call is recorded


async def test_a_judge_whose_prompt_does_not_fit_is_an_error_not_a_stop():
    def respond(request: ChatRequest) -> str:
        raise ContextTooLong("HTTP 400: maximum context length is 64 tokens", status=400)

    ctx = Context(ScriptedModel(respond))
    with pytest.raises(ContextTooLong):
        await ctx.chat("judge this", purpose="scoring")
    assert ctx.budget_stop is None


# --- a run: the environment per sample, the record and the trace ------------------------------


def shelf_benchmark() -> None:
    @register_benchmark("shelf")
    class ShelfBench(Benchmark):
        """Two episodes on a fresh shelf each."""

        def packaged_records(self, split: str) -> list[dict]:
            return [{"id": "s0"}, {"id": "s1"}]

        def to_task(self, record: dict, index: int, split: str) -> Task:
            return self.task(record["id"], "Put 1 under a.", "-", turns=("Now take a.",))

        def environment(self, task: Task) -> Shelf:
            return Shelf()

    register_method("walks")(WalksTheEpisode)


def test_a_run_builds_an_environment_per_sample_and_records_its_calls(tmp_path):
    shelf_benchmark()
    long = "x" * (TOOL_RESULT_CHARS + 50)
    # the same script for both samples: each takes a off its own shelf (one shelf would refuse)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"Put 1": f"put a {long}\ntake b", "take a": "take a"}))
    run = maslab.evaluate(
        "walks", "shelf", f"scripted:{script}", out=tmp_path / "run", cache=False, progress=False
    )
    for record in run.records:
        assert (record.status, record.tool_calls, record.tool_errors) == ("ok", 3, 1)
        assert [len(turn) for turn in json.loads(record.answer)] == [2, 1]
        assert record.metadata["method_answer"] == "take a"
        assert record.usage["calls"] == 2

    trace = next(RunStore(run.dir).traces("s0"))
    assert [(t.turn, t.agent, t.name, t.error) for t in trace.tools] == [
        (0, "agent", "put", False), (0, "agent", "take", True), (1, "agent", "take", False),
    ]  # fmt: skip
    assert trace.tools[2].result.startswith(long[:TOOL_RESULT_CHARS])
    assert trace.tools[2].result.endswith("... [50 more chars]")
    assert trace.tools[0].arguments == {"key": "a", "value": long}


def test_an_ordinary_run_writes_no_tool_list(tmp_path):
    run = maslab.evaluate(
        "vanilla", "arith", "scripted:echo", limit=1, out=tmp_path / "run", cache=False,
        progress=False,
    )  # fmt: skip
    [line] = lines(run.dir / TRACES)
    assert "tools" not in line
    assert (run.records[0].tool_calls, run.records[0].tool_errors) == (0, 0)
