"""Structural tests of free_discussion (role-less agents in one conversation) on scripted models."""

from __future__ import annotations

from itertools import pairwise

import pytest
from helpers import TASK, agent_of, method_runner

from maslab.analysis.run_result import load_run
from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import ChatRequest
from maslab.methods.free_discussion import CUE, SYSTEM, FreeDiscussion


def counting() -> ScriptedModel:
    """Replies that say who spoke and the how-manieth call it was: 'participant_2 #5 ...'."""
    seen: list[str] = []

    def reply(request: ChatRequest) -> str:
        seen.append(agent_of(request))
        return f"{seen[-1]} #{len(seen)}: the answer is 42."

    return ScriptedModel(reply)


def user_text(request: ChatRequest) -> str:
    return "\n\n".join(m["content"] for m in request.messages if m["role"] == "user")


run = method_runner(FreeDiscussion, TASK)


def test_defaults_and_config_checks():
    cfg = FreeDiscussion().config
    assert (cfg.agents, cfg.rounds, cfg.naming, cfg.introduce, cfg.transcript) == (
        3, 3, "numbered", True, "single_message",
    )  # fmt: skip
    assert FreeDiscussion().agent_names() == ("participant_1", "participant_2", "participant_3")
    assert get_method("free_discussion") is FreeDiscussion
    FreeDiscussion(naming="named", names=["Ann", "Bo", "Cy"])
    for bad in (
        {"naming": "named"},
        {"naming": "named", "names": ["Ann", "Bo"]},
        {"naming": "named", "names": ["Ann", "Ann", "Cy"]},
        {"naming": "numbered", "names": ["Ann", "Bo", "Cy"]},
        {"naming": "nicknames"},
        {"transcript": "threads"},
        {"agents": 0},
    ):
        with pytest.raises(ConfigError):
            FreeDiscussion(**bad)


@pytest.mark.parametrize(("agents", "rounds"), [(1, 1), (1, 3), (2, 2), (3, 3), (4, 2)])
@pytest.mark.parametrize("transcript", ["single_message", "chat_turns"])
async def test_calls_are_n_times_r_in_round_robin_order(agents, rounds, transcript):
    model = counting()
    _, ctx = await run(model, agents=agents, rounds=rounds, transcript=transcript)
    assert len(model.calls) == ctx.usage.calls == agents * rounds
    order = [(r.agent, r.round) for r in ctx.ledger.records]
    assert order == [(f"participant_{i}", r) for r in range(rounds) for i in range(1, agents + 1)]
    assert [(m.metadata["round"], m.metadata["turn"]) for m in ctx.transcript] == [
        (r, i) for r in range(rounds) for i in range(agents)
    ]


async def test_default_is_9_calls():
    model = counting()
    await run(model)
    assert len(model.calls) == 9


async def test_every_turn_sees_every_earlier_turn_and_one_neutral_system_prompt():
    model = counting()
    _, ctx = await run(model)
    replies = [m.content for m in ctx.transcript]
    for k, call in enumerate(model.calls):
        text = user_text(call.request)
        assert [reply in text for reply in replies] == [True] * k + [False] * (9 - k)
        positions = [text.index(reply) for reply in replies[:k]]
        assert positions == sorted(positions)  # in speaking order
        assert call.request.messages[0] == {"role": "system", "content": SYSTEM}
        assert [m["role"] for m in call.request.messages] == ["system", "user"]
        assert text.endswith(CUE) and TASK.prompt() in text


async def test_numbered_labels_and_introductions():
    model = counting()
    _, ctx = await run(model, agents=3, rounds=1)
    third = user_text(model.calls[2].request)
    assert "You are Agent 3. Also present: Agent 1, Agent 2." in third
    assert "Agent 1: participant_1 #1" in third and "Agent 2: participant_2 #2" in third
    assert "participant_1 #1" in third  # the reply itself, not the agent's name, is the label
    assert [m.metadata["label"] for m in ctx.transcript] == ["Agent 1", "Agent 2", "Agent 3"]
    assert {tuple(m.metadata["visible_labels"]) for m in ctx.transcript} == {
        ("Agent 1", "Agent 2", "Agent 3")
    }


async def test_each_prompt_starts_with_the_previous_speakers_question_and_thread():
    """The introduction follows the conversation, so a prefix cache reuses the question and
    every earlier turn from the previous speaker's prompt."""
    model = counting()
    await run(model, agents=3, rounds=2)
    texts = [user_text(call.request) for call in model.calls]
    for earlier, later in pairwise(texts[1:]):  # the first says nobody has spoken yet
        shared = earlier[: earlier.index("You are Agent")]
        assert later.startswith(shared) and TASK.prompt() in shared


async def test_named_agents_are_shown_by_their_names():
    model = counting()
    _, ctx = await run(model, agents=2, rounds=2, naming="named", names=["Ada", "Bob"])
    second = user_text(model.calls[1].request)
    assert "You are Bob. Also present: Ada." in second
    assert "Ada: participant_1 #1" in second
    assert "Agent" not in second
    assert ctx.transcript.messages[1].metadata == {
        "round": 0,
        "turn": 1,
        "speaker": "participant_2",
        "label": "Bob",
        "naming": "named",
        "introduce": True,
        "transcript": "single_message",
        "visible_labels": ["Ada", "Bob"],
    }


@pytest.mark.parametrize("transcript", ["single_message", "chat_turns"])
async def test_unnamed_agents_get_no_labels_and_no_names(transcript):
    model = counting()
    _, ctx = await run(model, agents=3, rounds=2, naming="unnamed", transcript=transcript)
    for call in model.calls:
        text = user_text(call.request)
        assert "There are 3 participants in this conversation, you included." in text
        for word in ("You are", "Agent ", "participant_1:", "Also present"):
            assert word not in text
    last = user_text(model.calls[-1].request)
    assert "---\nparticipant_1 #4" in last
    assert all(m.metadata["label"] is None for m in ctx.transcript)
    assert all(m.metadata["visible_labels"] == [] for m in ctx.transcript)


async def test_without_introductions_only_the_labels_that_spoke_are_visible():
    model = counting()
    _, ctx = await run(model, agents=3, rounds=1, introduce=False)
    first = user_text(model.calls[0].request)
    assert "You are" not in first and "participants" not in first
    assert "(nobody has spoken yet)" in first
    assert [m.metadata["visible_labels"] for m in ctx.transcript] == [
        [], ["Agent 1"], ["Agent 1", "Agent 2"],
    ]  # fmt: skip


async def test_chat_turns_own_turns_are_assistant_messages_and_the_history_only_grows():
    model = counting()
    _, ctx = await run(model, agents=3, rounds=3, transcript="chat_turns", introduce=False)
    calls = [c.request for c in model.calls]
    # participant_1 in round 2: its own two turns as assistant messages, the others' merged
    request = calls[6]
    assert agent_of(request) == "participant_1"
    assert [m["role"] for m in request.messages] == [
        "system", "user", "assistant", "user", "assistant", "user",
    ]  # fmt: skip
    assert request.messages[2]["content"] == "participant_1 #1: the answer is 42."
    assert request.messages[3]["content"] == (
        f"Agent 2: participant_2 #2: the answer is 42.\n\n"
        f"Agent 3: participant_3 #3: the answer is 42.\n\n{CUE}"
    )
    assert "Agent 1" not in user_text(request)  # its own turns carry no label
    # what each agent was sent and said is the start of what it is sent next
    for name in ("participant_1", "participant_2", "participant_3"):
        mine = [(c.request, c.response) for c in model.calls if agent_of(c.request) == name]
        for (before, said), (after, _) in pairwise(mine):
            assert list(after.messages[: len(before.messages) + 1]) == [
                *before.messages, {"role": "assistant", "content": said},
            ]  # fmt: skip
    visible = [m.metadata["visible_labels"] for m in ctx.transcript]
    assert visible[3] == ["Agent 2", "Agent 3"]  # participant_1 in round 1: its own unlabelled


async def test_the_final_answer_is_the_majority_of_the_last_messages():
    replies = {
        "participant_1": ["The answer is 7.", "The answer is 41."],
        "participant_2": ["The answer is 7.", "I now say the answer is 42."],
        "participant_3": ["The answer is 7.", "Agreed, the answer is 42."],
    }

    def reply(request: ChatRequest) -> str:
        return replies[agent_of(request)].pop(0)

    solution, _ = await run(ScriptedModel(reply), agents=3, rounds=2)
    assert solution.answer == "I now say the answer is 42."
    assert solution.metadata["votes"] == {"42": 2, "41": 1}


async def test_a_budget_stop_returns_the_vote_over_the_latest_messages():
    replies = iter(["The answer is 5.", "The answer is 6.", "The answer is 6.",
                    "The answer is 6 after all.", "The answer is 9."])  # fmt: skip
    model = ScriptedModel(lambda request: next(replies))
    ctx = Context(model, budget=Budget(max_calls=4))
    solution = await FreeDiscussion().run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert len(model.calls) == 4
    # latest: participant_1 "6 after all" (turn 4), participant_2 "6", participant_3 "6"
    assert solution.answer == "The answer is 6 after all."


async def test_garbage_replies_never_crash():
    replies = iter(["", "{not json", "🙂", "", "???", "…", "", "null", "x"])
    model = ScriptedModel(lambda request: next(replies))
    solution, ctx = await run(model, transcript="chat_turns")
    assert len(ctx.transcript) == 9
    assert solution.answer == ""  # nobody answered: the first agent's last message stands
    assert solution.metadata["votes"] == {}


def test_model_roles_put_one_participant_on_another_model(tmp_path):
    script = tmp_path / "b.yaml"
    script.write_text('".": "B says the answer is 42."\n')
    other = f"scripted:{script}"
    outcome = FreeDiscussion(agents=3, rounds=2).run(
        TASK, "scripted:echo", model_roles={"participant_2": other}
    )
    records = outcome.context.ledger.records
    assert [(r.agent, r.model) for r in records if r.model == other] == [
        ("participant_2", other),
        ("participant_2", other),
    ]
    assert {r.model for r in records if r.agent != "participant_2"} == {"scripted:echo"}
    later = next(r for r in records if r.agent == "participant_3")
    assert "Agent 2: B says the answer is 42." in later.messages[-1]["content"]
    FreeDiscussion().check_model_roles({"participant": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'participant_4'"):
        FreeDiscussion().check_model_roles({"participant_4": "scripted:echo"})


@pytest.mark.system
def test_cli_run_on_arith(tmp_path):
    out = tmp_path / "run"
    argv = ["run", "--method", "free_discussion", "--benchmark", "arith", "--model",
            "scripted:echo", "--limit", "2", "--out", str(out), "--no-cache", "--quiet",
            "--config", "naming=named", "--config", "names=[Ann, Bo, Cy]"]  # fmt: skip
    assert main(argv) == 0
    run = load_run(out)
    assert [r.usage["calls"] for r in run.records] == [9, 9]
    assert run.manifest.method_config["names"] == ["Ann", "Bo", "Cy"]
