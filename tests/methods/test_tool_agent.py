"""``tool_agent``: one agent, one tool loop per turn; declared-only tasks answer with the calls,
episodes on an environment with what was called per turn, ordinary questions with one reply;
the step cap; ``maslab run`` end to end on a toy benchmark."""

from __future__ import annotations

import json

import pytest
from helpers import PUT, TAKE, Shelf, lines, native_reply, run_cli

from maslab.bench.benchmark import _BENCHMARKS, Benchmark, register_benchmark
from maslab.core.method import _METHODS, get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel
from maslab.store.records import RESULTS, TRACES

ToolAgent = get_method("tool_agent")
DECLARED = Task(id="d1", question="Put 1 under a, then take a.", tools=(PUT, TAKE))
EPISODE = Task(id="e1", question="Put 1 under a.", turns=("Now take a.", ""))
PUT_A = {"key": "a", "value": "1"}


@pytest.mark.parametrize("native", [True, False])
async def test_declared_tools_answer_with_the_calls_of_the_first_reply_that_makes_any(native):
    listed = [{"name": "put", "arguments": PUT_A}, {"name": "take", "arguments": {"key": "a"}}]
    reply = native_reply(("put", PUT_A), ("take", {"key": "a"})) if native else json.dumps(listed)
    model = ScriptedModel([reply], native=["tools"] if native else [])
    outcome = await ToolAgent().arun(DECLARED, model)
    assert json.loads(outcome.answer) == listed
    assert len(model.calls) == 1 and outcome.context.tool_calls == []


async def test_declared_tools_and_no_call_answer_with_an_empty_list():
    outcome = await ToolAgent().arun(DECLARED, ScriptedModel(["No function fits."]))
    assert outcome.answer == "[]"


async def test_an_episode_answers_with_what_was_called_at_each_turn():
    model = ScriptedModel(
        [native_reply(("put", PUT_A)), "Put.", native_reply(("take", {"key": "a"})), "Took 1.",
         native_reply(("clear", {})), "Cleared."],
        native=["tools"],
    )  # fmt: skip
    outcome = await ToolAgent().arun(EPISODE, model, environment=Shelf())
    assert json.loads(outcome.answer) == [
        [{"name": "put", "arguments": PUT_A}],
        [{"name": "take", "arguments": {"key": "a"}}],
        [{"name": "clear", "arguments": {}}],
    ]
    assert outcome.solution.metadata == {
        "steps": [2, 2, 2], "capped": False, "method_answer": "Cleared.", "turns_delivered": 3,
    }  # fmt: skip
    requests = model.requests
    assert len(requests) == 6
    # one history through the episode; each turn offers its functions; an empty turn says so
    assert requests[2].messages[-1]["content"] == "Now take a."
    assert any(m.get("content") == "Put." for m in requests[2].messages)
    assert [t["function"]["name"] for t in requests[2].tools] == ["put", "take", "clear"]
    assert [t["function"]["name"] for t in requests[0].tools] == ["put", "take"]
    assert requests[4].messages[-1]["content"] == "You have more functions now. Go on with my " \
        "last request."  # fmt: skip
    assert requests[0].messages[0]["role"] == "system"


async def test_a_turn_cut_off_at_the_cap_ends_the_episode():
    model = ScriptedModel([native_reply(("put", PUT_A))], cycle=True, native=["tools"])
    outcome = await ToolAgent(max_steps=3).arun(EPISODE, model, environment=Shelf())
    assert len(model.calls) == 3 and len(outcome.context.tool_calls) == 3
    assert [len(turn) for turn in json.loads(outcome.answer)] == [3, 0, 0]
    assert outcome.solution.metadata["turns_delivered"] == 1
    assert outcome.solution.metadata["capped"] is True


async def test_an_ordinary_question_is_one_reply():
    model = ScriptedModel(["6 * 7 = 42. The answer is 42."], native=["tools"])
    outcome = await ToolAgent().arun(Task(id="q", question="What is 6 * 7?"), model)
    assert outcome.answer == "6 * 7 = 42. The answer is 42."
    assert len(model.calls) == 1 and model.requests[0].tools is None


def test_max_steps_is_checked():
    with pytest.raises(ConfigError, match="max_steps"):
        ToolAgent(max_steps=0)
    assert ToolAgent().config.max_steps == 20


# --- maslab run, end to end ----------------------------------------------------------------------


@pytest.fixture
def shelf_benchmark(monkeypatch):
    for registry in (_METHODS, _BENCHMARKS):
        registry.names()
        monkeypatch.setattr(registry, "_classes", dict(registry._classes))

    @register_benchmark("shelf_episodes")
    class ShelfEpisodes(Benchmark):
        """One episode of two turns on a fresh shelf; gold: the calls that do it."""

        def packaged_records(self, split: str) -> list[dict]:
            put = {"name": "put", "arguments": PUT_A}
            take = {"name": "take", "arguments": {"key": "a"}}
            return [{"id": "s0", "gold": json.dumps([[put], [take]])}]

        def to_task(self, record: dict, index: int, split: str) -> Task:
            return self.task(record["id"], "Put 1 under a.", record["gold"], turns=("Now take a.",))

        def environment(self, task: Task) -> Shelf:
            return Shelf()


def test_maslab_run_tool_agent_on_an_episode_benchmark(tmp_path, shelf_benchmark):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({
        "^Results of your calls": "Done.",
        "^Put 1 under a": json.dumps([{"name": "put", "arguments": PUT_A}]),
        "^Now take a": '[{"name": "take", "arguments": {"key": "a"}}, {"name": "take", '
                       '"arguments": {"key": "a"}}]',
    }))  # fmt: skip
    out = tmp_path / "run"
    model = f"scripted:{script}"
    status = run_cli("run", "--method", "tool_agent", "--benchmark", "shelf_episodes",
                     "--model", model, "--no-cache", "--quiet", "--out", out)  # fmt: skip
    assert status == 0
    [record] = lines(out / RESULTS)
    assert record["status"] == "ok"
    assert json.loads(record["answer"]) == [
        [{"name": "put", "arguments": PUT_A}],
        [{"name": "take", "arguments": {"key": "a"}}, {"name": "take", "arguments": {"key": "a"}}],
    ]
    assert (record["tool_calls"], record["tool_errors"]) == (3, 1)  # the second take finds none
    assert record["usage"]["calls"] == 4 and record["metadata"]["method_answer"] == "Done."
    [trace] = lines(out / TRACES)
    assert [(t["turn"], t["name"], t["error"]) for t in trace["tools"]] == [
        (0, "put", False), (1, "take", False), (1, "take", True),
    ]  # fmt: skip
