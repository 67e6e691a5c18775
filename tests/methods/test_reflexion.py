"""Reflexion with scripted models: the call formulas (self-evaluation and code), who sees what,
the bounded memory, the stop rule, budget stops, model roles and the command line. The code path
runs real (tiny) programs in the sandbox."""

from __future__ import annotations

import itertools
import json

import pytest
from helpers import TwoModels, prompts_of, records_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods.cot import cot_prompt
from maslab.methods.reflexion import Judgement, Reflexion, parse_tests

GOLD = "GOLD-7781"
TASK = Task(
    id="t1",
    question="What is 6 * 7?",
    gold=GOLD,
    answer_type="number",
    instruction="End with 'The answer is N'.",
)
CODE_TASK = Task(
    id="c1",
    question="Write a function add(a, b) that returns the sum of a and b.",
    gold="def add(a, b):\n    return a + b",
    tests=("assert add(2, 2) == 4  # GOLD TEST",),
    answer_type="code",
    instruction="Give your final answer in a single ```python code block.",
)


def is_judge(prompt: str) -> bool:
    return prompt.startswith("Question:\n")


def is_reflect(prompt: str) -> bool:
    return prompt.startswith("Task:\n")


def is_tests(prompt: str) -> bool:
    return prompt.startswith("Here is a programming task")


def script(pass_at: int | None = None, *, as_json: bool = True):
    """Attempts are 'attempt-i: The answer is i' (i = 1, 2, ...); judgements are 'judge-t' and
    say correct at trial ``pass_at`` (never for None); reflections are 'lesson-t'."""
    attempts, judgements, lessons = (itertools.count(1) for _ in range(3))

    def respond(request) -> str:
        prompt = last_user_message(request)
        if is_judge(prompt):
            t = next(judgements)
            if not as_json:
                return f"judge-{t}: seems right to me."
            return json.dumps({"feedback": f"judge-{t}", "correct": t == pass_at})
        if is_reflect(prompt):
            return f"lesson-{next(lessons)}: be more careful."
        i = next(attempts)
        return f"attempt-{i}: The answer is {i}."

    return respond


# --- self-evaluation (non-code tasks) --------------------------------------------------------


def test_the_defaults_are_five_trials_and_a_memory_of_three():
    config = Reflexion().config
    assert (config.max_trials, config.memory) == (5, 3)


@pytest.mark.parametrize("pass_at", [1, 2, 3, 5])
async def test_a_pass_at_trial_t_costs_3t_minus_1_calls_and_keeps_that_attempt(pass_at):
    model = ScriptedModel(script(pass_at))
    ctx = Context(model)
    solution = await Reflexion().solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == 3 * pass_at - 1
    assert solution.answer == f"attempt-{pass_at}: The answer is {pass_at}."
    assert solution.metadata["trials"] == pass_at and solution.metadata["passed"] is True
    assert solution.metadata["parsed"] == [True] * pass_at
    assert solution.metadata["evaluation"] == "self"


@pytest.mark.parametrize("max_trials", [1, 2, 4])
async def test_an_evaluator_that_never_passes_runs_3T_minus_1_calls(max_trials):
    model = ScriptedModel(script(None))
    ctx = Context(model)
    solution = await Reflexion(max_trials=max_trials).solve(TASK, ctx)
    assert len(model.calls) == 3 * max_trials - 1
    order = ["actor", "evaluator", "reflector"] * max_trials
    assert [r.agent for r in ctx.ledger.records] == order[:-1]  # no reflection after the last
    assert solution.answer == f"attempt-{max_trials}: The answer is {max_trials}."
    assert solution.metadata["passed"] is False and solution.metadata["trials"] == max_trials


async def test_who_sees_what_and_the_memory_keeps_the_last_omega_reflections():
    model = ScriptedModel(script(None))
    ctx = Context(model)
    await Reflexion(max_trials=5, memory=2).solve(TASK, ctx)
    actor = prompts_of(ctx, "actor")
    assert actor[0] == cot_prompt(TASK)
    for t, prompt in enumerate(actor[1:], 2):  # trial t sees lessons max(1, t-2) .. t-1
        shown = [i for i in range(1, 5) if f"lesson-{i}:" in prompt]
        assert shown == list(range(max(1, t - 2), t))
        assert prompt.index(f"lesson-{t - 1}:") > prompt.index(f"lesson-{shown[0]}:") or t == 2
        assert TASK.prompt() in prompt
        assert "attempt-" not in prompt and "judge-" not in prompt  # only the lessons
    for t, prompt in enumerate(prompts_of(ctx, "evaluator"), 1):
        assert f"attempt-{t}:" in prompt and "lesson-" not in prompt
        assert all(f"attempt-{i}:" not in prompt for i in range(1, 6) if i != t)
    for t, prompt in enumerate(prompts_of(ctx, "reflector"), 1):
        assert f"attempt-{t}:" in prompt and f"judge-{t}" in prompt
        assert "lesson-" not in prompt and f"attempt-{t + 1}:" not in prompt
    for record in ctx.ledger.records:
        assert len(record.messages) == 1  # no chat history: the memory is all that carries over
    assert [r.round for r in records_of(ctx, "actor")] == [0, 1, 2, 3, 4]


async def test_the_gold_answer_is_never_shown_to_any_model():
    model = ScriptedModel(script(None))
    ctx = Context(model)
    await Reflexion(max_trials=3).solve(TASK, ctx)
    assert all(GOLD not in json.dumps(r.messages) for r in ctx.ledger.records)


async def test_garbage_judgements_count_as_failures_and_prose_around_json_still_passes():
    model = ScriptedModel(script(1, as_json=False))
    ctx = Context(model)
    solution = await Reflexion(max_trials=2).solve(TASK, ctx)
    assert len(model.calls) == 5 and solution.metadata["parsed"] == [False, False]
    # an unparsed judgement is passed on whole to the reflector
    assert "judge-1: seems right to me." in prompts_of(ctx, "reflector")[0]
    model = ScriptedModel(["first try", 'Hmm. {"feedback": "fine", "correct": "true"}'], name="m")
    solution = await Reflexion().solve(TASK, Context(model))
    assert solution.answer == "first try" and solution.metadata["passed"] is True
    model = ScriptedModel(["try", "{}", "", "try again", "[1, 2]"], name="m")
    solution = await Reflexion(max_trials=2).solve(TASK, Context(model))
    assert solution.answer == "try again" and solution.metadata["reflections"] == []


async def test_a_correct_judgement_without_feedback_passes():
    def respond(request) -> str:
        if is_judge(last_user_message(request)):
            return '{"correct": true}'
        return f"attempt-{len(model.calls)}: The answer is 42."

    model = ScriptedModel(respond)  # the text protocol: no native structured output
    ctx = Context(model)
    solution = await Reflexion().solve(TASK, ctx)
    assert len(model.calls) == 2
    assert [r.agent for r in ctx.ledger.records] == ["actor", "evaluator"]
    assert solution.answer == "attempt-0: The answer is 42."
    assert solution.metadata["passed"] is True and solution.metadata["trials"] == 1
    assert solution.metadata["parsed"] == [True]


@pytest.mark.parametrize("native", [True, False])
async def test_the_judgement_schema_is_sent_natively_where_supported(native):
    model = ScriptedModel(script(2), native=["structured_output"] if native else [])
    await Reflexion().solve(TASK, Context(model))
    formats = [r.response_format for r in model.requests]
    assert formats[0] is None and formats[2] is None and formats[3] is None
    if native:
        assert formats[1]["type"] == "json_schema" and formats[4] == formats[1]
        assert formats[1]["json_schema"]["schema"] == Judgement.json_schema()
    else:
        assert formats == [None] * 5
    judges = [last_user_message(model.requests[i]) for i in (1, 4)]
    assert all(prompt.endswith(f"\n\n{Judgement.instructions()}") for prompt in judges)


async def test_a_budget_stop_returns_the_latest_attempt():
    for calls, expected in ((1, 1), (3, 1), (4, 2), (7, 3)):
        model = ScriptedModel(script(None))
        ctx = Context(model, budget=Budget(max_calls=calls))
        solution = await Reflexion().run_sample(TASK, ctx)
        assert solution.answer == f"attempt-{expected}: The answer is {expected}."
        assert "budget" in solution.metadata and ctx.usage.calls == calls


async def test_model_roles_put_the_evaluator_on_another_model():
    method = get_method("reflexion")()
    roles = method.check_model_roles({"evaluator": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: script(2)), model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [
        ("actor", "scripted:a"),
        ("evaluator", "scripted:b"),
        ("reflector", "scripted:a"),
        ("actor", "scripted:a"),
        ("evaluator", "scripted:b"),
    ]


def test_each_sample_starts_afresh():
    method = Reflexion(max_trials=2)
    first = method.run(TASK, ScriptedModel(script(None)))
    second = method.run(TASK, ScriptedModel(script(None)))
    assert first.answer == second.answer == "attempt-2: The answer is 2."
    prompt = second.context.ledger.records[-2].messages[-1]["content"]
    assert prompt.count("Lesson ") == 1 and second.solution.metadata["reflections"] == [
        "lesson-1: be more careful."
    ]


# --- code tasks: generated unit tests run in the sandbox ---------------------------------------

WRONG = "Subtracting by mistake:\n```python\ndef add(a, b):\n    return a - b\n```"
RIGHT = "Fixed:\n```python\ndef add(a, b):\n    return a + b\n```"
TESTS = "```python\nassert add(1, 2) == 3\nassert add(0, 0) == 0\nprint('not a test')\n```"


def code_script(programs, tests=TESTS):
    """The tests (the evaluator), the programs in turn (the actor), reflections 'lesson-t'."""
    programs, lessons = iter(programs), itertools.count(1)

    def respond(request) -> str:
        prompt = last_user_message(request)
        if is_tests(prompt):
            return tests
        if is_reflect(prompt):
            return f"lesson-{next(lessons)}: I subtracted instead of adding."
        return next(programs)

    return respond


@pytest.mark.system
async def test_code_tasks_run_generated_tests_and_stop_when_they_pass():
    model = ScriptedModel(code_script([WRONG, RIGHT]))
    ctx = Context(model)
    solution = await Reflexion().solve(CODE_TASK, ctx)
    assert len(model.calls) == 2 * 2  # actor, tests, reflector, actor
    assert [r.agent for r in ctx.ledger.records] == ["actor", "evaluator", "reflector", "actor"]
    assert solution.answer == RIGHT
    assert solution.metadata["tests"] == ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]
    assert solution.metadata["test_results"] == [(1, 2), (2, 2)]
    assert solution.metadata["passed"] is True and solution.metadata["evaluation"] == "tests"
    tests_prompt, reflect, retry = (
        prompts_of(ctx, "evaluator")[0],
        prompts_of(ctx, "reflector")[0],
        prompts_of(ctx, "actor")[1],
    )
    assert CODE_TASK.prompt() in tests_prompt and "a - b" not in tests_prompt  # no attempt
    assert "assert add(1, 2) == 3  # returned -1" in reflect and "return a - b" in reflect
    assert "return a - b" in retry and "returned -1" in retry and "lesson-1:" in retry
    assert all("GOLD" not in json.dumps(r.messages) for r in ctx.ledger.records)
    results = [m for m in ctx.transcript if m.kind == "test_results"]
    assert [m.content.splitlines()[0] for m in results] == [
        "1 of 2 unit tests passed.",
        "2 of 2 unit tests passed.",
    ]


@pytest.mark.system
async def test_code_that_never_passes_costs_2T_calls_and_garbage_tests_fall_back():
    model = ScriptedModel(code_script([WRONG, "no code here", WRONG]))
    ctx = Context(model)
    solution = await Reflexion(max_trials=3).solve(CODE_TASK, ctx)
    assert len(model.calls) == 2 * 3 and solution.answer == WRONG
    assert solution.metadata["test_results"] == [(1, 2), (0, 2), (1, 2)]
    assert "No Python code was found" in prompts_of(ctx, "reflector")[1]
    # no parsable test: an attempt passes when its code runs without error
    model = ScriptedModel(code_script(["```python\nraise ValueError('boom')\n```", RIGHT], "?"))
    solution = await Reflexion().solve(CODE_TASK, Context(model))
    assert len(model.calls) == 4 and solution.answer == RIGHT
    assert solution.metadata["tests"] == [] and solution.metadata["test_results"] == [(0, 0)] * 2


@pytest.mark.system
async def test_a_budget_stop_on_a_code_task_returns_the_latest_program():
    for calls, expected in ((1, WRONG), (2, WRONG), (3, WRONG), (4, RIGHT)):
        model = ScriptedModel(code_script([WRONG, RIGHT]))
        ctx = Context(model, budget=Budget(max_calls=calls))
        solution = await Reflexion().run_sample(CODE_TASK, ctx)
        assert solution.answer == expected and ctx.usage.calls == calls
        assert ("budget" in solution.metadata) == (calls < 4)


@pytest.mark.system
async def test_a_humaneval_style_stub_goes_before_the_program():
    task = Task(
        id="h1",
        question="Complete:\n```python\nfrom typing import List\n\ndef total(xs: List[int]):\n```",
        answer_type="code",
        metadata={"entry_point": "total", "prompt_prefix": "from typing import List\n\n"},
    )
    program = "```python\ndef total(xs: List[int]) -> int:\n    return sum(xs)\n```"
    tests = "```python\nassert total([1, 2]) == 3\nassert total([]) == 0\n```"
    model = ScriptedModel(code_script([program], tests))
    solution = await Reflexion().solve(task, Context(model))
    assert len(model.calls) == 2 and solution.metadata["test_results"] == [(2, 2)]


def test_parse_tests_keeps_distinct_one_line_asserts_up_to_the_limit():
    text = "assert f(1) == 1\nassert f(1) == 1\nassert (\nx = 1\n  assert f(2) == 4\nassert f(3)"
    assert parse_tests(text, 10) == ["assert f(1) == 1", "assert f(2) == 4", "assert f(3)"]
    assert parse_tests(text, 2) == ["assert f(1) == 1", "assert f(2) == 4"]


@pytest.mark.system
def test_the_command_line_runs_reflexion_end_to_end(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "reflexion", "--benchmark", "arith", "--model", "scripted:echo",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 14 for r in results)
