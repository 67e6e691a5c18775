"""Self-Refine with scripted models: the call formula, who sees what, the stop rule, budget
stops, model roles and the command line."""

from __future__ import annotations

import itertools
import json

import pytest
from helpers import TASK, TwoModels, records_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods.cot import cot_prompt
from maslab.methods.self_refine import Feedback, SelfRefine


def script(stop_at: int | None = None, *, as_json: bool = True):
    """Answers are 'answer-i: The answer is i' (i = 0, 1, ...); critiques are 'fix-t' and say
    stop at iteration ``stop_at`` (never for None)."""
    answers, critiques = itertools.count(0), itertools.count(1)

    def respond(request) -> str:
        prompt = last_user_message(request)
        if prompt.startswith("Here is a question and a proposed answer"):
            t = next(critiques)
            if not as_json:
                return f"fix-{t}: looks fine to me."
            return json.dumps({"feedback": f"fix-{t}", "stop": t == stop_at})
        i = next(answers)
        return f"answer-{i}: The answer is {i}."

    return respond


@pytest.mark.parametrize("stop_at", [1, 2, 3, 4])
async def test_a_stop_at_iteration_t_costs_2t_calls_and_keeps_the_last_answer(stop_at):
    model = ScriptedModel(script(stop_at))
    ctx = Context(model)
    solution = await SelfRefine().solve(TASK, ctx)
    k = stop_at - 1  # refinements made before the critic said stop
    assert len(model.calls) == ctx.usage.calls == 1 + 2 * k + 1 == 2 * stop_at
    assert solution.answer == f"answer-{k}: The answer is {k}."
    assert solution.metadata == {"refinements": k, "stopped": True, "parsed": [True] * stop_at}


@pytest.mark.parametrize("max_iterations", [0, 1, 4, 6])
async def test_a_critic_that_never_says_stop_runs_1_plus_2T_calls(max_iterations):
    model = ScriptedModel(script(None))
    ctx = Context(model)
    solution = await SelfRefine(max_iterations=max_iterations).solve(TASK, ctx)
    assert len(model.calls) == 1 + 2 * max_iterations
    assert [r.agent for r in ctx.ledger.records] == ["generator"] + ["critic", "refiner"] * (
        max_iterations
    )
    assert solution.answer == f"answer-{max_iterations}: The answer is {max_iterations}."
    assert solution.metadata["stopped"] is False


def test_the_paper_default_is_at_most_4_iterations():
    assert SelfRefine().config.max_iterations == 4


async def test_the_critic_sees_the_current_answer_and_the_refiner_the_whole_history():
    model = ScriptedModel(script(None))
    ctx = Context(model)
    await SelfRefine(max_iterations=3).solve(TASK, ctx)
    generator = records_of(ctx, "generator")
    assert [last_user_message(r) for r in generator] == [cot_prompt(TASK)]
    for t, record in enumerate(records_of(ctx, "critic"), 1):
        prompt = record.messages[-1]["content"]
        assert len(record.messages) == 1 and record.round == t  # no memory of earlier rounds
        assert TASK.prompt() in prompt
        assert f"answer-{t - 1}:" in prompt  # the answer under review, and no other
        assert all(f"answer-{i}:" not in prompt for i in range(4) if i != t - 1)
        assert "fix-" not in prompt
    for t, record in enumerate(records_of(ctx, "refiner"), 1):
        prompt = record.messages[-1]["content"]
        assert len(record.messages) == 1 and record.round == t
        assert TASK.prompt() in prompt
        for i in range(t):  # every earlier answer with the feedback it got, oldest first
            assert f"Attempt {i + 1} ---\nanswer-{i}:" in prompt
            assert f"Feedback on attempt {i + 1} ---\nfix-{i + 1}" in prompt
        assert f"answer-{t}:" not in prompt and f"fix-{t + 1}" not in prompt
        assert prompt.index(f"answer-{t - 1}:") < prompt.index(f"fix-{t}")


async def test_the_stop_signal_is_read_from_json_and_text_without_it_never_stops():
    model = ScriptedModel(
        ["first draft", 'Some notes first. {"feedback": "ok", "stop": "true"}'], name="m"
    )
    solution = await SelfRefine().solve(TASK, Context(model))
    assert solution.answer == "first draft" and solution.metadata["stopped"] is True
    model = ScriptedModel(script(1, as_json=False))
    ctx = Context(model)
    solution = await SelfRefine(max_iterations=2).solve(TASK, ctx)
    assert len(model.calls) == 5 and solution.metadata["parsed"] == [False, False]
    # an unparsed critique is passed on whole as the feedback
    assert "fix-1: looks fine to me." in records_of(ctx, "refiner")[0].messages[-1]["content"]


async def test_a_stop_without_feedback_is_a_stop():
    def respond(request) -> str:
        if last_user_message(request).startswith("Here is a question and a proposed answer"):
            return '{"stop": true}'
        return f"answer-{len(model.calls)}: The answer is 42."

    model = ScriptedModel(respond)  # the text protocol: no native structured output
    ctx = Context(model)
    solution = await SelfRefine().solve(TASK, ctx)
    assert len(model.calls) == 2
    assert [r.agent for r in ctx.ledger.records] == ["generator", "critic"]
    assert solution.answer == "answer-0: The answer is 42."
    assert solution.metadata == {"refinements": 0, "stopped": True, "parsed": [True]}


@pytest.mark.parametrize("native", [True, False])
async def test_the_feedback_schema_is_sent_natively_where_supported(native):
    model = ScriptedModel(script(2), native=["structured_output"] if native else [])
    await SelfRefine().solve(TASK, Context(model))
    formats = [r.response_format for r in model.requests]
    assert formats[0] is None and formats[2] is None  # the generator and the refiner
    if native:
        assert formats[1]["type"] == "json_schema" and formats[3] == formats[1]
        assert formats[1]["json_schema"]["schema"] == Feedback.json_schema()
    else:
        assert formats == [None] * 4
    critiques = [last_user_message(r) for r in model.requests[1::2]]
    assert all(prompt.endswith(f"\n\n{Feedback.instructions()}") for prompt in critiques)


async def test_a_budget_stop_returns_the_best_answer_so_far():
    model = ScriptedModel(script(None))
    ctx = Context(model, budget=Budget(max_calls=2))
    solution = await SelfRefine().run_sample(TASK, ctx)
    assert solution.answer == "answer-0: The answer is 0."  # y0; the refinement never ran
    assert "budget" in solution.metadata and ctx.usage.calls == 2
    model = ScriptedModel(script(None))
    ctx = Context(model, budget=Budget(max_calls=4))
    solution = await SelfRefine().run_sample(TASK, ctx)
    assert solution.answer == "answer-1: The answer is 1."  # the latest refinement


async def test_model_roles_put_the_critic_on_another_model():
    method = get_method("self_refine")()
    roles = method.check_model_roles({"critic": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: script(3)), model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [
        ("generator", "scripted:a"),
        ("critic", "scripted:b"),
        ("refiner", "scripted:a"),
        ("critic", "scripted:b"),
        ("refiner", "scripted:a"),
        ("critic", "scripted:b"),
    ]


def test_each_sample_starts_afresh():
    method = SelfRefine(max_iterations=1)
    first = method.run(TASK, ScriptedModel(script(None)))
    second = method.run(TASK, ScriptedModel(script(None)))
    assert first.answer == second.answer == "answer-1: The answer is 1."
    prompt = second.context.ledger.records[-1].messages[-1]["content"]
    assert prompt.count("--- Attempt") == 1


@pytest.mark.system
def test_the_command_line_runs_self_refine_end_to_end(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "self_refine", "--benchmark", "arith", "--model", "scripted:echo",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 9 for r in results)
    mixed, critic = tmp_path / "mixed", tmp_path / "critic.yaml"
    critic.write_text('".": \'{"feedback": "Correct as it is.", "stop": true}\'\n')
    code = main(
        ["run", "--method", "self_refine", "--benchmark", "arith", "--model", "scripted:echo",
         "--model-role", f"critic=scripted:{critic}",
         "--limit", "1", "--out", str(mixed), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    trace = json.loads((mixed / "traces.jsonl").read_text().splitlines()[0])
    assert [(c["agent"], c["model"]) for c in trace["calls"]] == [
        ("generator", "scripted:echo"),
        ("critic", f"scripted:{critic}"),
    ]  # the critic said stop at once
