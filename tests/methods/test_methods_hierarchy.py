"""Structural tests of the hierarchy methods (conductor, planner_executor) with scripted models."""

from __future__ import annotations

import json
import random

import pytest
from helpers import TASK, prompts_of

from maslab.cli import main
from maslab.core.context import Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel
from maslab.methods import conductor, planner_executor  # noqa: F401

# -- conductor ---------------------------------------------------------------------------------

ROLES = {
    "planner": "You lead a small team",
    "analyst": "meticulous analyst",
    "coder": "Python programmer",
}


class Team:
    """A scripted model answering each role (told apart by its system prompt) from its own list."""

    def __init__(self, **answers):
        self.queues = {role: list(answers.get(role, [])) for role in ROLES}
        self.model = ScriptedModel(self.respond)

    def respond(self, request):
        system = request.messages[0]["content"]
        role = next(r for r, marker in ROLES.items() if marker in system)
        return self.queues[role].pop(0)

    def consumed(self):
        return all(not queue for queue in self.queues.values())


def action(name, plan=None, **arguments):
    body = {"thought": f"next: {name}", "action": name, "arguments": arguments}
    if plan is not None:
        body["plan"] = [{"step": step, "status": status} for step, status in plan]
    return json.dumps(body)


def final(answer, plan=None):
    return action("final_answer", plan, answer=answer)


@pytest.mark.system
async def test_conductor_scripted_scenario_makes_the_exact_calls_and_routes_every_message():
    team = Team(
        planner=[
            action(
                "analyst",
                [("analyse", "in_progress"), ("compute", "not_started")],
                task="Explain how to compute six times seven.",
            ),
            action(
                "coder",
                [("analyse", "completed"), ("compute", "in_progress")],
                task="Compute 6 * 7 in Python.",
            ),
            final("The answer is 42.", [("analyse", "completed"), ("compute", "completed")]),
        ],
        analyst=["ANALYST-REPORT: multiply six by seven."],
        coder=["```python\nprint(6 * 7)\n```", "Again:\n```python\nprint(7 * 6)\n```", "CODER-42"],
    )
    ctx = Context(team.model)
    solution = await get_method("conductor")().solve(TASK, ctx)

    # planner 3 + analyst 1 + coder 3 (code, code, report); the bound is 20 + 1 + 3 + 1
    assert len(team.model.calls) == ctx.usage.calls == 7
    assert team.consumed()
    assert solution.answer == "The answer is 42."
    assert solution.metadata["finish"] == "final_answer"
    assert solution.metadata["plan"] == [
        {"step": "analyse", "status": "completed"},
        {"step": "compute", "status": "completed"},
    ]
    assert [t["action"] for t in solution.metadata["trace"]] == ["analyst", "coder", "final_answer"]
    calls = [(r.agent, r.round) for r in ctx.ledger.records]
    assert calls == [
        ("planner", 0),
        ("analyst", 0),
        ("planner", 1),
        ("coder", 1),
        ("coder", 1),
        ("coder", 1),
        ("planner", 2),
    ]

    # the planner sees the task and the observations; each sub-agent only the task it was given
    planner = prompts_of(ctx, "planner")
    assert TASK.question in planner[0]
    assert "Observation from analyst:\nANALYST-REPORT" in planner[1]
    assert "Observation from coder:\nCODER-42" in planner[2]
    (analyst_request,) = [r.messages for r in ctx.ledger.records if r.agent == "analyst"]
    assert [m["role"] for m in analyst_request] == ["system", "user"]
    assert "Explain how to compute six times seven." in analyst_request[1]["content"]
    assert TASK.question not in analyst_request[1]["content"]
    coder = prompts_of(ctx, "coder")
    assert (
        "Compute 6 * 7 in Python." in coder[0]
        and "Replies allowed, the report included: 3." in coder[0]
    )
    assert "status: ok\nstdout:\n42" in coder[1] and "ANALYST" not in coder[1]
    assert "status: ok\nstdout:\n42" in coder[2] and "your last" in coder[2]

    observations = [(m.sender, m.recipients) for m in ctx.transcript.filter(kind="observation")]
    assert observations == [
        ("analyst", ("planner",)),
        ("python", ("coder",)),
        ("python", ("coder",)),
        ("coder", ("planner",)),
    ]
    assert ctx.topology is not None
    assert set(ctx.topology.edges) == {
        ("planner", "analyst"),
        ("analyst", "planner"),
        ("planner", "coder"),
        ("coder", "planner"),
    }


@pytest.mark.parametrize("steps", [1, 3])
async def test_conductor_forces_a_final_answer_at_the_step_cap_within_the_bound(steps):
    team = Team(
        planner=[action("analyst", task=f"Think, round {i}.") for i in range(steps)]
        + ["I am out of steps. The answer is 42."],
        analyst=[f"report {i}" for i in range(steps)],
    )
    ctx = Context(team.model)
    solution = await get_method("conductor")(planner_steps=steps).solve(TASK, ctx)
    # every planner step delegated to the analyst (cap 1): S_p + S_p + 1, the bound, exactly
    assert len(team.model.calls) == steps + steps + 1
    assert team.consumed()
    assert solution.answer == "I am out of steps. The answer is 42."
    assert solution.metadata["finish"] == "forced"
    assert ctx.ledger.records[-1].agent == "planner"
    assert "used all your steps" in prompts_of(ctx, "planner")[-1]


@pytest.mark.parametrize("seed", range(8))
async def test_conductor_calls_stay_within_the_bound_whatever_the_planner_does(seed):
    rng = random.Random(seed)
    moves = [action("analyst", task="a"), action("coder", task="c"), "junk", action("web", q=1)]
    team = Team(
        planner=[rng.choice(moves) for _ in range(6)] + ["The answer is 42."],
        analyst=["report"] * 6,
        coder=["no code needed"] * 6,
    )
    ctx = Context(team.model)
    config = {"planner_steps": 5, "coder_steps": 4}
    solution = await get_method("conductor")(**config).solve(TASK, ctx)
    caps = {"analyst": 1, "coder": config["coder_steps"]}
    delegated = [t["action"] for t in solution.metadata["trace"] if t["action"] in caps]
    bound = config["planner_steps"] + sum(caps[name] for name in delegated) + 1
    assert len(team.model.calls) <= bound
    assert len(solution.metadata["trace"]) <= config["planner_steps"]


async def test_a_forced_answer_written_as_final_answer_json_is_unwrapped():
    team = Team(planner=[action("analyst", task="x"), final("42")], analyst=["r"])
    solution = await get_method("conductor")(planner_steps=1).solve(TASK, Context(team.model))
    assert solution.answer == "42"
    assert solution.metadata["finish"] == "forced"


@pytest.mark.system
async def test_the_coder_stops_at_its_cap_and_reports_its_last_output():
    team = Team(
        planner=[action("coder", task="Print 42."), final("42")],
        coder=["```python\nprint(41)\n```", "```py\nprint(42)\n```"],
    )
    ctx = Context(team.model)
    solution = await get_method("conductor")(coder_steps=2).solve(TASK, ctx)
    assert len(team.model.calls) == 1 + 2 + 1
    assert solution.answer == "42"
    assert "your last" in prompts_of(ctx, "coder")[1]
    report = prompts_of(ctx, "planner")[1]
    assert "```py\nprint(42)\n```\n\nOutput of the last program:\nstatus: ok\nstdout:\n42" in report


@pytest.mark.parametrize(
    ("status", "kept"),
    [
        ("done", "completed"),
        ("Done", "completed"),
        ("complete", "completed"),
        ("finished", "completed"),
        ("In Progress", "in_progress"),
        ("to-do", "not_started"),
        ("failed", "blocked"),
        ("checked twice", "checked twice"),  # unknown: kept as written
    ],
)
async def test_a_final_answer_survives_any_plan_status(status, kept):
    team = Team(planner=[final("42", [("compute", status)])])
    solution = await get_method("conductor")().solve(TASK, Context(team.model))
    assert len(team.model.calls) == 1 and solution.metadata["finish"] == "final_answer"
    assert solution.answer == "42"
    assert solution.metadata["plan"] == [{"step": "compute", "status": kept}]


async def test_an_unreadable_plan_keeps_the_previous_one_and_the_action():
    unreadable = json.dumps({"plan": "first compute, then answer", "action": "final_answer"})
    team = Team(
        planner=[
            action("analyst", [("compute", "in_progress")], task="x"),
            unreadable[:-1] + ', "arguments": {"answer": "42"}}',
        ],
        analyst=["r"],
    )
    solution = await get_method("conductor")().solve(TASK, Context(team.model))
    assert len(team.model.calls) == 3 and solution.answer == "42"
    assert solution.metadata["plan"] == [{"step": "compute", "status": "in_progress"}]


async def test_a_malformed_action_gets_one_corrective_retry_that_counts_as_a_step():
    team = Team(planner=["Let me think about it.", final("42")])
    ctx = Context(team.model)
    solution = await get_method("conductor")().solve(TASK, ctx)
    assert len(team.model.calls) == 2
    assert solution.answer == "42"
    assert "not a valid action" in prompts_of(ctx, "planner")[1]
    assert [t["action"] for t in solution.metadata["trace"]] == [None, "final_answer"]


async def test_two_malformed_actions_in_a_row_force_the_final_answer():
    bad = ["no json", action("final_answer", note="no answer field")]
    team = Team(planner=[*bad, "The answer is 42."])
    ctx = Context(team.model)
    solution = await get_method("conductor")().solve(TASK, ctx)
    assert len(team.model.calls) == 3
    assert solution.answer == "The answer is 42."
    assert solution.metadata["finish"] == "forced"
    assert solution.metadata["trace"] == [{"step": 0, "action": None}, {"step": 1, "action": None}]


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        (14, "14"),
        (2.5, "2.5"),
        (True, "true"),
        ({"x": 1}, '{"x": 1}'),
        ([14], "14"),
        (["3", 4], "3, 4"),
        ([[1, 2], 3], "1, 2, 3"),
    ],
)
async def test_a_final_answer_that_is_no_string_is_written_out_as_text(answer, text):
    team = Team(planner=[final(answer)])
    solution = await get_method("conductor")().solve(TASK, Context(team.model))
    assert solution.answer == text and solution.metadata["finish"] == "final_answer"


@pytest.mark.parametrize("nothing", [None, [], [None]])
async def test_a_null_final_answer_is_no_answer_and_gets_the_corrective_retry(nothing):
    team = Team(planner=[final(nothing), final("42")])
    ctx = Context(team.model)
    solution = await get_method("conductor")().solve(TASK, ctx)
    assert len(team.model.calls) == 2 and solution.answer == "42"
    assert "not a valid action" in prompts_of(ctx, "planner")[1]
    assert [t["action"] for t in solution.metadata["trace"]] == [None, "final_answer"]


async def test_every_action_prompt_ends_with_the_actions_shape_and_the_forced_one_does_not():
    team = Team(planner=["junk", action("analyst", task="x"), "junk", "42"], analyst=["r"])
    ctx = Context(team.model)
    await get_method("conductor")(planner_steps=3).solve(TASK, ctx)
    shape = (
        'Reply with a JSON object only: {"thought": "<what you know and what to do next>", '
        '"plan": [{"step": "<a step>", "status": "not_started" or "in_progress" or "completed" '
        'or "blocked"}, ...], "action": "analyst" or "coder" or "final_answer", "arguments": '
        '{"task": "<a complete, self-contained task>"} or {"task": "<a complete, self-contained '
        'task>"} or {"answer": "..."}}.'
    )
    *actions, forced = prompts_of(ctx, "planner")
    assert len(actions) == 3 and all(p.endswith(f"\n\n{shape}") for p in actions)
    assert "used all your steps" in forced and "JSON" not in forced
    assert "JSON" not in ctx.ledger.records[0].messages[0]["content"]  # not in the system prompt


async def test_a_malformed_step_only_resets_after_a_valid_one():
    team = Team(
        planner=["junk", action("analyst", task="x"), "junk again", final("42")], analyst=["r"]
    )
    solution = await get_method("conductor")().solve(TASK, Context(team.model))
    assert solution.answer == "42"
    assert len(team.model.calls) == 5


async def test_unknown_members_and_bad_arguments_are_observations_without_model_calls():
    team = Team(
        planner=[
            action("browser", task="search the web"),
            action("analyst", question="wrong argument name"),
            final("42"),
        ]
    )
    ctx = Context(team.model)
    await get_method("conductor")().solve(TASK, ctx)
    assert len(team.model.calls) == 3
    planner = prompts_of(ctx, "planner")
    assert "error: unknown tool 'browser'; available: analyst, coder" in planner[1]
    assert "error: bad arguments for analyst: task: Field required" in planner[2]


async def test_extra_tools_are_offered_to_the_planner_and_run_without_model_calls():
    team = Team(planner=[action("multiply", a=6, b=7), final("42")])
    ctx = Context(team.model)
    await get_method("conductor")(tools=["multiply"]).solve(TASK, ctx)
    assert len(team.model.calls) == 2
    system = ctx.ledger.records[0].messages[0]["content"]
    assert "- multiply(a: number, b: number)" in system and "- coder(task: string)" in system
    assert "Observation from multiply:\n42" in prompts_of(ctx, "planner")[1]
    assert "multiply" in ctx.topology.nodes


def test_conductor_config_rejects_unknown_tools():
    with pytest.raises(ConfigError, match="unknown tools 'web_search'"):
        get_method("conductor")(tools=["web_search"])


async def test_a_model_role_puts_a_sub_agent_on_its_own_model():
    team = Team(planner=[action("analyst", task="Think hard."), final("42")])
    ctx = Context(team.model, model_roles={"analyst": "scripted:echo"})
    await get_method("conductor")().solve(TASK, ctx)
    assert len(team.model.calls) == 2  # the planner's; the analyst ran on the echo model
    (record,) = [r for r in ctx.ledger.records if r.agent == "analyst"]
    assert "Think hard." in record.response


# -- end to end ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["conductor", "planner_executor"])
def test_maslab_run_end_to_end(method, tmp_path):
    out = tmp_path / "run"
    argv = ["run", "--method", method, "--benchmark", "arith", "--limit", "2"]
    argv += ["--model", "scripted:echo", "--no-cache", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
