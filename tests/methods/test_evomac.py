"""EvoMAC with scripted models: the team's validation, the codebase merge, the call formula (pass
at once, after e evolution rounds, never), who sees what, budget stops, garbage replies, model
roles and the command line. The unit tests run real (tiny) programs in the sandbox."""

from __future__ import annotations

import itertools
import json

import pytest
from helpers import TwoModels, prompts_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.methods.evomac import (
    FIRST_SUBTASK,
    FIX_SUBTASK,
    EvoMAC,
    Subtask,
    TeamReply,
    merge_programs,
    read_team,
)

TASK = Task(
    id="c1",
    question="Write a function add(a, b) that returns the sum of a and b.\n>>> add(1, 1)\n2",
    gold="def add(a, b):\n    return a + b",
    tests=("assert add(2, 2) == 4  # GOLD TEST",),
    answer_type="code",
    instruction="Give your final answer in a single ```python code block.",
)
TESTS = "```python\nassert add(1, 2) == 3\nassert add(0, 0) == 0\nassert double(2) == 4\n```"
ALL_TESTS = ["assert add(1, 1) == 2", "assert add(1, 2) == 3", "assert add(0, 0) == 0",
             "assert double(2) == 4"]  # fmt: skip
HELPER = "def double(x):\n    return 2 * x"
WRONG = "def add(a, b):\n    return a - b"  # passes 2 of the 4 tests (with double)
WORSE = "def add(a, b):\n    return None"  # passes 1 of 4
RIGHT = "def add(a, b):\n    return a + b"


def block(code: str) -> str:
    return f"Here you go:\n```python\n{code}\n```"


def team(*subtasks: tuple[str, str, list[str]]) -> str:
    items = [{"id": i, "description": d, "depends_on": deps} for i, d, deps in subtasks]
    return json.dumps({"subtasks": items})


FIRST_TEAM = team(("helper", "write double(x)", []), ("main", "write add(a, b)", ["helper"]))


def is_organize(prompt: str) -> bool:
    return prompt.startswith("You lead") and "It was run against unit tests" not in prompt


def is_evolve(prompt: str) -> bool:
    return prompt.startswith("You lead") and "It was run against unit tests" in prompt


def is_tester(prompt: str) -> bool:
    return prompt.startswith("Here is a programming task")


def subtask_of(prompt: str) -> str:
    return prompt.split("Your sub-task:\n", 1)[1].split("\n\n", 1)[0]


def script(fixes: list[str], first_team: str = FIRST_TEAM, fix_size: int = 1):
    """The organiser's first team (helper, then main); every evolution team: ``fix_size`` fix
    sub-tasks 'fix-e.j' quoting the report's first failing assert. Programmers: helper writes
    double, main writes add wrongly (whole program), fix j of round e (from 0, 1) writes
    ``fixes[(e - 1) * fix_size + j]`` (add alone: the merge keeps double)."""
    rounds = itertools.count(1)

    def respond(request) -> str:
        prompt = last_user_message(request)
        if is_tester(prompt):
            return TESTS
        if is_organize(prompt):
            return first_team
        if is_evolve(prompt):
            e = next(rounds)
            failing = prompt.split("Failed:\n", 1)[1].split("  #")[0]
            return team(
                *((f"fix-{e}.{j}", f"{e}.{j}: make `{failing}` hold", []) for j in range(fix_size))
            )
        sub = subtask_of(prompt)
        if sub == "write double(x)":
            return block(HELPER)
        if sub == "write add(a, b)":
            return block(f"{HELPER}\n\n\n{WRONG}")
        if sub == "write add right":
            return block(RIGHT)
        e, j = map(int, sub.split(":")[0].split("."))
        return block(fixes[(e - 1) * fix_size + j])

    return respond


# --- the team: validation ------------------------------------------------------------------------


def test_the_defaults_are_five_iterations_and_at_most_five_subtasks():
    config = EvoMAC().config
    assert (config.iterations, config.max_subtasks, config.max_tests) == (5, 5, 4)
    assert EvoMAC().agent_names() == tuple(f"programmer_{i}" for i in range(1, 6))


def test_read_team_drops_unknown_and_self_dependencies_and_breaks_cycles_in_order():
    reply = "Plan:\n" + team(
        ("a", "first", ["b", "zzz"]),  # b is kept: a -> b closes nothing yet
        ("b", "second", ["a", "c"]),  # a would close the cycle a -> b -> a: dropped
        ("c", "third", ["c", "a", "a"]),  # itself and the repeat dropped
    )
    subtasks, parsed = read_team(reply, 5, FIRST_SUBTASK)
    assert parsed
    assert subtasks == [
        Subtask("a", "first", ("b",)),
        Subtask("b", "second", ("c",)),
        Subtask("c", "third", ()),  # a would close c -> b -> a -> c
    ]


def test_read_team_breaks_a_longer_cycle_at_the_dependency_that_closes_it():
    reply = team(("x", "1", ["z"]), ("y", "2", ["x"]), ("z", "3", ["y"]))  # z -> x -> y -> z
    subtasks, _ = read_team(reply, 5, FIRST_SUBTASK)
    assert [s.depends_on for s in subtasks] == [("z",), ("x",), ()]


def test_read_team_drops_empty_and_repeated_subtasks_cuts_to_the_limit_and_reads_int_ids():
    reply = json.dumps({"subtasks": [
        {"id": 1, "description": "one"},
        {"id": 2, "description": "  "},
        {"id": "1", "description": "again"},
        {"description": "no id", "depends_on": 1},
        {"id": 5, "description": "five", "depends_on": [1, True, None, {"x": 1}]},
        {"id": 6, "description": "six"},
    ]})  # fmt: skip
    subtasks, _ = read_team(reply, 3, FIRST_SUBTASK)
    assert subtasks == [Subtask("1", "one", ()), Subtask("4", "no id", ("1",)),
                        Subtask("5", "five", ("1",))]  # fmt: skip


@pytest.mark.parametrize(
    "reply", ["no JSON at all", "[1, 2]", '{"subtasks": []}', '{"subtasks": "x"}', ""]
)
def test_a_reply_without_subtasks_becomes_one_fallback_subtask(reply):
    subtasks, parsed = read_team(reply, 5, FIX_SUBTASK)
    assert subtasks == [Subtask("1", FIX_SUBTASK, ())]
    assert parsed == (reply == '{"subtasks": []}')


# --- the shared codebase: merging a layer --------------------------------------------------------


def test_a_layer_merges_added_and_changed_definitions_in_subtask_order():
    base = "import math\n\n\ndef f():\n    return 0\n\n\ndef g():\n    return 0"
    first = "import math\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 0"  # changes f
    second = (  # leaves f as in base (must not undo the first's change), changes g, adds h
        "import os\nimport math\n\n\ndef f():\n    return 0\n\n\ndef g():\n    return 2\n\n\n"
        "@staticmethod\ndef h():\n    return 3\n\nLIMIT = 4"
    )
    merged = merge_programs(base, [first, None, second])
    assert merged == (
        "import math\nimport os\n\ndef f():\n    return 1\n\ndef g():\n    return 2\n\n"
        "@staticmethod\ndef h():\n    return 3\n\nLIMIT = 4"
    )
    # both change f: the later sub-task wins
    third = base.replace("return 0", "return 9", 1)
    assert "return 9" in merge_programs(base, [first, third])
    assert "return 1" not in merge_programs(base, [first, third])


def test_a_program_that_does_not_parse_replaces_the_codebase_whole():
    assert merge_programs("def f():\n    return 1", ["def f(:\n"]) == "def f(:\n"
    assert merge_programs("def f(:\n", ["def g():\n    return 2"]) == "def g():\n    return 2"
    assert merge_programs("def f():\n    return 1", [None, None]) == "def f():\n    return 1"
    assert merge_programs("", [HELPER]) == HELPER


# --- the call formula and who sees what -----------------------------------------------------------


@pytest.mark.system
async def test_a_layer_runs_concurrently_on_one_codebase_and_its_programs_are_merged():
    parallel = team(("a", "write add right", []), ("h", "write double(x)", []))
    model = ScriptedModel(script([], first_team=parallel), latency=0.05)
    ctx = Context(model)
    solution = await EvoMAC().solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == 1 + 2 + 1
    for name in ("programmer_1", "programmer_2"):  # both see the empty codebase
        assert "(empty: nothing has been written yet)" in prompts_of(ctx, name)[0]
    programmers = [c for c in model.calls if "Your sub-task" in last_user_message(c.request)]
    assert programmers[0].started < programmers[1].finished  # one layer: concurrent
    assert programmers[1].started < programmers[0].finished
    assert solution.answer == f"```python\n{RIGHT}\n\n{HELPER}\n```"  # in sub-task order
    assert solution.metadata["passed"] is True and solution.metadata["test_results"] == [(4, 4)]


@pytest.mark.system
@pytest.mark.parametrize("e", [0, 1, 2, 4])
async def test_a_codebase_that_passes_after_e_rounds_costs_the_formula(e):
    fixes = [WRONG] * (e - 1) + [RIGHT] if e else []
    right_at_once = team(("helper", "write double(x)", []), ("main", "write add right", ["helper"]))
    model = ScriptedModel(script(fixes, first_team=FIRST_TEAM if e else right_at_once))
    ctx = Context(model)
    solution = await EvoMAC().solve(TASK, ctx)
    # (organiser + n_0 = 2 sub-tasks + tester) + e rounds of (organiser + n_e = 1 sub-task)
    assert len(model.calls) == ctx.usage.calls == (1 + 2 + 1) + e * (1 + 1)
    assert solution.metadata["passed"] is True and solution.metadata["rounds"] == e + 1
    assert solution.metadata["tests"] == ALL_TESTS
    assert solution.metadata["test_results"][-1] == (4, 4)
    assert "return a + b" in solution.answer and "return 2 * x" in solution.answer
    assert solution.answer.startswith("```python\n") and solution.answer.endswith("\n```")


@pytest.mark.system
async def test_team_sizes_enter_the_formula_and_layers_see_earlier_layers_code():
    model = ScriptedModel(script([WORSE, WRONG, RIGHT], fix_size=3))
    ctx = Context(model)
    solution = await EvoMAC().solve(TASK, ctx)
    # first team 2 sub-tasks; one evolution round with a team of 3 in one layer: fix 2 leaves
    # add as it was (no edit), fix 3 (RIGHT) wins the conflict with fix 1 (WORSE)
    assert len(model.calls) == (1 + 2 + 1) + (1 + 3)
    assert solution.metadata["passed"] is True
    assert solution.metadata["teams"][1] == [
        {"id": f"fix-1.{j}", "depends_on": []} for j in range(3)
    ]
    helper, main_ = prompts_of(ctx, "programmer_1")[0], prompts_of(ctx, "programmer_2")[0]
    assert "(empty: nothing has been written yet)" in helper
    assert "return 2 * x" in main_ and "write add(a, b)" in main_  # after the helper's layer
    assert "write double(x)" not in main_  # its own sub-task only
    for name in ("programmer_1", "programmer_2", "programmer_3"):
        fix = prompts_of(ctx, name)[-1]
        assert "return a - b" in fix and "return 2 * x" in fix  # the codebase after round 0
        assert "unit tests passed" not in fix  # the report reaches them through the organiser


@pytest.mark.system
async def test_who_sees_what_the_organiser_reads_the_report_and_nobody_the_hidden_tests():
    model = ScriptedModel(script([WRONG, RIGHT]))
    ctx = Context(model)
    await EvoMAC().solve(TASK, ctx)
    tester = prompts_of(ctx, "tester")
    assert len(tester) == 1 and TASK.prompt() in tester[0] and "2 * x" not in tester[0]
    organizer = prompts_of(ctx, "organizer")
    assert len(organizer) == 3 and "2 * x" not in organizer[0]  # no codebase yet
    assert "2 of 4 unit tests passed." in organizer[1] and "return a - b" in organizer[1]
    assert "assert add(1, 2) == 3  # returned -1" in organizer[1]
    # the fix sub-task quotes the failing assert; its programmer reads it
    assert "1.0: make `assert add(1, 1) == 2` hold" in prompts_of(ctx, "programmer_1")[1]
    for record in ctx.ledger.records:
        assert "GOLD" not in json.dumps(record.messages) and len(record.messages) == 1
    results = [m.content.splitlines()[0] for m in ctx.transcript if m.kind == "test_results"]
    assert results == [f"{k} of 4 unit tests passed." for k in (2, 2, 4)]
    assert {"organizer", "tester", "programmer_1", "programmer_2"} <= set(ctx.topology.nodes)
    assert ("programmer_1", "programmer_2") in ctx.topology.edges
    assert ("tester", "organizer") in ctx.topology.edges


@pytest.mark.system
async def test_a_codebase_that_never_passes_stops_after_I_workflows_with_the_best_code():
    model = ScriptedModel(script([WORSE] * 4))
    ctx = Context(model)
    solution = await EvoMAC(iterations=3).solve(TASK, ctx)
    assert len(model.calls) == (1 + 2 + 1) + 2 * (1 + 1)
    assert solution.metadata["test_results"] == [(2, 4), (1, 4), (1, 4)]
    assert solution.metadata["passed"] is False
    assert "return a - b" in solution.answer  # round 0 passed the most tests
    solution = await EvoMAC(iterations=1).solve(TASK, Context(ScriptedModel(script([]))))
    assert solution.metadata["rounds"] == 1 and "return a - b" in solution.answer


@pytest.mark.system
async def test_the_most_calls_are_full_teams_in_every_one_of_the_I_workflows():
    full = team(*((f"p{j}", f"1.{j}: write", []) for j in range(7)))  # cut to K = 5
    model = ScriptedModel(script([WORSE] * 28, first_team=full, fix_size=7))
    solution = await EvoMAC().solve(TASK, Context(model))
    assert len(model.calls) == (1 + 5 + 1) + 4 * (1 + 5) == 31
    assert [len(t) for t in solution.metadata["teams"]] == [5] * 5


@pytest.mark.system
async def test_ties_go_to_the_later_codebase():
    tie = "def add(a, b):\n    return a * b"  # 2 of 4 as well
    solution = await EvoMAC(iterations=2).solve(TASK, Context(ScriptedModel(script([tie]))))
    assert solution.metadata["test_results"] == [(2, 4), (2, 4)] and "a * b" in solution.answer


@pytest.mark.system
async def test_a_budget_stop_returns_the_best_code_so_far():
    # calls: organiser + tester (1-2), helper (3), main (4), tests, evolve (5), fix WORSE (6),
    # tests, evolve (7), fix RIGHT (8)
    cases = {2: None, 3: HELPER, 4: WRONG, 6: WRONG, 8: RIGHT}
    for calls, expected in cases.items():
        model = ScriptedModel(script([WORSE, RIGHT]))
        ctx = Context(model, budget=Budget(max_calls=calls))
        solution = await EvoMAC().run_sample(TASK, ctx)
        assert ctx.usage.calls == calls
        assert ("budget" in solution.metadata) == (calls < 8)
        if expected is None:
            assert solution.answer == ""
        else:
            assert expected in solution.answer and (
                expected != WRONG or WORSE not in solution.answer
            )


async def test_garbage_replies_never_crash():
    replies = {"^You lead": "I would rather not.", "^Here is a programming task": "no tests",
               "": "no code either"}  # fmt: skip
    model = ScriptedModel(replies)
    ctx = Context(model)
    solution = await EvoMAC(iterations=2).solve(TASK, ctx)
    assert len(model.calls) == (1 + 1 + 1) + (1 + 1)  # one fallback sub-task per team
    assert solution.metadata["parsed"] == [False, False]
    assert solution.metadata["tests"] == ["assert add(1, 1) == 2"]  # the prompt's example
    assert solution.metadata["test_results"] == [(0, 1), (0, 1)]
    assert FIRST_SUBTASK in prompts_of(ctx, "programmer_1")[0]
    assert FIX_SUBTASK in prompts_of(ctx, "programmer_1")[1]
    assert "No Python code was found" in prompts_of(ctx, "organizer")[1]


@pytest.mark.system
@pytest.mark.parametrize("native", [True, False])
async def test_the_team_schema_is_sent_natively_where_supported(native):
    model = ScriptedModel(script([RIGHT]), native=["structured_output"] if native else [])
    await EvoMAC().solve(TASK, Context(model))
    formats = [(is_organize(last_user_message(r)) or is_evolve(last_user_message(r)),
                r.response_format) for r in model.requests]  # fmt: skip
    organizer = [f for team_call, f in formats if team_call]
    assert len(organizer) == 2 and len(formats) == 6
    if native:
        assert all(f["json_schema"]["schema"] == TeamReply.json_schema() for f in organizer)
    else:
        assert organizer == [None, None]
    assert all(f is None for team_call, f in formats if not team_call)
    shape = f"sub-tasks.\n\n{TeamReply.instructions()}"
    team_prompts = [p for p in map(last_user_message, model.requests) if p.startswith("You lead")]
    assert len(team_prompts) == 2 and all(p.endswith(shape) for p in team_prompts)


@pytest.mark.system
async def test_model_roles_put_the_organiser_and_one_programmer_on_another_model():
    method = get_method("evomac")()
    roles = method.check_model_roles({"organizer": "scripted:b", "programmer_2": "scripted:b"})
    ctx = Context("scripted:a", models=TwoModels(lambda: script([RIGHT])), model_roles=roles)
    await method.solve(TASK, ctx)
    assert sorted({(r.agent, r.model) for r in ctx.ledger.records}) == [
        ("organizer", "scripted:b"),
        ("programmer_1", "scripted:a"),
        ("programmer_2", "scripted:b"),
        ("tester", "scripted:a"),
    ]


@pytest.mark.system
def test_the_command_line_runs_evomac_on_humaneval(tmp_path):
    script_file = tmp_path / "team.json"
    script_file.write_text(json.dumps({
        "^You lead": team(("1", "write it", [])),
        "^Here is a programming task": "```python\nassert 1 == 1\n```",
        "^You are a programmer": "```python\ndef nothing():\n    return None\n```",
    }))  # fmt: skip
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "evomac", "--benchmark", "humaneval", "--model",
         f"scripted:{script_file}", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # the prompts' doctests fail the placeholder code: all 5 workflows run, 3 + 4·2 calls
    assert len(results) == 2 and all(r["usage"]["calls"] == 11 for r in results)
    assert not any(r["score"]["correct"] for r in results)
