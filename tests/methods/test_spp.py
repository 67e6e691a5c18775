"""Solo Performance Prompting: one call, the persona protocol, the answer from its final section."""

from __future__ import annotations

import orjson
import pytest
from helpers import GOLD_TASK as TASK
from helpers import TwoModels

from maslab.cli import main
from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods.spp import DEMONSTRATIONS, SPP, final_section, personas, spp_prompt

REPLY = """Participants: AI Assistant (you); Math Expert; Skeptic

Start collaboration!

AI Assistant (you): 6 * 7 is 36, so the answer is 36.
Math Expert: No: 6 * 6 = 36. Add one more 6: 36 + 6 = 42.
Skeptic: I'd double-check with 7 * 6 = 35 + 7 = 42. The answer is 42, not 36 or 35.
AI Assistant (you): Agreed, 42.

Final answer: The answer is 42.
"""


def score(task: Task, answer: str) -> str | None:
    return extract_answer(answer, task.answer_type)


async def test_spp_is_one_call_whose_prompt_has_the_protocol_and_the_task():
    model = ScriptedModel([REPLY])
    ctx = Context(model)
    solution = await SPP().solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == 1
    prompt = last_user_message(model.calls[0].request)
    assert prompt == spp_prompt(TASK)
    assert prompt.rstrip().endswith(TASK.prompt())  # the task comes last, instruction included
    for part in ("Participants:", "critical comments", "Final answer:", "AI Assistant"):
        assert part in prompt
    assert all(demo in prompt for demo in DEMONSTRATIONS)  # the paper's two demonstrations
    assert [r.agent for r in ctx.ledger.records] == ["solver"]
    assert solution.metadata["final_section"] is True
    model.assert_consumed()


async def test_the_answer_is_the_final_section_not_a_personas_suggestion():
    solution = await SPP().solve(TASK, Context(ScriptedModel([REPLY])))
    assert solution.answer == "Final answer: The answer is 42."
    assert score(TASK, solution.answer) == "42"
    # A persona boxes a wrong number: read from the whole reply, the box would win.
    reply = REPLY.replace("is 36, so", "is \\boxed{36}, so").replace(
        "Final answer: The answer is 42.", "**Final answer:** 42"
    )
    assert score(TASK, reply) == "36"
    solution = await SPP().solve(TASK, Context(ScriptedModel([reply])))
    assert solution.answer == "Final answer: 42"
    assert score(TASK, solution.answer) == "42"


@pytest.mark.parametrize(
    ("reply", "section"),
    [
        ("A: 5\nFinal answer: 7", "Final answer: 7"),
        ("A: 5\n**Final Answer:** 7", "Final Answer: 7"),
        ("A: 5\n## Final answer:\n7\n", "Final answer:\n7"),
        ("Final answer: 3\nCritic: wrong!\nFinal answer: 4", "Final answer: 4"),  # the last one
        ("Expert: my final answer: 9 is wrong", None),  # not at a line start: a persona's words
        ("no section at all, the answer is 5", None),
    ],
)
def test_final_section(reply, section):
    assert final_section(reply) == section


async def test_a_reply_without_a_final_section_falls_back_to_the_whole_reply():
    reply = "Participants: AI Assistant (you)\n\nAI Assistant (you): 6 * 7 = 42. The answer is 42."
    solution = await SPP().solve(TASK, Context(ScriptedModel([reply])))
    assert solution.answer == reply  # read by the evaluator as CoT's reply would be
    assert solution.metadata == {"personas": ["AI Assistant (you)"], "final_section": False}
    assert score(TASK, solution.answer) == "42"


@pytest.mark.parametrize(
    ("reply", "listed"),
    [
        (REPLY, ["AI Assistant (you)", "Math Expert", "Skeptic"]),
        (
            "**Participants:** AI Assistant (you), Historian, Poet.\n",
            ["AI Assistant (you)", "Historian", "Poet"],
        ),
        (
            "Participants:\n- AI Assistant (you)\n- Chemist\n\nChemist: hi",
            ["AI Assistant (you)", "Chemist"],
        ),
        ("Participants:\n1. AI Assistant\n2) Judge\nJudge: ok", ["AI Assistant", "Judge"]),
        ("Final answer: 42", []),
    ],
)
async def test_the_listed_personas_are_in_the_metadata(reply, listed):
    assert personas(reply) == listed
    solution = await SPP().solve(TASK, Context(ScriptedModel([reply])))
    assert solution.metadata["personas"] == listed


def test_demonstrations_config():
    assert SPP().config.demonstrations == 2
    assert DEMONSTRATIONS[0] not in spp_prompt(TASK, 0)
    one = spp_prompt(TASK, 1)
    assert DEMONSTRATIONS[0] in one and DEMONSTRATIONS[1] not in one
    with pytest.raises(ConfigError):
        SPP(demonstrations=3)
    with pytest.raises(ConfigError):
        SPP(rounds=2)
    for demo in DEMONSTRATIONS:  # each demonstration follows the protocol it teaches
        assert personas(demo)[0] == "AI Assistant (you)" and final_section(demo)


async def test_model_roles_route_the_call_to_another_model():
    SPP().check_model_roles({"solver": "scripted:b"})
    with pytest.raises(ConfigError, match="spp has no role or agent 'judge'"):
        SPP().check_model_roles({"judge": "scripted:b"})
    pool = TwoModels(lambda: [REPLY])
    ctx = Context("scripted:a", models=pool, model_roles={"solver": "scripted:b"})
    await get_method("spp")().solve(TASK, ctx)
    assert [r.model for r in ctx.ledger.records] == ["scripted:b"]
    assert not pool.served["scripted:a"].calls and len(pool.served["scripted:b"].calls) == 1


def test_cli_run_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run", "--method", "spp", "--benchmark", "arith", "--model", "scripted:echo",
            "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 1 for r in results)
