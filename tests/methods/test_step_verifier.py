"""``step_verifier``: an actor's tool loop, every step with calls checked by a verifier.

Exact call counts on the toy shelf: continue then done, a retry whose hint is the actor's next
prompt, the step cap (which ends the episode), a step without calls ending the turn; declared
tools with and without a retry; a verifier reply without JSON counts as "continue"; the native
and text paths; a budget stop mid-turn keeps the calls made so far; ``maslab run`` on BFCL.
"""

from __future__ import annotations

import json

import pytest
from bfcl_play import assert_run_delivers_every_turn
from helpers import PUT, TAKE, Shelf, agent_of, making, prompts_of

from maslab.core.context import Budget
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel

StepVerifier = get_method("step_verifier")
ONE_TURN = Task(id="e1", question="Put 1 under a.")
EPISODE = Task(id="e2", question="Put 1 under a.", turns=("Now take a.",))
DECLARED = Task(id="d1", question="Put 1 under a.", tools=(PUT, TAKE))
PUT_A = {"key": "a", "value": "1"}
PUT_B = {"key": "b", "value": "2"}
CONTINUE = '{"verdict": "continue", "hint": ""}'
DONE = '{"verdict": "done", "hint": ""}'


def retry(hint: str) -> str:
    return json.dumps({"verdict": "retry", "hint": hint})


def scripted(replies: list, native: bool) -> ScriptedModel:
    return ScriptedModel(replies, native=["tools"] if native else [])


def who(model: ScriptedModel) -> list[str]:
    return [agent_of(request) for request in model.requests]


PATHS = pytest.mark.parametrize("native", [True, False], ids=["native", "text"])


@PATHS
async def test_continue_then_done_ends_the_turn(native):
    model = scripted([making(native, ("put", PUT_A)), CONTINUE,
                      making(native, ("put", PUT_B)), DONE], native)  # fmt: skip
    outcome = await StepVerifier().arun(ONE_TURN, model, environment=Shelf())
    assert who(model) == ["actor", "verifier", "actor", "verifier"]
    assert json.loads(outcome.answer) == [
        [{"name": "put", "arguments": PUT_A}, {"name": "put", "arguments": PUT_B}]
    ]
    metadata = outcome.solution.metadata
    assert (metadata["steps"], metadata["verdicts"], metadata["capped"]) == (
        [2], [["continue", "done"]], False,
    )  # fmt: skip
    # the verifier reads the request and the step's calls with their results
    assert "Put 1 under a." in model.requests[1].messages[-1]["content"]
    assert 'put({"key": "a", "value": "1"}) -> put a' in model.requests[1].messages[-1]["content"]
    if native:  # "continue" sends the actor's history as it is: the tool results last
        assert model.requests[2].messages[-1]["role"] == "tool"


@PATHS
async def test_retry_sends_the_hint_as_the_actors_next_prompt(native):
    model = scripted([making(native, ("take", {"key": "b"})), retry("Take a, not b."),
                      making(native, ("take", {"key": "a"})), DONE], native)  # fmt: skip
    shelf = Shelf()
    shelf.items["a"] = "1"
    outcome = await StepVerifier().arun(ONE_TURN, model, environment=shelf)
    assert len(model.calls) == 4
    assert model.requests[2].messages[-1]["content"].startswith("Take a, not b.")
    assert [(r.name, r.error) for r in outcome.context.tool_calls] == [
        ("take", True), ("take", False),
    ]  # fmt: skip
    assert outcome.solution.metadata["verdicts"] == [["retry", "done"]]


@PATHS
async def test_a_step_without_calls_ends_the_turn(native):
    model = scripted([making(native, ("put", PUT_A)), CONTINUE, "Put 1 under a.",
                      making(native, ("take", {"key": "a"})), DONE], native)  # fmt: skip
    outcome = await StepVerifier().arun(EPISODE, model, environment=Shelf())
    assert who(model) == ["actor", "verifier", "actor", "actor", "verifier"]
    assert outcome.solution.metadata["steps"] == [2, 1]
    assert json.loads(outcome.answer) == [
        [{"name": "put", "arguments": PUT_A}], [{"name": "take", "arguments": {"key": "a"}}],
    ]  # fmt: skip
    assert prompts_of(outcome.context, "actor")[2].startswith("Now take a.")


async def test_the_step_cap_cuts_the_turn_off_and_ends_the_episode():
    model = ScriptedModel([making(True, ("put", PUT_A)), CONTINUE], cycle=True, native=["tools"])
    outcome = await StepVerifier(max_steps=3).arun(EPISODE, model, environment=Shelf())
    assert len(model.calls) == 6 == 2 * 3  # 3 actor steps, each checked
    assert [len(turn) for turn in json.loads(outcome.answer)] == [3, 0]
    metadata = outcome.solution.metadata
    assert (metadata["capped"], metadata["turns_delivered"], metadata["steps"]) == (True, 1, [3])


async def test_done_at_the_cap_is_no_cut_off():
    model = scripted([making(True, ("put", PUT_A)), DONE, making(True, ("take", {"key": "a"})),
                      DONE], native=True)  # fmt: skip
    outcome = await StepVerifier(max_steps=1).arun(EPISODE, model, environment=Shelf())
    assert len(model.calls) == 4 and outcome.solution.metadata["capped"] is False
    assert outcome.solution.metadata["turns_delivered"] == 2


@PATHS
async def test_a_verifier_reply_without_json_counts_as_continue(native):
    model = scripted([making(native, ("put", PUT_A)), "Looks fine to me.", "All done."], native)
    outcome = await StepVerifier().arun(ONE_TURN, model, environment=Shelf())
    assert who(model) == ["actor", "verifier", "actor"]
    assert outcome.solution.metadata["verdicts"] == [["continue"]]
    assert outcome.solution.metadata["method_answer"] == "All done."


@PATHS
async def test_declared_tools_are_checked_once(native):
    model = scripted([making(native, ("put", PUT_A)), CONTINUE], native)
    outcome = await StepVerifier().arun(DECLARED, model)
    assert who(model) == ["actor", "verifier"]
    assert json.loads(outcome.answer) == [{"name": "put", "arguments": PUT_A}]
    assert outcome.context.tool_calls == []


@PATHS
async def test_declared_tools_retry_once_and_answer_with_the_last_proposal(native):
    model = scripted([making(native, ("put", PUT_B)), retry("The key is a, the value 1."),
                      making(native, ("put", PUT_A))], native)  # fmt: skip
    outcome = await StepVerifier().arun(DECLARED, model)
    assert who(model) == ["actor", "verifier", "actor"]
    assert json.loads(outcome.answer) == [{"name": "put", "arguments": PUT_A}]
    assert outcome.solution.metadata["steps"] == [2]
    retried = model.requests[2].messages
    assert retried[-1]["content"].startswith("The key is a, the value 1.")
    if native:  # the proposed calls are answered in the history (nothing ran)
        assert retried[-2]["role"] == "tool" and retried[-2]["tool_call_id"] == "call_1"


async def test_declared_tools_and_no_call_answer_with_an_empty_list():
    model = ScriptedModel(["No function fits."])
    outcome = await StepVerifier().arun(DECLARED, model)
    assert outcome.answer == "[]" and len(model.calls) == 1


async def test_an_ordinary_question_is_one_reply():
    model = ScriptedModel(["The answer is 42."], native=["tools"])
    outcome = await StepVerifier().arun(Task(id="q", question="What is 6 * 7?"), model)
    assert outcome.answer == "The answer is 42."
    assert len(model.calls) == 1 and model.requests[0].tools is None


async def test_a_budget_stop_mid_turn_keeps_the_calls_so_far():
    model = ScriptedModel([making(True, ("put", PUT_A)), CONTINUE], cycle=True, native=["tools"])
    outcome = await StepVerifier().arun(
        EPISODE, model, environment=Shelf(), budget=Budget(max_calls=5)
    )
    assert len(model.calls) == 5  # actor, verifier, actor, verifier, actor: the sixth stops
    assert [len(turn) for turn in json.loads(outcome.answer)] == [3, 0]
    assert "budget" in outcome.solution.metadata


async def test_a_budget_stop_on_declared_tools_answers_with_the_proposal():
    model = ScriptedModel([making(True, ("put", PUT_A)), CONTINUE], native=["tools"])
    outcome = await StepVerifier().arun(DECLARED, model, budget=Budget(max_calls=1))
    assert json.loads(outcome.answer) == [{"name": "put", "arguments": PUT_A}]
    assert "budget" in outcome.solution.metadata


def test_structure_and_config():
    topology = StepVerifier().structure()
    assert list(topology.nodes) == ["actor", "verifier"]
    assert StepVerifier().config.max_steps == 10
    with pytest.raises(ConfigError, match="max_steps"):
        StepVerifier(max_steps=0)


@pytest.mark.usefixtures("bfcl_wheel")
def test_maslab_run_on_bfcl_multi_turn_completes(tmp_path):
    assert_run_delivers_every_turn("step_verifier", tmp_path / "run")
