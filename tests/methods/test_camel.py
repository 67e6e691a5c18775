"""CAMEL with scripted models: the call formula, who sees what, the done token, the critic over
options, budget stops, model roles and the command line."""

from __future__ import annotations

import itertools
import json

import pytest
from helpers import TASK, TwoModels, records_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods.camel import (
    DONE,
    Camel,
    clean_solution,
    last_turn_note,
    parse_choice,
    unasked_note,
    user_kickoff,
)


def speaker(request) -> str:
    system = request.messages[0]["content"] if request.messages[0]["role"] == "system" else ""
    for role, opening in (
        ("user", "You are a PhD Student"),
        ("assistant", "You are a Postdoc"),
        ("critic", "You are a Professor"),
    ):
        if system.startswith(opening):
            return role
    return "specifier"


def script(done_at: int | None = None, *, choice: str = "Choice: 2", empty_from: int | None = None):
    """The specifier says 'SPEC-42'; the user's i-th call (1, 2, ...) is 'Instruction: step-i'
    (the done token on call ``done_at``); the assistant's i-th call is 'Solution: sol-i ... The
    answer is i. Next request.' (empty from call ``empty_from``); the critic says ``choice``."""
    users, assistants = itertools.count(1), itertools.count(1)

    def respond(request) -> str:
        who = speaker(request)
        if who == "specifier":
            return "SPEC-42: multiply six by seven."
        if who == "critic":
            return choice
        if who == "user":
            i = next(users)
            return f"<{DONE}>" if i == done_at else f"Instruction: step-{i}\nInput: None"
        i = next(assistants)
        if empty_from is not None and i >= empty_from:
            return "   "
        return f"Solution: sol-{i} worked out. The answer is {i}.\nNext request."

    return respond


def expected_calls(turn_limit, done_at, specify, k, critic=True, each_turn=False, reply=False):
    """The docstring's formula: s + t·u + (t − 1)·a (+ a when the assistant replies to the done
    token) if the user says done at turn t, else s + T·(u + a)."""
    s = 1 if specify else 0
    u = k + (1 if critic and (k > 1 or each_turn) else 0)
    a = k + (1 if critic and k > 1 else 0)
    if done_at is None:
        return s + turn_limit * (u + a)
    return s + done_at * u + (done_at - 1) * a + (a if reply else 0)


@pytest.mark.parametrize(
    ("turn_limit", "done_at", "specify"),
    [(3, None, True), (3, 2, True), (3, 3, True), (1, None, True), (5, None, False), (5, 4, False)],
)
async def test_calls_follow_the_formula_with_one_option(turn_limit, done_at, specify):
    model = ScriptedModel(script(done_at))
    ctx = Context(model)
    method = Camel(turn_limit=turn_limit, specify_task=specify)
    solution = await method.solve(TASK, ctx)
    calls = expected_calls(turn_limit, done_at, specify, 1)
    assert len(model.calls) == ctx.usage.calls == calls
    lo, hi = (1 if specify else 0) + (3 if turn_limit >= 2 else 2), 2 * turn_limit + specify
    assert lo <= calls <= hi
    agents = [r.agent for r in ctx.ledger.records]
    assert agents[: 1 if specify else 0] == (["specifier"] if specify else [])
    assert "critic" not in agents  # one option: nothing for the critic to choose
    last = (done_at - 1) if done_at else turn_limit
    assert solution.answer == f"sol-{last} worked out. The answer is {last}."
    assert solution.metadata["done_turn"] == done_at and solution.metadata["turns"] == last


@pytest.mark.parametrize(("k", "turn_limit", "done_at"), [(2, 3, None), (2, 3, 2), (3, 2, None)])
async def test_calls_follow_the_formula_with_a_critic_over_options(k, turn_limit, done_at):
    # done_at counts user *calls*: with k options the done token must come in turn done_at's
    # first option, which the critic ('Choice: 1') then picks
    model = ScriptedModel(script((done_at - 1) * k + 1 if done_at else None, choice="Choice: 1"))
    ctx = Context(model)
    solution = await Camel(turn_limit=turn_limit, options=k).solve(TASK, ctx)
    assert len(model.calls) == expected_calls(turn_limit, done_at, True, k)
    per_turn = ["user"] * k + ["critic"] + ["assistant"] * k + ["critic"]
    turns = done_at - 1 if done_at else turn_limit
    agents = [r.agent for r in ctx.ledger.records]
    assert agents[: 1 + len(per_turn) * turns] == ["specifier"] + per_turn * turns
    assert len(solution.metadata["choices"]) == 2 * turns + (1 if done_at else 0)


def test_the_defaults_are_maslabs():
    cfg = Camel().config
    assert (cfg.turn_limit, cfg.assistant_role, cfg.user_role) == (3, "Postdoc", "PhD Student")
    assert (cfg.with_critic, cfg.options, cfg.critic_role) == (True, 1, "Professor")
    assert cfg.specify_task and cfg.word_limit == 50
    with pytest.raises(ConfigError, match="with_critic"):
        Camel(options=2, with_critic=False)


async def test_each_side_keeps_its_own_history_and_sees_only_the_other():
    model = ScriptedModel(script(None))
    ctx = Context(model)
    await Camel(turn_limit=3).solve(TASK, ctx)
    spec = records_of(ctx, "specifier")[0]
    assert len(spec.messages) == 1 and TASK.prompt() in spec.messages[0]["content"]
    users, assistants = records_of(ctx, "user"), records_of(ctx, "assistant")
    for record in users + assistants:
        system = record.messages[0]
        assert system["role"] == "system"
        assert TASK.prompt() in system["content"]  # the original question is kept
        assert "SPEC-42: multiply six by seven." in system["content"]  # and the specified task
    assert (
        DONE in users[0].messages[0]["content"] and DONE not in assistants[0].messages[0]["content"]
    )
    for t, record in enumerate(users, 1):
        assert record.round == t and len(record.messages) == 2 * t  # system + t-1 exchanges + 1
        incoming = last_user_message(record)
        if t == 1:
            assert incoming.startswith(user_kickoff("Postdoc"))
        else:  # the assistant's previous solution, verbatim
            assert incoming.startswith(f"Solution: sol-{t - 1} worked out.")
        assert incoming.endswith(last_turn_note("Postdoc")) == (t == 3)
        said = [m["content"] for m in record.messages if m["role"] == "assistant"]
        assert said == [f"Instruction: step-{i}\nInput: None" for i in range(1, t)]
        assert all(f"sol-{i} " not in m["content"] for m in record.messages for i in range(t, 4))
    for t, record in enumerate(assistants, 1):
        assert record.round == t and len(record.messages) == 2 * t
        assert last_user_message(record) == f"Instruction: step-{t}\nInput: None"
        heard = [m["content"] for m in record.messages if m["role"] == "user"]
        assert heard == [f"Instruction: step-{i}\nInput: None" for i in range(1, t + 1)]
        assert all("Send your first instruction" not in m["content"] for m in record.messages)


async def test_without_the_specifier_only_the_original_question_is_shown():
    model = ScriptedModel(script(None))
    ctx = Context(model)
    solution = await Camel(specify_task=False, turn_limit=1).solve(TASK, ctx)
    assert [r.agent for r in ctx.ledger.records] == ["user", "assistant"]
    assert all("specifier" not in r.messages[0]["content"] for r in ctx.ledger.records)
    assert solution.metadata["specified_task"] is None
    # T = 1: the first turn is the last, so the kickoff carries the last-turn note
    assert last_user_message(ctx.ledger.records[0]).endswith(last_turn_note("Postdoc"))


async def test_the_done_token_ends_before_the_assistant_and_the_last_solution_is_the_answer():
    model = ScriptedModel(script(3))
    ctx = Context(model)
    solution = await Camel(turn_limit=5).solve(TASK, ctx)
    agents = [r.agent for r in ctx.ledger.records]
    assert agents == ["specifier"] + ["user", "assistant"] * 2 + ["user"]
    assert solution.answer == "sol-2 worked out. The answer is 2."
    assert "sol-1" not in solution.answer and "Next request" not in solution.answer
    assert solution.metadata["done_turn"] == 3 and not solution.metadata["early_done"]


async def test_a_done_token_before_any_solution_does_not_end_the_dialogue():
    model = ScriptedModel(script(1))
    ctx = Context(model)
    solution = await Camel(turn_limit=2).solve(TASK, ctx)
    assert [r.agent for r in ctx.ledger.records] == ["specifier"] + ["user", "assistant"] * 2
    assert solution.metadata["early_done"] is True and solution.metadata["done_turn"] is None
    assert solution.answer == "sol-2 worked out. The answer is 2."


async def test_the_critic_chooses_among_options_and_only_the_choice_enters_the_histories():
    model = ScriptedModel(
        script(None, choice="I prefer this one. Choice: 2, because it is clearer.")
    )
    ctx = Context(model)
    solution = await Camel(turn_limit=2, options=2).solve(TASK, ctx)
    critic = records_of(ctx, "critic")
    assert [r.round for r in critic] == [1, 1, 2, 2]
    first = last_user_message(critic[0])
    assert "by the PhD Student" in first
    assert first.index("Option 1:\nInstruction: step-1") < first.index(
        "Option 2:\nInstruction: step-2"
    )
    assert "Option 1:\nSolution: sol-1" in last_user_message(critic[1])
    assert len(critic[3].messages) == 1 + 2 * 3 + 1  # the critic remembers its earlier choices
    # turn 2: the assistant's history holds the chosen instruction and its chosen solution
    assistant_t2 = next(r for r in records_of(ctx, "assistant") if r.round == 2)
    assert [m["content"] for m in assistant_t2.messages[1:]] == [
        "Instruction: step-2\nInput: None",
        "Solution: sol-2 worked out. The answer is 2.\nNext request.",
        "Instruction: step-4\nInput: None",
    ]
    user_t2 = next(r for r in records_of(ctx, "user") if r.round == 2)
    assert last_user_message(user_t2).startswith("Solution: sol-2 worked out.")
    assert solution.answer == "sol-4 worked out. The answer is 4."
    assert solution.metadata["choices"] == [
        {"turn": t, "side": side, "choice": 2, "parsed": True}
        for t in (1, 2)
        for side in ("user", "assistant")
    ]


async def test_a_critic_reply_without_a_valid_option_falls_back_to_option_1():
    model = ScriptedModel(script(None, choice="Both are fine; I pick option 7."))
    ctx = Context(model)
    solution = await Camel(turn_limit=1, options=2).solve(TASK, ctx)
    assert solution.answer == "sol-1 worked out. The answer is 1."
    assert [c["parsed"] for c in solution.metadata["choices"]] == [False, False]
    assert [c["choice"] for c in solution.metadata["choices"]] == [1, 1]


def test_parse_choice_and_clean_solution():
    assert parse_choice("Choice: 2. Option 1 is worse.", 2) == 2
    assert parse_choice("**Choice** - 3", 3) == 3
    assert parse_choice("I go with option 1 over option 2", 2) == 1
    assert parse_choice("Choice: 9", 2) is None and parse_choice("no idea", 2) is None
    assert clean_solution("**Solution:** x = 4. The answer is 4.\n\nNext request.") == (
        "x = 4. The answer is 4."
    )
    assert clean_solution("The answer is 4.") == "The answer is 4."


async def test_an_empty_last_solution_falls_back_to_the_latest_nonempty_one():
    model = ScriptedModel(script(None, empty_from=3))
    solution = await Camel().solve(TASK, Context(model))
    assert solution.answer == "sol-2 worked out. The answer is 2."
    assert solution.metadata["answer_turn"] == 2 and solution.metadata["turns"] == 3


@pytest.mark.parametrize(("max_calls", "last"), [(3, 1), (4, 1), (5, 2)])
async def test_a_budget_stop_returns_the_latest_solution(max_calls, last):
    model = ScriptedModel(script(None))
    ctx = Context(model, budget=Budget(max_calls=max_calls))
    solution = await Camel().run_sample(TASK, ctx)
    assert solution.answer == f"sol-{last} worked out. The answer is {last}."
    assert "budget" in solution.metadata and ctx.usage.calls == max_calls


async def test_a_budget_stop_before_any_solution_answers_empty():
    ctx = Context(ScriptedModel(script(None)), budget=Budget(max_calls=2))
    solution = await Camel().run_sample(TASK, ctx)
    assert solution.answer == "" and "budget" in solution.metadata


async def test_model_roles_route_each_roles_calls():
    method = get_method("camel")(turn_limit=1, options=2)
    roles = method.check_model_roles({"critic": "scripted:b", "specifier": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: script(None)), model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [
        ("specifier", "scripted:b"),
        ("user", "scripted:a"),
        ("user", "scripted:a"),
        ("critic", "scripted:b"),
        ("assistant", "scripted:a"),
        ("assistant", "scripted:a"),
        ("critic", "scripted:b"),
    ]
    with pytest.raises(ConfigError, match="no role or agent"):
        method.check_model_roles({"profesor": "scripted:b"})


def test_each_sample_starts_afresh():
    method = Camel(turn_limit=2)
    first = method.run(TASK, ScriptedModel(script(None)))
    second = method.run(TASK, ScriptedModel(script(None)))
    assert first.answer == second.answer == "sol-2 worked out. The answer is 2."
    assert len(second.context.ledger.records[-1].messages) == 4


def test_the_command_line_runs_camel_end_to_end(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "camel", "--benchmark", "arith", "--model", "scripted:echo",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 7 for r in results)
    mixed, user = tmp_path / "mixed", tmp_path / "user.yaml"
    user.write_text(f'".": "{DONE}"\n')
    code = main(
        ["run", "--method", "camel", "--benchmark", "arith", "--model", "scripted:echo",
         "--model-role", f"user=scripted:{user}", "--config", "turn_limit=4",
         "--limit", "1", "--out", str(mixed), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    trace = json.loads((mixed / "traces.jsonl").read_text().splitlines()[0])
    assert [(c["agent"], c["model"]) for c in trace["calls"]] == [
        ("specifier", "scripted:echo"),
        ("user", f"scripted:{user}"),
        ("assistant", "scripted:echo"),
        ("user", f"scripted:{user}"),
    ]  # the first done token is too early to end; the second one ends the dialogue


# --- MASLab's protocol (preset=maslab) ----------------------------------------------------------

SPEC = "SPEC-42: multiply six by seven."


def instruction(i: int) -> str:
    return f"Instruction: step-{i}\nInput: None"


def solution_text(i: int) -> str:
    return f"Solution: sol-{i} worked out. The answer is {i}.\nNext request."


def test_the_maslab_preset_sets_its_protocol_and_explicit_settings_win():
    cfg = Camel(preset="maslab").config
    assert (cfg.critic_each_turn, cfg.reply_to_done, cfg.keep_question, cfg.answer) == (
        True, True, False, "transcript",
    )  # fmt: skip
    assert (cfg.turn_limit, cfg.options, cfg.with_critic, cfg.specify_task) == (3, 1, True, True)
    assert (cfg.word_limit, cfg.user_role, cfg.assistant_role, cfg.critic_role) == (
        50, "PhD Student", "Postdoc", "Professor",
    )  # fmt: skip
    plain = Camel().config  # the paper-faithful behaviour stays the default
    assert (plain.critic_each_turn, plain.reply_to_done, plain.keep_question, plain.answer) == (
        False, False, True, "solution",
    )  # fmt: skip
    explicit = Camel(preset="maslab", turn_limit=5, options=2, user_role="Student").config
    assert (explicit.turn_limit, explicit.options, explicit.user_role) == (5, 2, "Student")
    assert explicit.answer == "transcript"
    every_default = Camel.Config().model_dump(mode="json")
    assert Camel({**every_default, "preset": "maslab"}).config == cfg


@pytest.mark.parametrize("done_at", [None, 1, 2, 3])
async def test_the_maslab_preset_makes_maslabs_calls(done_at):
    """MASLab (camel_main.py, chat_turn_limit 3, option_num 1, with_critic): 1 specifier call,
    then per turn the user, the critic on the user's proposal, the assistant, and the done
    token checked after the assistant's reply: 1 + 3t, 1 + 3·3 = 10 at the turn limit."""
    model = ScriptedModel(script(done_at, choice="Choice: 1"))
    ctx = Context(model)
    solution = await Camel(preset="maslab").solve(TASK, ctx)
    turns = done_at or 3
    assert len(model.calls) == ctx.usage.calls == 1 + 3 * turns
    assert 1 + 3 * turns == expected_calls(3, done_at, True, 1, each_turn=True, reply=True)
    agents = [r.agent for r in ctx.ledger.records]
    assert agents == ["specifier"] + ["user", "critic", "assistant"] * turns
    assert solution.metadata["done_turn"] == done_at and solution.metadata["turns"] == turns
    assert not solution.metadata["early_done"]


@pytest.mark.parametrize(
    ("turn_limit", "done_at", "each_turn", "reply", "with_critic"),
    [
        (3, 2, True, False, True),
        (3, 2, False, True, True),
        (2, None, False, True, True),
        (4, None, True, False, False),
        (4, 2, True, True, False),
    ],
)
async def test_calls_follow_the_formula_with_maslabs_options(
    turn_limit, done_at, each_turn, reply, with_critic
):
    model = ScriptedModel(script(done_at, choice="Choice: 1"))
    ctx = Context(model)
    method = Camel(
        turn_limit=turn_limit,
        critic_each_turn=each_turn,
        reply_to_done=reply,
        with_critic=with_critic,
    )
    await method.solve(TASK, ctx)
    calls = expected_calls(turn_limit, done_at, True, 1, with_critic, each_turn, reply)
    assert len(model.calls) == ctx.usage.calls == calls
    critic = ["critic"] if with_critic and each_turn else []
    turn = ["user", *critic, "assistant"]
    agents = [r.agent for r in ctx.ledger.records]
    if done_at is None:
        assert agents == ["specifier"] + turn * turn_limit
    else:
        last = turn if reply else ["user", *critic]
        assert agents == ["specifier"] + turn * (done_at - 1) + last


async def test_the_maslab_preset_shows_the_specified_task_and_the_critic_every_message():
    model = ScriptedModel(script(None, choice="Choice: 1"))
    ctx = Context(model)
    await Camel(preset="maslab").solve(TASK, ctx)
    (spec,) = records_of(ctx, "specifier")
    assert TASK.prompt() in spec.messages[0]["content"]  # only the specifier reads the question
    for record in (
        records_of(ctx, "user") + records_of(ctx, "assistant") + records_of(ctx, "critic")
    ):
        system = record.messages[0]["content"]
        assert SPEC in system and TASK.question not in system
    critic = records_of(ctx, "critic")
    assert [r.round for r in critic] == [1, 2, 3]
    for t, record in enumerate(critic, 1):
        assert len(record.messages) == 2 * t  # system, its earlier prompts and choices, the ask
        ask = last_user_message(record)
        options = f"by the PhD Student:\n\nOption 1:\n{instruction(t)}\n\n"
        # the assistant's reply it was not asked about comes first, then the user's proposal
        before = unasked_note("Postdoc", solution_text(t - 1)) if t > 1 else ""
        assert ask.startswith(f"{before}Alternative messages drafted ") and options in ask
        assert "(N from 1 to 1)" in ask
    assert all("sol-3" not in m["content"] for r in critic for m in r.messages)
    # the user and the assistant see each other as before: the chosen messages only
    for t, record in enumerate(records_of(ctx, "assistant"), 1):
        heard = [m["content"] for m in record.messages if m["role"] == "user"]
        assert heard == [instruction(i) for i in range(1, t + 1)]
    assert all("Choice" not in m["content"] for r in records_of(ctx, "user") for m in r.messages)


async def test_the_maslab_preset_answers_with_the_whole_transcript():
    model = ScriptedModel(script(None, choice="Choice: 1"))
    solution = await Camel(preset="maslab").solve(TASK, Context(model))
    parts = [f"Question:\n{TASK.prompt()}", f"Specified task:\n{SPEC}"]
    for t in (1, 2, 3):
        parts += [
            f"PhD Student:\n{instruction(t)}",
            "Professor:\nChoice: 1",
            f"Postdoc:\n{solution_text(t)}",
        ]
    assert solution.answer == "\n\n".join(parts)
    assert TASK.answer_in(solution.answer) == "3"  # the last solution's answer is read from it
    assert solution.metadata["choices"] == [
        {"turn": t, "side": "user", "choice": 1, "parsed": True} for t in (1, 2, 3)
    ]


async def test_the_maslab_preset_lets_the_assistant_reply_to_the_done_token():
    model = ScriptedModel(script(1, choice="Choice: 1"))
    ctx = Context(model)
    solution = await Camel(preset="maslab").solve(TASK, ctx)
    assert [r.agent for r in ctx.ledger.records] == ["specifier", "user", "critic", "assistant"]
    assert last_user_message(records_of(ctx, "assistant")[0]) == f"<{DONE}>"
    assert solution.metadata["done_turn"] == 1 and solution.metadata["early_done"] is False
    tail = f"PhD Student:\n<{DONE}>\n\nProfessor:\nChoice: 1\n\nPostdoc:\n{solution_text(1)}"
    assert solution.answer.endswith(tail)


@pytest.mark.parametrize("choice", ["Choice: 2", "", "no number at all"])
async def test_the_maslab_preset_survives_an_unusable_critic_reply(choice):
    # MASLab's find_option would fail the sample on these (an IndexError, a TypeError)
    model = ScriptedModel(script(None, choice=choice, empty_from=3))
    solution = await Camel(preset="maslab").solve(TASK, Context(model))
    assert [c["choice"] for c in solution.metadata["choices"]] == [1, 1, 1]
    assert not any(c["parsed"] for c in solution.metadata["choices"])
    assert solution.answer.endswith("Postdoc:")  # the empty last solution, as said
    assert TASK.answer_in(solution.answer) == "2" and solution.metadata["answer_turn"] == 2


@pytest.mark.parametrize(("max_calls", "last"), [(3, "Professor:\nChoice: 1"), (5, instruction(2))])
async def test_a_maslab_preset_budget_stop_answers_with_the_transcript_so_far(max_calls, last):
    ctx = Context(
        ScriptedModel(script(None, choice="Choice: 1")), budget=Budget(max_calls=max_calls)
    )
    solution = await Camel(preset="maslab").run_sample(TASK, ctx)
    assert "budget" in solution.metadata and ctx.usage.calls == max_calls
    assert solution.answer.startswith(f"Question:\n{TASK.prompt()}\n\nSpecified task:\n{SPEC}")
    assert solution.answer.endswith(last)
    assert solution.answer.count("Postdoc:") == (max_calls - 1) // 3


async def test_model_roles_put_the_maslab_critic_on_another_model():
    method = Camel(preset="maslab", turn_limit=2)
    roles = method.check_model_roles({"critic": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: script(None)), model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [("specifier", "scripted:a")] + [
        ("user", "scripted:a"),
        ("critic", "scripted:b"),
        ("assistant", "scripted:a"),
    ] * 2


def test_the_maslab_preset_from_the_command_line(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "camel", "--benchmark", "arith", "--model", "scripted:echo",
         "--config", "preset=maslab", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["usage"]["calls"] for r in results] == [10, 10]  # nobody says the done token
    recorded = json.loads((out / "manifest.json").read_text())["method_config"]
    assert (recorded["answer"], recorded["critic_each_turn"]) == ("transcript", True)
