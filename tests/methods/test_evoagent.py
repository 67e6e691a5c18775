"""EvoAgent (arXiv 2406.14228) with scripted models: the call formula, who sees what (parents,
plan, team, candidates, retained answers), selection, garbage replies, budget stops, completion
order, model roles and the command line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from helpers import TASK, TwoModels, agent_of, method_runner

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.kit.prompts import cot_prompt
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.evoagent import (
    DEFAULT_SEED_ROLE,
    Brood,
    Check,
    EvoAgent,
    Profile,
    read_brood,
    read_check,
)

PARENT = re.compile(r"--- Parent \d+: (.+?) ---")
EXPERT = re.compile(r"^--- (E\d+\.\d+) \(", re.M)
CANDIDATE = re.compile(r"The candidate:\nE(\d+)\.(\d+):")
PLAN = re.compile(r"^- Expert \d+: (.*)$", re.M)
ROLE = re.compile(r"ROLE-(\d+)-(\d+)")

run = method_runner(EvoAgent, TASK)

Rule = Callable[[int, int], bool]


def generation_of(names: list[str]) -> int:
    """The latest generation among the expert names ``names`` (E<t>.<i>)."""
    return max(int(n[1:].split(".")[0]) for n in names)


def role(t: int, i: int) -> str:
    return f"You are expert {t}.{i}, ROLE-{t}-{i}."


def profiles(t: int, n: int) -> str:
    children = [{"name": f"E{t}.{i}", "role": role(t, i)} for i in range(1, n + 1)]
    return json.dumps({"children": children})


def script(
    retain: Rule = lambda t, i: True,
    answer: Callable[[int, int], int] = lambda t, i: 42,
    brood: Callable[[int, int], str] = profiles,
) -> Callable[[ChatRequest], str]:
    """The seed answers 41 and each update t says 'UPDATE-t: ... 42'; the breeder's t-th call
    writes ``brood(t, n)`` (children E<t>.<i> with role ROLE-t-i); the checker retains child
    (t, i) when ``retain(t, i)``; child (t, i) answers ``answer(t, i)``."""
    bred = 0

    def respond(request: ChatRequest) -> str:
        nonlocal bred
        agent, prompt = agent_of(request), last_user_message(request)
        if agent == "breeder":  # one call a generation, one after the other
            bred += 1
            return brood(bred, len(PLAN.findall(prompt)))
        if agent == "checker":
            ((t, i),) = CANDIDATE.findall(prompt)
            return json.dumps({"reason": "CHECK-NOTE", "retain": retain(int(t), int(i))})
        if agent.startswith("child_"):
            t, i = map(int, ROLE.findall(request.messages[0]["content"])[0])
            return f"E{t}.{i} works it out: The answer is {answer(t, i)}."
        if prompt == cot_prompt(TASK):
            return "SEED: The answer is 41."
        return f"UPDATE-{generation_of(EXPERT.findall(prompt))}: The answer is 42."

    return respond


def expected_calls(generations: int, population: int, retain: Rule) -> int:
    total = 1
    for t in range(1, generations + 1):
        kept = sum(retain(t, i) for i in range(1, population + 1))
        total += 1 + population + kept + (kept > 0)
    return total


def draws(seed: int, parents: list[int], population: int) -> list[list[list[int]]]:
    """The plan of each generation as the sample's random stream draws it (parent indices),
    given the number of parents of each generation."""
    rng = Context("scripted:echo", seed=seed).rng
    return [[sorted(rng.sample(range(n), min(2, n))) for _ in range(population)] for n in parents]


def test_defaults_names_and_bad_configs():
    method = EvoAgent()
    assert get_method("evoagent") is EvoAgent
    cfg = method.config
    assert (cfg.generations, cfg.population, cfg.seed_role) == (3, 3, DEFAULT_SEED_ROLE)
    assert method.agent_names() == ("child_1", "child_2", "child_3")
    assert EvoAgent.roles == ("seed", "breeder", "checker", "child")
    for bad in ({"generations": 0}, {"population": 0}, {"seed_role": ""}, {"parents": 2}):
        with pytest.raises(ConfigError):
            EvoAgent(**bad)


@pytest.mark.parametrize(
    ("generations", "population", "retain", "total"),
    [
        (3, 3, lambda t, i: True, 25),  # the default: every child retained, 1 + 3·(2·3 + 2)
        (3, 3, lambda t, i: False, 13),  # none retained: 1 + 3·(1 + 3)
        (2, 4, lambda t, i: i % 2 == 1, 17),  # two of four: 1 + 2·(1 + 4 + 2 + 1)
        (1, 2, lambda t, i: i == 2, 1 + 5),
        (2, 1, lambda t, i: t == 2, 1 + 2 + 4),  # a generation without update, then one with
        (4, 2, lambda t, i: (t + i) % 3 == 0, 1 + 5 + 5 + 3 + 5),
    ],
)
async def test_the_calls_follow_the_formula(generations, population, retain, total):
    model = ScriptedModel(script(retain))
    solution, ctx = await run(model, generations=generations, population=population)
    assert len(model.calls) == ctx.usage.calls == expected_calls(generations, population, retain)
    assert expected_calls(generations, population, retain) == total
    assert 1 + generations <= total <= 1 + generations * (2 * population + 2)
    agents = [r.agent for r in ctx.ledger.records]
    assert agents.count("breeder") == generations
    assert agents.count("checker") == generations * population
    for i in range(1, population + 1):
        kept = [t for t in range(1, generations + 1) if retain(t, i)]
        assert [r.round for r in ctx.ledger.records if r.agent == f"child_{i}"] == kept
    updates = [t for t in range(1, generations + 1)
               if any(retain(t, i) for i in range(1, population + 1))]  # fmt: skip
    assert [r.round for r in ctx.ledger.records if r.agent == "seed"] == [0, *updates]
    last = max(updates, default=0)
    expected = f"UPDATE-{last}: The answer is 42." if last else "SEED: The answer is 41."
    assert solution.answer == expected


async def test_the_default_is_25_calls_and_sets_the_declared_structure():
    model = ScriptedModel(script())
    solution, ctx = await run(model)
    assert len(model.calls) == 25
    assert ctx.topology.to_dict() == EvoAgent().structure().to_dict()
    assert solution.metadata["team"] == {
        "seed": "Seed agent",
        **{f"{t}.{i}": f"E{t}.{i}" for t in (1, 2, 3) for i in (1, 2, 3)},
    }
    assert solution.metadata["unreadable"] == {"profiles": 0, "checks": 0}


async def test_who_sees_what():
    retain = lambda t, i: i != 2  # noqa: E731
    model = ScriptedModel(script(retain))
    solution, ctx = await run(model, Context(model, seed=7), generations=2)
    records = ctx.ledger.records
    seed_answer = "SEED: The answer is 41."
    child_answer = "E{}.{} works it out: The answer is 42."

    # the seed answers alone, as its role; later it updates with the retained answers
    opening, *updates = [r for r in records if r.agent == "seed"]
    assert list(opening.messages) == [
        {"role": "system", "content": DEFAULT_SEED_ROLE},
        {"role": "user", "content": cot_prompt(TASK)},
    ]
    assert len(updates) == 2
    for t, update in enumerate(updates, start=1):
        prompt = update.messages[-1]["content"]
        current = seed_answer if t == 1 else "UPDATE-1: The answer is 42."
        assert f"Your current answer:\n{current}" in prompt
        assert EXPERT.findall(prompt) == [f"E{t}.1", f"E{t}.3"]  # retained only, slot order
        assert child_answer.format(t, 1) in prompt and child_answer.format(t, 3) in prompt
        assert f"E{t}.2" not in prompt and "CHECK-NOTE" not in prompt

    # the breeder: the generation's parents with their answers, the team, the drawn plan
    plans = draws(7, [1, 2], 3)
    first, second = [r.messages[-1]["content"] for r in records if r.agent == "breeder"]
    assert PARENT.findall(first) == ["Seed agent"] and seed_answer in first
    assert PLAN.findall(first) == ["mutate Parent 1"] * 3
    assert PARENT.findall(second) == ["E1.1", "E1.3"]  # generation 1's retained children
    assert child_answer.format(1, 1) in second and child_answer.format(1, 3) in second
    assert seed_answer not in second and "E1.2" not in second  # nor the discarded child
    assert f"- Seed agent: {DEFAULT_SEED_ROLE}" in second  # the team: the seed and the retained
    assert f"- E1.1: {role(1, 1)}\n- E1.3: {role(1, 3)}" in second
    assert PLAN.findall(second) == [
        "cross " + " with ".join(f"Parent {p + 1}" for p in picks) for picks in plans[1]
    ]
    assert second.endswith(Brood.instructions())

    # the checker: the team, the child's parents and the one candidate
    checks = [r.messages[-1]["content"] for r in records if r.agent == "checker"]
    assert len(checks) == 6
    for prompt in checks:
        ((t, i),) = CANDIDATE.findall(prompt)
        assert prompt.count("ROLE-") == (1 if t == "1" else 3)  # the team's and its own
        assert f"E{t}.{i}: {role(int(t), int(i))}" in prompt
        if t == "1":
            assert "bred from Seed agent." in prompt
        else:
            picked = " and ".join(["E1.1", "E1.3"][p] for p in plans[1][int(i) - 1])
            assert f"bred from {picked}." in prompt
        assert "works it out" not in prompt and prompt.endswith(Check.instructions())

    # each retained child: its role as system message and the question, nothing else
    for record in (r for r in records if r.agent.startswith("child_")):
        t, i = record.round, int(record.agent.rsplit("_", 1)[1])
        assert list(record.messages) == [
            {"role": "system", "content": role(t, i)},
            {"role": "user", "content": cot_prompt(TASK)},
        ]
    meta = solution.metadata["generations"]
    assert [c["status"] for c in meta[0]["children"]] == ["retained", "discarded", "retained"]
    assert meta[1]["parents"] == ["1.1", "1.3"]
    assert [c["parents"] for c in meta[1]["children"]] == [
        [["1.1", "1.3"][p] for p in picks] for picks in plans[1]
    ]


async def test_the_plan_is_drawn_from_the_samples_stream():
    seen = set()
    for seed in range(6):
        model = ScriptedModel(script())
        solution, _ = await run(model, Context(model, seed=seed), generations=3, population=3)
        plans = draws(seed, [1, 3, 3], 3)
        for t, generation in enumerate(solution.metadata["generations"]):
            parents = generation["parents"]
            assert [c["parents"] for c in generation["children"]] == [
                [parents[p] for p in picks] for picks in plans[t]
            ]
        seen.add(json.dumps(plans))
    assert len(seen) > 1


async def test_empty_and_repeated_profiles_are_discarded_without_a_check():
    def brood(t: int, n: int) -> str:
        if t > 1:
            return profiles(t, n)
        children = [
            {"name": "Copy", "role": f"  {DEFAULT_SEED_ROLE.upper()} "},  # the seed's own role
            {"name": "E1.2", "role": role(1, 2)},
            {"name": "Blank", "role": "  "},
            {"name": "Twin", "role": role(1, 2).replace(" ", "  ")},  # an earlier sibling's
        ]
        return json.dumps({"children": children})

    model = ScriptedModel(script(brood=brood))
    solution, ctx = await run(model, generations=2, population=4)
    statuses = [c["status"] for c in solution.metadata["generations"][0]["children"]]
    assert statuses == ["repeat", "retained", "empty", "repeat"]
    assert [r.round for r in ctx.ledger.records if r.agent == "checker"] == [1, 2, 2, 2, 2]
    assert len(model.calls) == 1 + (1 + 1 + 1 + 1) + (1 + 4 + 4 + 1)


def test_readers_tolerate_garbage():
    assert read_brood('{"children": [{"name": "A", "role": "You are A."}]}', 2) == [
        Profile(name="A", role="You are A."),
        Profile(),
    ]
    assert read_brood('{"children": {"name": "A", "role": "r"}}', 1) == [
        Profile(name="A", role="r")
    ]
    assert read_brood('{"children": ["You are B.", 3, null]}', 3) == [
        Profile(role="You are B."),
        Profile(),
        Profile(),
    ]
    assert read_brood('{"children": [{"role": "x"}, {"role": "y"}, {"role": "z"}]}', 2) == [
        Profile(role="x"),
        Profile(role="y"),
    ]
    assert read_brood("no JSON here", 2) is None
    assert read_brood('{"children": null}', 2) is None
    assert read_brood(Brood.instructions(), 2) is None  # the shape it was shown is no reply
    assert read_check('{"reason": "fine", "retain": true}') == (True, True)
    assert read_check('{"reason": "dup", "retain": "no"}') == (False, False)
    assert read_check("Looks distinct and useful. Retain.") == (True, None)
    assert read_check("Too close to the Number Theorist: Discard") == (False, None)
    assert read_check("") == (True, None)


async def test_garbage_replies_take_the_documented_fallbacks():
    bred = 0

    def respond(request: ChatRequest) -> str:
        nonlocal bred
        agent, prompt = agent_of(request), last_user_message(request)
        if agent == "breeder":  # generation 1: prose; generation 2: readable
            bred += 1
            return "I would hire a chemist." if bred == 1 else profiles(2, 2)
        if agent == "checker":  # no JSON: retained unless it says discard
            return "Discard, it repeats the seed." if "E2.1:" in prompt else "Sounds good."
        return ""  # empty answers everywhere else

    model = ScriptedModel(respond)
    solution, _ = await run(model, generations=2, population=2)
    first, second = solution.metadata["generations"]
    assert [c["status"] for c in first["children"]] == ["unreadable", "unreadable"]
    assert not first["updated"] and second["parents"] == ["seed"]  # the same parents again
    assert [(c["status"], c["verdict"]) for c in second["children"]] == [
        ("discarded", None),
        ("retained", None),
    ]
    assert solution.metadata["unreadable"] == {"profiles": 1, "checks": 2}
    assert len(model.calls) == 1 + 1 + (1 + 2 + 1 + 1)
    assert [agent_of(r) for r in model.requests][-2:] == ["child_2", "seed"]
    assert solution.answer == ""  # the update's own (empty) reply


@pytest.mark.parametrize("population", [1, 3])
async def test_a_breeder_that_never_answers_in_json_costs_one_call_a_generation(population):
    model = ScriptedModel(lambda r: "SEED: The answer is 41." if agent_of(r) == "seed" else "??")
    solution, _ = await run(model, generations=3, population=population)
    assert len(model.calls) == 1 + 3
    assert solution.answer == "SEED: The answer is 41."
    assert solution.metadata["unreadable"] == {"profiles": 3, "checks": 0}


@pytest.mark.parametrize("native", [True, False])
async def test_profiles_and_verdicts_are_asked_natively_where_supported(native):
    model = ScriptedModel(script(), native=["structured_output"] if native else [])
    await run(model, generations=1, population=2)
    shapes = {"breeder": Brood, "checker": Check}
    for request in model.requests:
        reply = shapes.get(agent_of(request))
        if reply is None or not native:
            assert request.response_format is None
        else:
            assert request.response_format["json_schema"]["schema"] == reply.json_schema()


@pytest.mark.parametrize(
    ("max_calls", "answer"),
    [
        (1, "SEED: The answer is 41."),  # stopped at the first breeding
        (4, "SEED: The answer is 41."),  # during generation 1's checks
        (8, "SEED: The answer is 41."),  # at generation 1's update
        (9, "UPDATE-1: The answer is 42."),  # at generation 2's breeding
        (15, "UPDATE-1: The answer is 42."),  # during generation 2's answers
    ],
)
async def test_a_budget_stop_returns_the_latest_result(max_calls, answer):
    model = ScriptedModel(script())
    ctx = Context(model, budget=Budget(max_calls=max_calls))
    solution = await EvoAgent().run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and "budget" in solution.metadata
    assert ctx.usage.calls == max_calls
    assert solution.answer == answer


async def test_prompts_and_answer_do_not_depend_on_completion_order():
    def slot(request: ChatRequest) -> int:
        agent = agent_of(request)
        if agent.startswith("child_"):
            return int(agent.rsplit("_", 1)[1])
        found = CANDIDATE.findall(last_user_message(request))
        return int(found[0][1]) if agent == "checker" else 0

    outcomes, finished = [], []
    for latency in (lambda r: 0.004 * (5 - slot(r)), lambda r: 0.004 * slot(r)):
        model = ScriptedModel(
            script(lambda t, i: (t + i) % 2 == 0, lambda t, i: 10 * t + i), latency=latency
        )
        solution, ctx = await run(model, Context(model, seed=3), generations=3, population=4)
        records = sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records)
        updates = [EXPERT.findall(r.messages[-1]["content"]) for r in ctx.ledger.records
                   if r.agent == "seed" and r.round > 0]  # fmt: skip
        outcomes.append((records, updates, solution.answer, solution.metadata))
        finished.append([agent_of(c.request) for c in model.calls])  # in finishing order
    assert outcomes[0] == outcomes[1]
    assert finished[0] != finished[1]  # the concurrent calls did finish in other orders
    assert outcomes[0][1] == [["E1.1", "E1.3"], ["E2.2", "E2.4"], ["E3.1", "E3.3"]]


@pytest.mark.parametrize(
    ("roles", "on_b"),
    [
        ({"checker": "scripted:b"}, {"checker"}),
        ({"child_2": "scripted:b"}, {"child_2"}),
        ({"child": "scripted:b", "seed": "scripted:b"}, {"child_1", "child_2", "seed"}),
        ({"breeder": "scripted:b"}, {"breeder"}),
    ],
)
async def test_model_roles_put_roles_and_children_on_other_models(roles, on_b):
    method = get_method("evoagent")(generations=2, population=2)
    ctx = Context(
        "scripted:a", models=TwoModels(script), model_roles=method.check_model_roles(roles)
    )
    solution = await method.solve(TASK, ctx)
    assert len(ctx.ledger.records) == 1 + 2 * (1 + 2 + 2 + 1)
    assert solution.answer == "UPDATE-2: The answer is 42."
    for record in ctx.ledger.records:
        assert record.model == ("scripted:b" if record.agent in on_b else "scripted:a")
    with pytest.raises(ConfigError, match="no role or agent 'child_3'"):
        method.check_model_roles({"child_3": "scripted:b"})


@pytest.mark.system
def test_the_command_line_runs_evoagent_on_gsm8k(tmp_path):
    data, answers, out = tmp_path / "gsm8k.jsonl", tmp_path / "evo.json", tmp_path / "run"
    rows = [
        {"question": "Tom has 3 boxes of 6 pencils. How many pencils?", "answer": "#### 18"},
        {"question": "Maria reads 15 pages a day. How many in 6 days?", "answer": "#### 90"},
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    replies = {
        "You are evolving a team": profiles(1, 3),  # the same profiles every generation
        "We are hiring one more expert": '{"reason": "new", "retain": true}',
        ".": "The answer is 18.",
    }
    answers.write_text(json.dumps(replies))
    code = main(
        ["run", "--method", "evoagent", "--benchmark", "gsm8k", "--data", str(data),
         "--model", f"scripted:{answers}", "--limit", "2", "--out", str(out), "--no-cache",
         "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # generation 1: 1 + 3 checks + 3 answers + 1 update; then the same roles again are repeats:
    # one breeder call each for generations 2 and 3
    assert [r["usage"]["calls"] for r in results] == [1 + 8 + 1 + 1] * 2
    assert [r["score"]["correct"] for r in results] == [True, False]
    trace = json.loads((out / "traces.jsonl").read_text().splitlines()[0])
    assert [c["agent"] for c in trace["calls"]].count("breeder") == 3
    assert {c["agent"] for c in trace["calls"]} == {
        "seed",
        "breeder",
        "checker",
        "child_1",
        "child_2",
        "child_3",
    }
