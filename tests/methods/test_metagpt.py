"""MetaGPT with scripted models: the call formula (5 + d on code, 4 elsewhere), the message
pool's subscriptions (who reads which document), lenient reading of every reply, budget stops,
model roles and the command line. The tests run real (tiny) programs in the sandbox."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import pytest
from helpers import TASK, TwoModels, add_task, agent_of, prompts_of, records_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.metagpt import (
    PRD,
    PUBLISHERS,
    ROLES,
    SUBSCRIPTIONS,
    MetaGPT,
    SystemDesign,
    TaskList,
    read_document,
    subscribed,
)

HIDDEN = "assert add(7, 7) == 14  # HIDDEN-TEST"
CODE_TASK = add_task(HIDDEN)
SHOWN = ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]
QA_TESTS = ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]
QA_REPLY = "Here are my tests:\n```python\n" + "\n".join(QA_TESTS) + "\n```"

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"  # passes 4 of 4
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"  # passes 1 of 4 (0 - 0 == 0)
BROKEN = "```python\ndef add(a, b):\n    return a * q\n```"  # passes 0 of 4
NO_CODE = "I am not sure what to change."

DOCS = {
    "product_manager": json.dumps(
        {
            "product_goals": ["GOAL-1"],
            "user_stories": ["STORY-1"],
            "requirement_analysis": "ANALYSIS-1",
            "requirement_pool": [{"requirement": "POOL-1", "priority": "P0"}],
            "anything_unclear": "",
        }
    ),
    "architect": json.dumps(
        {
            "implementation_approach": "APPROACH-1",
            "file_list": ["main.py"],
            "data_structures_and_interfaces": "INTERFACE-1",
            "program_call_flow": "FLOW-1",
            "anything_unclear": "",
        }
    ),
    "project_manager": json.dumps(
        {
            "required_packages": [],
            "logic_analysis": ["LOGIC-1"],
            "task_list": ["TASK-1"],
            "shared_knowledge": "SHARED-1",
            "anything_unclear": "",
        }
    ),
}
MARKS = {  # what of each document shows in a subscriber's prompt
    "product_manager": ("GOAL-1", "STORY-1", "[P0] POOL-1"),
    "architect": ("APPROACH-1", "INTERFACE-1", "FLOW-1"),
    "project_manager": ("LOGIC-1", "TASK-1", "SHARED-1"),
}


def script(
    codes: Sequence[str], qa: str = QA_REPLY, docs: dict[str, str] | None = None
) -> Callable[[ChatRequest], str]:
    """The three documents by role (``docs`` over :data:`DOCS`), the QA engineer's tests, and
    the engineer's replies in turn (WRONG once they are used up)."""
    replies = iter(codes)
    written = {**DOCS, **(docs or {})}

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        if agent == "engineer":
            return next(replies, WRONG)
        return qa if agent == "qa_engineer" else written[agent]

    return respond


async def solve(model: ScriptedModel, task: Task = CODE_TASK, **config: object):
    ctx = Context(model)
    solution = await MetaGPT(**config).solve(task, ctx)
    return solution, ctx


def test_the_defaults_are_three_retries_and_five_qa_tests():
    assert (MetaGPT().config.max_retries, MetaGPT().config.max_tests) == (3, 5)
    assert MetaGPT.roles == ROLES == tuple(SUBSCRIPTIONS)


def test_the_structure_is_the_subscriptions():
    edges = MetaGPT().structure().edges
    assert sorted(edges) == sorted(
        [
            ("product_manager", "architect"),  # the PRD
            ("architect", "project_manager"),  # the design
            ("architect", "engineer"),  # the design
            ("project_manager", "engineer"),  # the task list
            ("qa_engineer", "engineer"),  # the test results
            ("engineer", "qa_engineer"),  # the code
        ]
    )
    derived = [(PUBLISHERS[k], role) for role in ROLES for k in SUBSCRIPTIONS[role]]
    assert sorted(edges) == sorted(derived)
    assert MetaGPT().structure().nodes == list(ROLES)


@pytest.mark.system
@pytest.mark.parametrize(
    ("codes", "k", "d", "passed"),
    [
        ([RIGHT], 3, 0, True),
        ([WRONG, RIGHT], 3, 1, True),
        ([WRONG, BROKEN, RIGHT], 2, 2, True),
        ([WRONG] * 5, 3, 3, False),
        ([WRONG] * 5, 1, 1, False),
        ([WRONG], 0, 0, False),
    ],
)
async def test_a_code_task_costs_5_plus_d_calls(codes, k, d, passed):
    model = ScriptedModel(script(codes))
    solution, ctx = await solve(model, max_retries=k)
    assert len(model.calls) == ctx.usage.calls == 5 + d
    assert [r.agent for r in ctx.ledger.records] == [*ROLES, *["engineer"] * d]
    meta = solution.metadata
    assert meta["retries"] == d and meta["passed"] is passed
    assert meta["public_tests"] == SHOWN and meta["qa_tests"] == QA_TESTS
    assert meta["parsed"] == {"prd": True, "design": True, "tasks": True}
    runs = [m for m in ctx.transcript if m.kind == "test_results"]
    assert len(runs) == len(meta["test_results"]) == d + 1  # one test run per code
    assert all(m.sender == "qa_engineer" for m in runs)
    assert solution.answer == (RIGHT if passed else WRONG)


@pytest.mark.parametrize("k", [0, 3])
async def test_a_task_whose_answer_is_not_code_costs_4_calls_and_runs_nothing(k):
    model = ScriptedModel(script(["Step one... The answer is 42."]))
    solution, ctx = await solve(model, TASK, max_retries=k)
    assert len(model.calls) == ctx.usage.calls == 4
    assert [r.agent for r in ctx.ledger.records] == list(ROLES[:4])
    assert solution.answer == "Step one... The answer is 42."
    assert not any(m.kind == "test_results" for m in ctx.transcript)
    (prompt,) = prompts_of(ctx, "engineer")
    assert "There is no program to write" in prompt and "```python" not in prompt
    assert all(mark in prompt for mark in MARKS["architect"] + MARKS["project_manager"])


@pytest.mark.system
async def test_who_sees_what():
    model = ScriptedModel(script([WRONG, NO_CODE, RIGHT]))
    solution, ctx = await solve(model)
    assert solution.answer == RIGHT and solution.metadata["test_results"] == [
        (1, 4),
        (0, 4),
        (4, 4),
    ]
    prompts = {role: prompts_of(ctx, role) for role in ROLES}
    requirement = CODE_TASK.prompt()
    for role in ROLES:
        for prompt in prompts[role]:
            assert requirement in prompt  # every role reads the requirement
            publishers = {PUBLISHERS[kind] for kind in SUBSCRIPTIONS[role]}
            for author, marks in MARKS.items():  # and only the documents it subscribes to
                assert all((mark in prompt) is (author in publishers) for mark in marks), role
    assert "GOAL-1" not in prompts["project_manager"][0] + "".join(prompts["engineer"])
    assert "APPROACH-1" in prompts["project_manager"][0] and "TASK-1" in prompts["engineer"][0]
    (qa,) = prompts["qa_engineer"]
    assert "APPROACH-1" not in qa and "TASK-1" not in qa and "GOAL-1" not in qa
    assert "return a - b" in qa and "Write up to 5 unit tests" in qa  # the code, extracted
    write, first_fix, second_fix = prompts["engineer"]
    assert "Test results" not in write and "return a - b" not in write
    assert write.index("APPROACH-1") < write.index("TASK-1")  # in subscription order
    assert first_fix.index("TASK-1") < first_fix.index("1 of 4 unit tests passed.")
    assert "assert add(2, 3) == 5  # returned -1" in first_fix  # the QA engineer's test failed
    assert "## Your latest code\n\n" + WRONG in first_fix
    # the reply without code: reported as such, and the latest code is still shown
    assert "No Python code was found" in second_fix and "1 of 4" not in second_fix
    assert "## Your latest code\n\n" + WRONG in second_fix
    for record in ctx.ledger.records:  # every call starts afresh: the profile and one prompt
        assert [m["role"] for m in record.messages] == ["system", "user"]
        assert "HIDDEN-TEST" not in json.dumps(record.messages)  # hidden tests never shown
        assert "GOLD-CODE" not in json.dumps(record.messages)
    assert [m.content for m in subscribed(ctx, "engineer")][-1].startswith("4 of 4")


async def test_the_documents_are_asked_as_json_natively_where_supported():
    for native in (True, False):
        model = ScriptedModel(
            script(["x"]), native=["structured_output"] if native else []
        )  # a non-code task: no sandbox
        await solve(model, TASK)
        schemas = [(r.response_format or {}).get("json_schema") for r in model.requests]
        expected = [PRD, SystemDesign, TaskList]
        for request, reply in zip(model.requests, expected, strict=False):
            assert last_user_message(request).endswith(reply.instructions())
        if native:
            assert [s["schema"] for s in schemas[:3]] == [r.json_schema() for r in expected]
        else:
            assert schemas[:3] == [None] * 3
        assert schemas[3] is None  # the engineer's reply is no JSON


def test_documents_are_read_leniently():
    text, ok = read_document("prd", '{"product_goals": "one", "requirement_pool": ["a", 3]}')
    assert ok and text == "### Product goals\n- one\n\n### Requirement pool\n- a"
    assert read_document("design", "Use a loop.") == ("Use a loop.", False)
    assert read_document("tasks", '{"unrelated": 1}') == ('{"unrelated": 1}', False)
    assert read_document("tasks", "   ") == ("(empty)", False)


@pytest.mark.system
async def test_garbage_replies_take_the_fallbacks():
    docs = {"product_manager": "PRD-AS-PROSE", "architect": '{"nothing": 0}', "project_manager": ""}
    model = ScriptedModel(script([WRONG, RIGHT], qa="I would test it by hand.", docs=docs))
    solution, ctx = await solve(model)
    assert len(model.calls) == 6 and solution.answer == RIGHT
    meta = solution.metadata
    assert meta["parsed"] == {"prd": False, "design": False, "tasks": False}
    assert meta["qa_tests"] == [] and meta["test_results"] == [(1, 2), (2, 2)]  # shown ones
    assert "PRD-AS-PROSE" in prompts_of(ctx, "architect")[0]  # published as written
    assert '{"nothing": 0}' in prompts_of(ctx, "project_manager")[0]
    assert "(empty)" in prompts_of(ctx, "engineer")[0]
    # every reply empty: all k debugging rounds, no code, no crash
    model = ScriptedModel(lambda request: "")
    solution, _ = await solve(model)
    assert len(model.calls) == 5 + 3 and solution.answer == ""
    assert solution.metadata["replies_without_code"] == 4
    assert solution.metadata["test_results"] == [(0, 2)] * 4


@pytest.mark.system
async def test_a_reply_without_code_never_replaces_a_tested_code():
    model = ScriptedModel(script([BROKEN, NO_CODE]))
    solution, _ = await solve(model, max_retries=1)
    assert solution.answer == BROKEN and solution.metadata["test_results"] == [(0, 4), (0, 4)]


@pytest.mark.system
async def test_a_budget_stop_returns_the_code_passing_most_tests_so_far():
    codes = [WRONG, BROKEN, NO_CODE, RIGHT]
    for calls, expected in ((3, ""), (4, WRONG), (5, WRONG), (6, WRONG), (7, WRONG)):
        model = ScriptedModel(script(codes))
        ctx = Context(model, budget=Budget(max_calls=calls))
        solution = await MetaGPT().run_sample(CODE_TASK, ctx)
        assert solution.answer == expected and ctx.usage.calls == calls
        assert "budget" in solution.metadata
    model = ScriptedModel(script([BROKEN, WRONG]))  # the later, better code is the best so far
    ctx = Context(model, budget=Budget(max_calls=6))
    solution = await MetaGPT().run_sample(CODE_TASK, ctx)
    assert solution.answer == WRONG and "budget" in solution.metadata
    model = ScriptedModel(script(codes))
    solution = await MetaGPT().run_sample(CODE_TASK, Context(model, budget=Budget(max_calls=8)))
    assert solution.answer == RIGHT and "budget" not in solution.metadata


async def test_a_budget_stop_on_another_task_is_empty_before_the_engineer():
    model = ScriptedModel(script(["The answer is 42."]))
    ctx = Context(model, budget=Budget(max_calls=3))
    solution = await MetaGPT().run_sample(TASK, ctx)
    assert solution.answer == "" and ctx.usage.calls == 3 and "budget" in solution.metadata


@pytest.mark.system
async def test_prompts_and_answer_do_not_depend_on_latencies():
    def slow_first(request: ChatRequest) -> float:
        return 0.004 * (len(ROLES) - ROLES.index(agent_of(request)))

    def slow_last(request: ChatRequest) -> float:
        return 0.004 * ROLES.index(agent_of(request))

    seen = []
    for latency in (slow_first, slow_last):
        model = ScriptedModel(script([WRONG, RIGHT]), latency=latency)
        solution, ctx = await solve(model)
        records = [(r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records]
        seen.append((solution.answer, records))
    assert seen[0] == seen[1] and seen[0][0] == RIGHT


@pytest.mark.parametrize("role", ROLES[:4])
async def test_model_roles_put_each_role_on_its_own_model(role):
    method = get_method("metagpt")()
    models = TwoModels(lambda: script(["The answer is 42."]))
    ctx = Context(
        "scripted:a", models=models, model_roles=method.check_model_roles({role: "scripted:b"})
    )
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [
        (name, "scripted:b" if name == role else "scripted:a") for name in ROLES[:4]
    ]


@pytest.mark.system
async def test_model_roles_put_the_qa_engineer_on_another_model():
    method = get_method("metagpt")()
    roles = method.check_model_roles({"qa_engineer": "scripted:b"})
    models = TwoModels(lambda: script([RIGHT]))
    ctx = Context("scripted:a", models=models, model_roles=roles)
    await method.solve(CODE_TASK, ctx)
    assert {r.model for r in records_of(ctx, "qa_engineer")} == {"scripted:b"}
    assert {r.model for r in ctx.ledger.records if r.agent != "qa_engineer"} == {"scripted:a"}


@pytest.mark.system
def test_the_command_line_runs_metagpt_on_humaneval(tmp_path):
    replies = {
        "Write the product requirement document": DOCS["product_manager"],
        "Write the system design": DOCS["architect"],
        "Break this design down": DOCS["project_manager"],
        r"Write up to \d+ unit tests": "```python\nassert 1 == 1\n```",
        ".": "```python\ndef nothing():\n    return None\n```",  # the engineer
    }
    (tmp_path / "team.json").write_text(json.dumps(replies))
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "metagpt", "--benchmark", "humaneval",
         "--model", f"scripted:{tmp_path / 'team.json'}", "--config", "max_retries=1",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    results = sorted((json.loads(line) for line in lines), key=lambda r: r["task_id"])
    assert len(results) == 2 and all(r["status"] == "ok" for r in results)
    # the doctests fail the placeholder: one debugging round each, 5 + 1 calls
    assert all(r["usage"]["calls"] == 6 for r in results)
    assert [len(r["metadata"]["public_tests"]) for r in results] == [2, 1]
    assert all(r["metadata"]["qa_tests"] == ["assert 1 == 1"] for r in results)
    assert not any(r["score"]["correct"] for r in results)
