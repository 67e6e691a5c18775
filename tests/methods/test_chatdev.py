"""ChatDev with scripted models: the call formula (early ends and caps of every phase), who saw
what in each phase, the testing phase running real programs in the sandbox (failing, then
fixed), budget stops, garbage replies, model roles and the command line."""

from __future__ import annotations

import itertools
import json

import pytest
from helpers import TwoModels, prompts_of, records_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods.chatdev import FINISHED, ChatDev, coding_instruction, finished

TASK = Task(
    id="c1",
    question="Write a function add(a, b) that returns the sum of a and b.\n\n"
    "Your code should pass tests like this one:\n\n```python\nassert add(2, 3) == 5\n```",
    gold="def add(a, b):\n    return a + b",
    tests=("assert add(2, 2) == 4  # HIDDEN-TEST", "assert add(-7, 7) == 0"),
    answer_type="code",
    instruction="Give your final answer in a single ```python code block.",
)
HIDDEN = ("HIDDEN-TEST", "add(-7, 7)")
SYSTEMS = {
    "cto": "Chief Technology Officer",
    "programmer": "You are a Programmer",
    "reviewer": "You are a Code Reviewer",
    "tester": "You are a Software Test Engineer",
}


def speaker(request) -> str:
    system = request.messages[0]["content"]
    return next(role for role, mark in SYSTEMS.items() if mark in system)


def program(version: int, right: bool) -> str:
    op = "+" if right else "-"
    return f"Here it is:\n```python\ndef add(a, b):  # v{version}\n    return a {op} b\n```"


def code_of(version: int, right: bool) -> str:
    return program(version, right).split("\n", 1)[1]


def script(cto_finish_at=None, review_finish_at=None, fail_runs=0):
    """The programmer's i-th reply is program v{i}: wrong (a - b) while ``fail_runs`` > 0, and
    the k-th test fix is right from k = ``fail_runs`` on. The CTO says 'cto-i' (FINISHED on its
    call ``cto_finish_at``), the reviewer 'review-c' (FINISHED in cycle ``review_finish_at``),
    the tester 'diag-k'."""
    versions, ctos, reviews, fixes = (itertools.count(1) for _ in range(4))
    before_tests = [0]  # the last version written before the testing phase

    def respond(request) -> str:
        who = speaker(request)
        if who == "cto":
            i = next(ctos)
            return FINISHED if i == cto_finish_at else f"cto-{i}: also handle floats."
        if who == "reviewer":
            c = next(reviews)
            return f"Looks good. {FINISHED}" if c == review_finish_at else f"review-{c}: fix it."
        if who == "tester":
            return f"diag-{next(fixes)}: it subtracts instead of adding."
        i = next(versions)
        if "It was run against the examples" in last_user_message(request):
            return program(i, right=i - before_tests[0] >= fail_runs)
        before_tests[0] = i
        return program(i, right=fail_runs == 0)

    return respond


def expected_calls(turns, cto_at, cycles, review_at, fixes_cap, fail_runs) -> int:
    coding = 2 * cto_at if cto_at is not None and cto_at < turns else 2 * turns - 1
    review = 2 * review_at - 1 if review_at is not None and review_at <= cycles else 2 * cycles
    return coding + review + 2 * min(fail_runs, fixes_cap)


def test_the_defaults_are_chatdevs_one_coding_turn_and_three_cycles():
    config = ChatDev().config
    assert (config.coding_turns, config.review_cycles, config.test_cycles) == (1, 3, 3)


@pytest.mark.system
@pytest.mark.parametrize(
    ("turns", "cto_at", "cycles", "review_at", "fixes_cap", "fail_runs"),
    [
        (1, None, 3, None, 3, 0),  # review cap, tests pass at once: 1 + 6 = 7
        (1, None, 3, 1, 3, 0),  # the reviewer finishes at once: the minimum, 2
        (1, None, 3, None, 3, 5),  # every cap: the maximum, 13
        (3, 2, 3, 2, 3, 1),  # the CTO finishes after turn 2: 4 + 3 + 2
        (3, None, 2, 3, 2, 2),  # coding cap (no CTO call after the last turn): 5 + 4 + 4
        (2, 2, 0, None, 0, 4),  # no review, no fixes: the CTO's call 2 never comes
    ],
)
async def test_calls_follow_the_formula(turns, cto_at, cycles, review_at, fixes_cap, fail_runs):
    model = ScriptedModel(script(cto_at, review_at, fail_runs))
    ctx = Context(model)
    method = ChatDev(coding_turns=turns, review_cycles=cycles, test_cycles=fixes_cap)
    solution = await method.solve(TASK, ctx)
    calls = expected_calls(turns, cto_at, cycles, review_at, fixes_cap, fail_runs)
    assert len(model.calls) == ctx.usage.calls == calls
    meta = solution.metadata
    coding = cto_at if cto_at is not None and cto_at < turns else turns
    assert meta["coding_turns"] == coding and meta["cto_finished"] == (coding < turns)
    reviews = review_at if review_at is not None and review_at <= cycles else cycles
    assert meta["reviews"] == reviews
    assert meta["review_finished"] == (review_at is not None and review_at <= cycles)
    fixes = min(fail_runs, fixes_cap)
    assert meta["fixes"] == fixes and meta["passed"] == (fail_runs <= fixes_cap)
    assert meta["test_results"] == [(0, 1)] * fixes + [(int(fail_runs <= fixes_cap), 1)]
    agents = [r.agent for r in ctx.ledger.records]
    testing = ["tester", "programmer"] * fixes
    assert agents[len(agents) - len(testing) :] == testing
    versions = agents.count("programmer")
    assert solution.answer == code_of(versions, right=fail_runs <= fixes_cap)


@pytest.mark.system
async def test_who_sees_what_in_each_phase():
    model = ScriptedModel(script(fail_runs=1))
    ctx = Context(model)
    solution = await ChatDev(coding_turns=2, review_cycles=2, test_cycles=2).solve(TASK, ctx)
    # coding: programmer v1, cto-1, programmer v2; review: review-1, v3, review-2, v4;
    # testing: v4 fails, diag-1, v5 passes
    assert [r.agent for r in ctx.ledger.records] == [
        "programmer", "cto", "programmer", "reviewer", "programmer", "reviewer", "programmer",
        "tester", "programmer",
    ]  # fmt: skip
    programmer = records_of(ctx, "programmer")
    # the coding chat: the CTO's templated opening, then the chat's own history
    assert list(programmer[0].messages[1:]) == [
        {"role": "user", "content": coding_instruction(TASK)}
    ]
    assert [m["role"] for m in programmer[1].messages] == [
        "system", "user", "assistant", "user",
    ]  # fmt: skip
    assert programmer[1].messages[-1]["content"].startswith("cto-1:")
    (cto,) = records_of(ctx, "cto")
    assert len(cto.messages) == 2 and coding_instruction(TASK) in cto.messages[-1]["content"]
    assert code_of(1, False) in cto.messages[-1]["content"]
    # every later phase is a fresh chat: the request, the current code, the partner's words
    for record in [*programmer[2:], *records_of(ctx, "reviewer"), *records_of(ctx, "tester")]:
        assert len(record.messages) == 2 and TASK.prompt() in record.messages[-1]["content"]
        assert "cto-1" not in record.messages[-1]["content"]
    reviews = prompts_of(ctx, "reviewer")
    assert code_of(2, False) in reviews[0] and code_of(3, False) in reviews[1]
    assert "review-1" not in reviews[1] and "v2" not in reviews[1]
    modify = prompts_of(ctx, "programmer")[2:4]
    assert "review-1:" in modify[0] and code_of(2, False) in modify[0]
    assert "review-2:" in modify[1] and "review-1" not in modify[1]
    (diagnose,) = prompts_of(ctx, "tester")
    fix = prompts_of(ctx, "programmer")[4]
    for prompt in (diagnose, fix):
        assert "0 of 1 unit tests passed." in prompt and code_of(4, False) in prompt
        assert "assert add(2, 3) == 5  # returned -1" in prompt
        assert "review-" not in prompt
    assert "diag-1:" in fix and "diag-1" not in diagnose
    assert solution.answer == code_of(5, True) and solution.metadata["passed"] is True
    # the hidden tests are never run by the method nor shown to any model
    assert solution.metadata["public_tests"] == ["assert add(2, 3) == 5"]
    for record in ctx.ledger.records:
        assert not any(text in json.dumps(record.messages) for text in HIDDEN)
    results = [m for m in ctx.transcript if m.kind == "test_results"]
    assert [m.sender for m in results] == ["tester", "tester"]
    assert [m.content.splitlines()[0] for m in results] == [
        "0 of 1 unit tests passed.",
        "1 of 1 unit tests passed.",
    ]
    assert ctx.topology is not None and ("reviewer", "programmer") in ctx.topology.edges


@pytest.mark.system
async def test_testing_runs_a_humaneval_stub_with_its_doctests_in_the_sandbox():
    stub = (
        "def double(x: int) -> int:\n"
        '    """Twice x.\n    >>> double(2)\n    4\n    >>> double(-1)\n    -2\n    """\n'
    )
    task = Task(
        id="h1",
        question=f"Complete the function.\n\n```python\n{stub}```",
        answer_type="code",
        tests=("def check(candidate):\n    assert candidate(5) == 10  # HIDDEN-TEST",),
        metadata={"entry_point": "double", "prompt_prefix": stub},
    )
    bodies = iter(["```python\n    return x + 2\n```", "```python\n    return 2 * x\n```"])

    def respond(request) -> str:
        who = speaker(request)
        if who == "reviewer":
            return FINISHED
        if who == "tester":
            return "double(-1) is wrong: it adds 2."
        return next(bodies)

    model = ScriptedModel(respond)
    ctx = Context(model)
    solution = await ChatDev().solve(task, ctx)
    assert len(model.calls) == 1 + 1 + 2
    assert solution.metadata["public_tests"] == ["assert double(2) == 4", "assert double(-1) == -2"]
    assert solution.metadata["test_results"] == [(1, 2), (2, 2)]
    assert "assert double(-1) == -2  # returned 1" in prompts_of(ctx, "tester")[0]
    assert solution.answer == "```python\n    return 2 * x\n```"
    assert all("HIDDEN-TEST" not in json.dumps(r.messages) for r in ctx.ledger.records)


@pytest.mark.system
@pytest.mark.parametrize(
    ("calls", "version"), [(1, 1), (2, 1), (3, 2), (7, 4), (8, 4), (9, 5), (12, 6)]
)
async def test_a_budget_stop_returns_the_latest_code(calls, version):
    # defaults, every cap: v1, review-1, v2, review-2, v3, review-3, v4, diag, v5, diag, v6, ...
    model = ScriptedModel(script(fail_runs=9))
    ctx = Context(model, budget=Budget(max_calls=calls))
    solution = await ChatDev().run_sample(TASK, ctx)
    assert solution.answer == code_of(version, False)
    assert "budget" in solution.metadata and ctx.usage.calls == calls


@pytest.mark.system
async def test_garbage_replies_never_crash_and_code_less_replies_keep_the_code():
    model = ScriptedModel(["", "", "", "", "", "", "", "", "", "", "", "", ""])
    solution = await ChatDev().solve(TASK, Context(model))
    assert len(model.calls) == 13 and solution.answer == ""
    assert solution.metadata["replies_without_code"] == 7
    assert solution.metadata["test_results"] == [(0, 1)] * 4
    # a reply without code keeps the previous code; prose about finishing is no marker
    replies = [program(1, True), "I am finished, really.", "no code, sorry", "{]", "nothing"]
    model = ScriptedModel(replies + ["..."] * 2, name="m")
    ctx = Context(model)
    solution = await ChatDev(test_cycles=1).solve(TASK, ctx)
    assert len(model.calls) == 7 and solution.answer == code_of(1, True)
    assert solution.metadata["replies_without_code"] == 3 and solution.metadata["passed"]
    assert code_of(1, True) in prompts_of(ctx, "reviewer")[2]


def test_the_conclusion_marker():
    assert finished("All good.\n<INFO> Finished") and finished("<info>finished.")
    assert not finished("Finished") and not finished("<INFO> not yet")


@pytest.mark.system
async def test_model_roles_put_the_programmer_on_another_model():
    method = get_method("chatdev")(review_cycles=1)
    roles = method.check_model_roles({"programmer": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: script(fail_runs=1)), model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records] == [
        ("programmer", "scripted:b"),
        ("reviewer", "scripted:a"),
        ("programmer", "scripted:b"),
        ("tester", "scripted:a"),
        ("programmer", "scripted:b"),
    ]
    with pytest.raises(ConfigError, match="no role or agent"):
        method.check_model_roles({"ceo": "scripted:b"})


@pytest.mark.system
def test_the_command_line_runs_chatdev_on_humaneval_end_to_end(tmp_path):
    # echo: the programmer echoes the request, whose code block is the stub (its doctests
    # fail); the reviewer echoes its prompt, which names the marker: it finishes at once
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "chatdev", "--benchmark", "humaneval", "--model", "scripted:echo",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 1 + 1 + 6 for r in results)
    assert not any(r["score"]["correct"] for r in results)
    assert {r["task_id"]: r["metadata"]["test_results"] for r in results} == {
        "HumanEval/0": [[0, 2]] * 4,  # the docstring's two examples, run in the sandbox
        "HumanEval/1": [[0, 1]] * 4,
    }
    reviewer = tmp_path / "reviewer.yaml"
    reviewer.write_text(json.dumps({".": "The function body is missing."}))
    mixed = tmp_path / "mixed"
    code = main(
        ["run", "--method", "chatdev", "--benchmark", "humaneval", "--model", "scripted:echo",
         "--model-role", f"reviewer=scripted:{reviewer}", "--config", "test_cycles=1",
         "--limit", "1", "--out", str(mixed), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    trace = json.loads((mixed / "traces.jsonl").read_text().splitlines()[0])
    assert [(c["agent"], c["model"]) for c in trace["calls"]] == [
        ("programmer", "scripted:echo"),
        *[("reviewer", f"scripted:{reviewer}"), ("programmer", "scripted:echo")] * 3,
        ("tester", "scripted:echo"),
        ("programmer", "scripted:echo"),
    ]
