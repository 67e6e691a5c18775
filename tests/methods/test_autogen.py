"""AutoGen (arXiv 2308.08155) with scripted assistants and the real sandbox: the call count,
what the assistant sees, code execution, the stop rule, answers, budget stops, model roles and
the command line."""

from __future__ import annotations

import json

import pytest
from helpers import TASK, TwoModels, agent_of, method_runner

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods import autogen as autogen_module
from maslab.methods.autogen import (
    ASSISTANT,
    USER_PROXY,
    AutoGen,
    assistant_system,
    code_blocks,
    nudge,
    words_system,
)
from maslab.sandbox import BACKEND_VARIABLE

CODE = "I will compute it.\n```python\nx = 6 * 7\nprint('result', x)\n```"
NUDGE = nudge("TERMINATE")


def talker(request) -> str:
    """Never writes code or TERMINATE; says which turn it is on."""
    turn = sum(m["role"] == "assistant" for m in request.messages)
    return f"turn {turn}: still thinking, maybe {turn + 10}."


run = method_runner(AutoGen, TASK)


def test_defaults_and_registration():
    cfg = AutoGen().config
    assert (cfg.max_turn, cfg.termination) == (3, "TERMINATE")
    assert get_method("autogen") is AutoGen
    assert cfg.user_proxy == "executor"  # the proxy runs code and is no model by default
    assert AutoGen.roles == (ASSISTANT, USER_PROXY)  # a model with user_proxy=llm
    for bad in ({"max_turn": 0}, {"termination": ""}, {"turns": 2}, {"user_proxy": "human"}):
        with pytest.raises(ConfigError):
            AutoGen(**bad)
    with pytest.raises(ConfigError, match="no role or agent 'proxy'"):
        AutoGen().check_model_roles({"proxy": "scripted:echo"})


@pytest.mark.system
async def test_code_is_run_in_the_sandbox_and_its_real_output_is_the_next_prompt():
    model = ScriptedModel([CODE, "The code printed it: the answer is 42. TERMINATE"])
    solution, ctx = await run(model)
    assert len(model.calls) == ctx.usage.calls == 2
    second = model.requests[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[0]["content"] == assistant_system("TERMINATE")
    assert second[1]["content"] == TASK.prompt() and second[2]["content"] == CODE
    output = second[3]["content"]
    assert "result 42" in output and "exit code 0" in output  # only a real run prints this
    assert solution.answer == "The code printed it: the answer is 42."
    assert solution.metadata == {
        "turns": 2,
        "terminated": True,
        "terminated_by": ASSISTANT,
        "executions": 1,
        "sandbox_errors": 0,
        "proxy_fallbacks": 0,
        "answer_turn": 1,
    }
    proxy = ctx.transcript.filter(sender=USER_PROXY)
    assert len(proxy) == 1 and proxy[0].kind == "execution" and proxy[0].content == output
    assert proxy[0].round == 0 and proxy[0].recipients == (ASSISTANT,)
    assert proxy[0].metadata["blocks"] == [{"status": "ok", "returncode": 0}]
    assert [m.sender for m in ctx.transcript] == [ASSISTANT, USER_PROXY, ASSISTANT]
    assert {r.agent for r in ctx.ledger.records} == {ASSISTANT}


@pytest.mark.system
async def test_the_brief_scenario_42_then_terminate():
    model = ScriptedModel(["```python\nprint(6 * 7)\n```", "42 TERMINATE"])
    solution, _ = await run(model)
    assert "stdout:\n42" in last_user_message(model.requests[1])
    assert solution.answer == "42" and len(model.calls) == 2


@pytest.mark.parametrize("max_turn", [1, 2, 3, 5])
async def test_without_terminate_the_conversation_runs_max_turn_calls(max_turn):
    model = ScriptedModel(talker)
    solution, ctx = await run(model, max_turn=max_turn)
    assert len(model.calls) == ctx.usage.calls == max_turn
    # the proxy answers every turn but the last, always with the nudge when there is no code
    proxy = ctx.transcript.filter(sender=USER_PROXY)
    assert [m.content for m in proxy] == [NUDGE] * (max_turn - 1)
    assert {m.kind for m in proxy} <= {"auto_reply"}
    assert solution.metadata["terminated"] is False
    assert solution.metadata["turns"] == max_turn and solution.metadata["executions"] == 0
    last = max_turn - 1
    assert solution.answer == f"turn {last}: still thinking, maybe {last + 10}."


@pytest.mark.parametrize(("stop_at", "max_turn"), [(1, 3), (2, 3), (3, 3), (2, 5)])
async def test_terminate_at_turn_k_costs_k_calls(stop_at, max_turn):
    def respond(request) -> str:
        turn = sum(m["role"] == "assistant" for m in request.messages) + 1
        return f"The answer is {turn}. TERMINATE" if turn == stop_at else f"draft {turn}"

    model = ScriptedModel(respond)
    solution, _ = await run(model, max_turn=max_turn)
    assert len(model.calls) == stop_at
    assert solution.answer == f"The answer is {stop_at}." and solution.metadata["terminated"]


async def test_the_assistant_sees_its_whole_conversation_each_turn():
    model = ScriptedModel(talker)
    _, ctx = await run(model, max_turn=4)
    assert [r.round for r in ctx.ledger.records] == [0, 1, 2, 3]
    assert [m.round for m in ctx.transcript.filter(sender=USER_PROXY)] == [0, 1, 2]
    for t, request in enumerate(model.requests):
        msgs = request.messages
        assert len(msgs) == 2 + 2 * t and msgs[0]["role"] == "system"
        assert msgs[1] == {"role": "user", "content": TASK.prompt()}
        for i in range(t):
            assert msgs[2 + 2 * i]["content"] == f"turn {i}: still thinking, maybe {i + 10}."
            assert msgs[3 + 2 * i] == {"role": "user", "content": NUDGE}


@pytest.mark.system
async def test_a_failing_block_stops_the_rest_and_its_error_is_shown():
    message = (
        "```python\nprint('before')\nraise ValueError('boom')\n```\n"
        "```sh\necho hi\n```\n```python\nprint('never')\n```"
    )
    model = ScriptedModel([message, "The answer is 42. TERMINATE"])
    solution, ctx = await run(model)
    reply = last_user_message(model.requests[1])
    assert "Code block 1 of 3: status error, exit code 1." in reply
    assert "before" in reply and "ValueError: boom" in reply
    assert "Code block 2 of 3: not run" in reply and "Code block 3 of 3: not run" in reply
    assert "never" not in reply
    blocks = ctx.transcript.filter(sender=USER_PROXY)[0].metadata["blocks"]
    assert blocks == [
        {"status": "error", "returncode": 1},
        {"status": "skipped"},
        {"status": "skipped"},
    ]
    assert solution.metadata["executions"] == 1


@pytest.mark.system
async def test_other_languages_are_not_run_and_long_output_is_cut():
    message = "```bash\nls /\n```\n```\nprint('x' * 5000)\n```"
    model = ScriptedModel([message, "The answer is 42. TERMINATE"])
    _, ctx = await run(model, max_output_chars=100)
    reply = last_user_message(model.requests[1])
    assert "Code block 1 of 2 (bash): not run, only Python" in reply
    assert "x" * 100 + "\n[output truncated]" in reply and "x" * 101 not in reply
    blocks = ctx.transcript.filter(sender=USER_PROXY)[0].metadata["blocks"]
    assert blocks == [
        {"status": "not_python", "language": "bash"},
        {"status": "ok", "returncode": 0},
    ]


def test_code_blocks_are_read_in_order_with_their_language():
    text = "a\n```python\nprint(1)\n```\nb\n```py\nprint(2)\n```\n```\n\n```\n```sh\nls\n```"
    blocks = code_blocks(text)
    assert [(b.language, b.code, b.runnable) for b in blocks] == [
        ("python", "print(1)", True),
        ("py", "print(2)", True),
        ("sh", "ls", False),
    ]
    assert code_blocks("no code here") == []


async def test_a_bare_terminate_takes_the_answer_from_the_latest_message_with_one():
    model = ScriptedModel(["The answer is 41.", "The answer is 42.", "TERMINATE"])
    solution, _ = await run(model, max_turn=5)
    assert solution.answer == "The answer is 42." and solution.metadata["answer_turn"] == 1
    assert len(model.calls) == 3


@pytest.mark.system
async def test_numbers_in_code_are_not_answers():
    model = ScriptedModel([CODE, "TERMINATE"])
    solution, _ = await run(model)
    assert solution.metadata["answer_turn"] is None and solution.answer == ""
    code_task = TASK.model_copy(update={"answer_type": "code"})
    model = ScriptedModel(["```python\ndef f():\n    return 42\n```", "Done. TERMINATE"])
    solution = await AutoGen().solve(code_task, Context(model))
    assert "def f():" in solution.answer  # a code task's answer is the code


async def test_garbage_and_sandbox_failures_do_not_crash(monkeypatch):
    model = ScriptedModel(["", "   ", "!!"])
    solution, ctx = await run(model)
    assert len(model.calls) == 3 and solution.answer == "!!"
    assert [m.content for m in ctx.transcript.filter(sender=USER_PROXY)] == [NUDGE, NUDGE]

    async def broken(code, **kwargs):
        raise OSError("no sandbox here")

    monkeypatch.setattr(autogen_module, "arun_python", broken)
    model = ScriptedModel([CODE, "The answer is 42. TERMINATE"])
    solution, ctx = await run(model)
    assert "the sandbox could not run it (OSError)" in last_user_message(model.requests[1])
    assert solution.metadata["sandbox_errors"] == 1 and solution.answer == "The answer is 42."


async def test_a_custom_termination_word():
    model = ScriptedModel(["The answer is 42. TERMINATE", "The answer is 43. DONE!"])
    solution, _ = await run(model, termination="DONE!")
    assert len(model.calls) == 2 and solution.answer == "The answer is 43."
    assert "DONE!" in model.requests[0].messages[0]["content"]
    assert last_user_message(model.requests[1]) == nudge("DONE!")


@pytest.mark.system
async def test_a_budget_stop_returns_the_latest_answer_so_far():
    model = ScriptedModel(talker)
    ctx = Context(model, budget=Budget(max_calls=2))
    solution = await AutoGen(max_turn=5).run_sample(TASK, ctx)
    assert ctx.usage.calls == 2 and "budget" in solution.metadata
    assert solution.answer == "turn 1: still thinking, maybe 11."
    model = ScriptedModel([CODE, CODE, CODE])
    ctx = Context(model, budget=Budget(max_calls=1))
    solution = await AutoGen().run_sample(TASK, ctx)
    assert solution.answer == CODE  # no message holds an answer yet: the latest stands
    assert ctx.usage.calls == 1


async def test_model_roles_put_the_assistant_on_another_model():
    method = get_method("autogen")(max_turn=2)
    roles = method.check_model_roles({ASSISTANT: "scripted:b"})
    pool = TwoModels(lambda: talker)
    ctx = Context("scripted:a", models=pool, model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [(ASSISTANT, "scripted:b")] * 2
    assert not pool.served["scripted:a"].calls


def test_each_sample_starts_afresh():
    method = AutoGen(max_turn=2)
    first = method.run(TASK, ScriptedModel(talker))
    second = method.run(TASK, ScriptedModel(talker))
    assert first.answer == second.answer == "turn 1: still thinking, maybe 11."
    assert len(second.context.ledger.records[0].messages) == 2  # no history from the first


def test_the_command_line_runs_autogen_end_to_end(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "autogen", "--benchmark", "arith", "--model", "scripted:echo",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # echo repeats the question (no code), then the nudge, which holds TERMINATE
    assert len(results) == 2 and all(r["usage"]["calls"] == 2 for r in results)


@pytest.mark.system
def test_code_that_cannot_be_isolated_stops_the_run_unless_the_user_opted_in(
    tmp_path, monkeypatch, capsys
):
    """AutoGen runs code only when a reply has some, so the run starts; the first block stops
    it in one line (exit 1: what finished is kept). With the opt-in the block runs."""
    monkeypatch.setenv(BACKEND_VARIABLE, "none")
    script = tmp_path / "coder.json"
    script.write_text(json.dumps({".": "```python\nprint(6 * 7)\n```"}))

    def run(out: str, *flags: str) -> int:
        return main(
            ["run", "--method", "autogen", "--benchmark", "arith", "--model", f"scripted:{script}",
             "--limit", "1", "--out", str(tmp_path / out), "--no-cache", "--quiet", *flags]
        )  # fmt: skip

    assert run("refused") == 1
    err = capsys.readouterr().err.strip()
    assert "model-written code cannot run isolated here: no filesystem, network" in err
    assert "--unsafe-no-sandbox" in err and "\n" not in err
    assert (tmp_path / "refused" / "results.jsonl").read_text() == ""

    assert run("allowed", "--unsafe-no-sandbox") == 0
    trace = json.loads((tmp_path / "allowed" / "traces.jsonl").read_text().splitlines()[0])
    assert "status ok" in json.dumps(trace) and "42" in json.dumps(trace)


# --- MASLab's protocol (preset=maslab: an LLM user proxy) --------------------------------------


def chat(assistant_ends: int | None = None, proxy_ends: int | None = None, code: bool = False):
    """The assistant's turn-t reply is 'a<t>: The answer is <t>.' (with a Python block if
    ``code``; TERMINATE at turn ``assistant_ends``); the proxy's reply after turn t is 'p<t>:
    go on' (TERMINATE after turn ``proxy_ends``). A turn is the speaker's own earlier turns + 1."""

    def respond(request) -> str:
        t = sum(m["role"] == "assistant" for m in request.messages)
        if agent_of(request) == USER_PROXY:  # its history opens with its own turn (the question)
            return f"p{t}: TERMINATE" if t == proxy_ends else f"p{t}: go on"
        t += 1
        block = "\n```python\nprint(6 * 7)\n```" if code else ""
        return f"a{t}: The answer is {t}.{block}" + (" TERMINATE" if t == assistant_ends else "")

    return respond


def test_the_maslab_preset_sets_its_protocol_and_explicit_settings_win():
    config = AutoGen(preset="maslab").config
    assert (config.user_proxy, config.max_turn, config.termination) == ("llm", 3, "TERMINATE")
    explicit = AutoGen(preset="maslab", max_turn=5, termination="DONE!").config
    assert (explicit.user_proxy, explicit.max_turn, explicit.termination) == ("llm", 5, "DONE!")
    every_default = AutoGen.Config().model_dump(mode="json")
    assert AutoGen({**every_default, "preset": "maslab"}).config == config


@pytest.mark.parametrize(
    ("max_turn", "assistant_ends", "proxy_ends", "calls"),
    [
        (3, None, None, 5),  # MASLab (autogen_main.py, max_turn 3): 1 + 2 × (proxy + assistant)
        (3, 1, None, 1),
        (3, None, 1, 2),
        (3, 2, None, 3),
        (3, None, 2, 4),
        (3, 3, None, 5),
        (1, None, None, 1),
        (5, None, None, 9),
        (5, 4, None, 7),
        (5, None, 3, 6),
    ],
)
async def test_the_llm_proxy_call_count(max_turn, assistant_ends, proxy_ends, calls):
    model = ScriptedModel(chat(assistant_ends, proxy_ends))
    solution, ctx = await run(model, preset="maslab", max_turn=max_turn)
    assert len(model.calls) == ctx.usage.calls == calls
    turns = (calls + 1) // 2
    expected = [ASSISTANT, USER_PROXY] * (calls // 2) + [ASSISTANT] * (calls % 2)
    assert [agent_of(r) for r in model.requests] == expected
    assert solution.metadata["turns"] == turns
    ended = ASSISTANT if assistant_ends else USER_PROXY if proxy_ends else None
    assert solution.metadata["terminated_by"] == ended
    assert solution.metadata["terminated"] is (ended is not None)
    # the answer is the assistant's last message (the one the proxy ended on, if it did)
    assert solution.answer == f"a{turns}: The answer is {turns}."


async def test_the_llm_proxy_sees_the_question_as_its_own_turn_and_each_assistant_message():
    model = ScriptedModel(chat())
    solution, ctx = await run(model, preset="maslab")
    assistant = [r for r in model.requests if agent_of(r) == ASSISTANT]
    proxy = [r for r in model.requests if agent_of(r) == USER_PROXY]
    assert (len(assistant), len(proxy)) == (3, 2)
    for t, request in enumerate(proxy, 1):  # no system turn: its system prompt is empty
        said = [("assistant", TASK.prompt())]
        for i in range(1, t + 1):
            said.append(("user", f"a{i}: The answer is {i}."))
            if i < t:
                said.append(("assistant", f"p{i}: go on"))
        assert [(m["role"], m["content"]) for m in request.messages] == said
    for t, request in enumerate(assistant, 1):  # told to solve in words; the proxy's replies
        msgs = request.messages
        assert msgs[0] == {"role": "system", "content": words_system("TERMINATE")}
        assert msgs[1] == {"role": "user", "content": TASK.prompt()}
        heard = [m["content"] for m in msgs[2:] if m["role"] == "user"]
        assert heard == [f"p{i}: go on" for i in range(1, t)]
    messages = ctx.transcript.filter(sender=USER_PROXY)
    assert [(m.content, m.round, m.recipients) for m in messages] == [
        ("p1: go on", 0, (ASSISTANT,)),
        ("p2: go on", 1, (ASSISTANT,)),
    ]
    assert solution.answer == "a3: The answer is 3."


async def test_the_llm_proxy_runs_no_code():
    model = ScriptedModel(chat(code=True))
    solution, ctx = await run(model, preset="maslab")
    assert solution.metadata["executions"] == 0 and len(model.calls) == 5
    assert {m.kind for m in ctx.transcript.filter(sender=USER_PROXY)} == {"message"}
    assert last_user_message(model.requests[2]) == "p1: go on"  # not a run's report


async def test_an_empty_proxy_reply_becomes_the_nudge_and_garbage_does_not_crash():
    model = ScriptedModel(lambda r: "" if agent_of(r) == USER_PROXY else "??")
    solution, _ = await run(model, preset="maslab")
    assert len(model.calls) == 5 and solution.metadata["proxy_fallbacks"] == 2
    assert [last_user_message(r) for r in model.requests if agent_of(r) == ASSISTANT] == [
        TASK.prompt(),
        NUDGE,
        NUDGE,
    ]
    assert solution.answer == "??" and solution.metadata["answer_turn"] is None


async def test_an_llm_proxy_budget_stop_returns_the_latest_answer_so_far():
    model = ScriptedModel(chat())
    ctx = Context(model, budget=Budget(max_calls=4))
    solution = await AutoGen(preset="maslab").run_sample(TASK, ctx)
    assert ctx.usage.calls == 4 and "budget" in solution.metadata
    assert solution.answer == "a2: The answer is 2."


async def test_model_roles_put_the_llm_proxy_on_another_model():
    method = get_method("autogen")(preset="maslab")
    roles = method.check_model_roles({USER_PROXY: "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: chat()), model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [
        (ASSISTANT, "scripted:a"),
        (USER_PROXY, "scripted:b"),
    ] * 2 + [(ASSISTANT, "scripted:a")]


def test_the_maslab_preset_from_the_command_line(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "autogen", "--benchmark", "arith", "--model", "scripted:echo",
         "--config", "preset=maslab", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # echo: nobody ever says TERMINATE, so the chat runs to MASLab's five calls
    assert [r["usage"]["calls"] for r in results] == [5, 5]
    recorded = json.loads((out / "manifest.json").read_text())["method_config"]
    assert (recorded["user_proxy"], recorded["max_turn"]) == ("llm", 3)
