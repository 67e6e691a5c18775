"""Self-organising teams (Pappu et al., arXiv 2602.01011) with scripted models: the call formula,
the shared transcript, who is told what under each condition, the turn schedules, the final
decision, budget stops, garbage replies, model roles, the command line, and the synergy-gap
arithmetic reproduced exactly over runs of a scripted team with a known expert."""

from __future__ import annotations

import json
import random
from fractions import Fraction
from itertools import pairwise

import pytest
from helpers import TASK, agent_of, method_runner

import maslab
from maslab.analysis.synergy import condition_gaps, synergy
from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.context import Budget, Context, derive_seed
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.cot import cot_prompt
from maslab.methods.self_org_team import (
    SelfOrgTeam,
    final_prompt,
    private_note,
    reveal_note,
    turn_prompt,
)

NOTE = "SECRET-NOTE: the product is forty-two."


def system_of(request: ChatRequest) -> str:
    first = request.messages[0]
    assert first["role"] == "system"
    return first["content"]


def tagged(request: ChatRequest) -> str:
    """A reply naming its agent and how many turns it was shown."""
    shown = last_user_message(request).count("\n[member_")
    return f"{agent_of(request)} after {shown}: The answer is 42."


run = method_runner(SelfOrgTeam, TASK)


def test_defaults_names_and_checks():
    method = SelfOrgTeam()
    assert get_method("self_org_team") is SelfOrgTeam
    cfg = method.config
    assert (cfg.members, cfg.rounds, cfg.schedule, cfg.final, cfg.elicit_final) == (
        4, 4, "round_robin", "majority", True
    )  # fmt: skip
    assert (cfg.condition, cfg.expert, cfg.expert_note) == (
        "expert_not_mentioned",
        "member_1",
        None,
    )
    assert method.agent_names() == ("member_1", "member_2", "member_3", "member_4")
    bad = [
        {"expert": "member_5"},
        {"members": 1},
        {"speakers": 2},  # round_robin has no subsets
        {"schedule": "random", "speakers": 5},
        {"condition": "reveal"},
        {"final": "llm"},
    ]
    for config in bad:
        with pytest.raises(ConfigError):
            SelfOrgTeam(**config)
    method.check_model_roles({"member": "scripted:echo", "member_4": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'member_5'"):
        method.check_model_roles({"member_5": "scripted:echo"})


@pytest.mark.parametrize(
    ("config", "calls"),
    [
        ({}, 4 * 4 + 4),
        ({"members": 2, "rounds": 1}, 2 + 2),
        ({"members": 3, "rounds": 2, "elicit_final": False}, 6),
        ({"members": 5, "rounds": 3, "schedule": "random"}, 15 + 5),
        ({"members": 4, "rounds": 3, "schedule": "random", "speakers": 2}, 6 + 4),
        ({"schedule": "random", "speakers": 1, "elicit_final": False}, 4),
        ({"condition": "best_individual"}, 1),
        ({"condition": "best_individual", "members": 6, "rounds": 9}, 1),
    ],
)
async def test_calls_follow_the_formula(config, calls):
    model = ScriptedModel(tagged)
    solution, ctx = await run(model, **config)
    assert len(model.calls) == ctx.usage.calls == calls
    if config.get("condition") == "best_individual":
        return
    cfg = SelfOrgTeam(**config).config
    per_round = cfg.speakers or cfg.members
    records = ctx.ledger.records
    for r in range(cfg.rounds):
        assert len([x for x in records if x.round == r]) == per_round
    finals = sorted(x.agent for x in records if x.round == cfg.rounds)
    assert finals == (sorted(SelfOrgTeam(**config).agent_names()) if cfg.elicit_final else [])
    assert [len(order) for order in solution.metadata["orders"]] == [per_round] * cfg.rounds


async def test_every_turn_sees_every_earlier_turn_in_order_and_finals_see_all():
    model = ScriptedModel(tagged)
    _, ctx = await run(model, members=3, rounds=2)
    turns = ctx.transcript.filter(kind="turn")
    assert [(m.sender, m.round) for m in turns] == [
        (f"member_{i}", r) for r in (0, 1) for i in (1, 2, 3)
    ]
    requests = model.requests
    for i, (request, message) in enumerate(zip(requests[:6], turns, strict=True)):
        assert agent_of(request) == message.sender
        # one user turn after the system message: no private memory besides the thread
        assert [m["role"] for m in request.messages] == ["system", "user"]
        assert last_user_message(request) == turn_prompt(TASK, turns[:i], message.round, 2)
        assert message.content == f"{message.sender} after {i}: The answer is 42."
    for request in requests[6:]:
        assert last_user_message(request) == final_prompt(TASK, turns)
    assert sorted(agent_of(r) for r in requests[6:]) == ["member_1", "member_2", "member_3"]
    # the turns of a round are sequential: none starts before the previous one finished
    assert all(a.finished <= b.started for a, b in pairwise(model.calls[:6]))


@pytest.mark.parametrize(
    ("condition", "told", "noted"),
    [
        ("no_information", False, False),
        ("expert_not_mentioned", False, True),
        ("reveal_expert", True, True),
    ],
)
async def test_who_is_told_what(condition, told, noted):
    model = ScriptedModel(tagged)
    await run(model, members=3, rounds=2, condition=condition, expert="member_2", expert_note=NOTE)
    assert len(model.requests) == 3 * 2 + 3
    for request in model.requests:
        system, agent = system_of(request), agent_of(request)
        assert f"You are {agent}, one of 3 members" in system
        assert (reveal_note("member_2") in system) is told  # every member, or none
        has_note = private_note(NOTE) in system
        assert has_note is (noted and agent == "member_2")
        if agent != "member_2":
            assert "SECRET-NOTE" not in json.dumps(request.messages)
    assert "member_2" in reveal_note("member_2")


async def test_best_individual_is_the_expert_alone_with_its_note():
    model = ScriptedModel(tagged)
    solution, _ = await run(model, condition="best_individual", expert="member_3", expert_note=NOTE)
    (request,) = model.requests
    assert agent_of(request) == "member_3"
    assert private_note(NOTE) in system_of(request)
    assert reveal_note("member_3") not in system_of(request)
    assert last_user_message(request) == cot_prompt(TASK)
    assert solution.answer == "member_3 after 0: The answer is 42."
    assert solution.metadata["final_answers"] == {"member_3": "42"}
    assert solution.metadata["first_answers"] == {"member_3": "42"}


def draws(
    seed: int, members: int, rounds: int, speakers: int
) -> tuple[list[list[str]], random.Random]:
    """The orders the random schedule must draw from the sample's stream, and the stream after."""
    rng = random.Random(derive_seed(seed, TASK.id, 0))
    names = [f"member_{i}" for i in range(1, members + 1)]
    return [rng.sample(names, speakers) for _ in range(rounds)], rng


@pytest.mark.parametrize("seed", [0, 1, 7])
async def test_the_random_schedule_draws_subsets_and_orders_from_the_samples_stream(seed):
    model = ScriptedModel(tagged)
    ctx = Context(model, sample_id=TASK.id, seed=seed)
    solution, _ = await run(
        model, ctx, members=5, rounds=3, schedule="random", speakers=3, elicit_final=False
    )
    expected, _ = draws(seed, 5, 3, 3)
    assert solution.metadata["orders"] == expected
    spoken = [(r.agent, r.round) for r in ctx.ledger.records]
    assert spoken == [(name, r) for r, order in enumerate(expected) for name in order]
    silent = {f"member_{i}" for i in range(1, 6)} - {n for order in expected for n in order}
    for name in silent:  # never spoke: no first or final answer, and no say in the vote
        assert solution.metadata["first_answers"][name] is None
        assert solution.metadata["final_answers"][name] is None
    assert sum(solution.metadata["votes"].values()) == 5 - len(silent)


async def test_random_schedules_differ_between_seeds_and_repeat_within_one():
    orders = []
    for seed in (0, 0, 1, 2):
        model = ScriptedModel(tagged)
        ctx = Context(model, sample_id=TASK.id, seed=seed)
        solution, _ = await run(model, ctx, schedule="random")
        orders.append(solution.metadata["orders"])
    assert orders[0] == orders[1]
    assert len({json.dumps(o) for o in orders}) == 3
    assert all(sorted(order) == [f"member_{i}" for i in range(1, 5)] for order in orders[2])


def answers(script: dict[str, list[str]]):
    """member -> its replies in order (turns, then its final answer)."""
    spoken: dict[str, int] = {}

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        spoken[agent] = spoken.get(agent, 0) + 1
        return script[agent][spoken[agent] - 1]

    return respond


SCRIPT = {
    "member_1": ["I think 41. The answer is 41.", "The answer is 40.", "Final: the answer is 7."],
    "member_2": ["The answer is 42.", "Still, the answer is 42.", "The answer is 42."],
    "member_3": ["The answer is 9.", "The answer is 42.", "The answer is 42."],
    "member_4": ["Not sure.", "The answer is 7.", "The answer is 8."],
}


async def test_majority_over_elicited_finals_and_first_and_final_answers_in_metadata():
    model = ScriptedModel(answers(SCRIPT))
    solution, _ = await run(model, rounds=2)
    assert solution.answer == "The answer is 42."
    meta = solution.metadata
    assert meta["first_answers"] == {
        "member_1": "41", "member_2": "42", "member_3": "9", "member_4": None
    }  # fmt: skip
    assert meta["final_answers"] == {
        "member_1": "7", "member_2": "42", "member_3": "42", "member_4": "8"
    }  # fmt: skip
    assert meta["votes"] == {"7": 1, "42": 2, "8": 1} and meta["decided"] == "majority"


async def test_majority_over_last_turns_without_final_calls():
    model = ScriptedModel(answers(SCRIPT))
    solution, ctx = await run(model, rounds=2, elicit_final=False)
    assert ctx.usage.calls == 8
    assert solution.metadata["final_answers"] == {
        "member_1": "40", "member_2": "42", "member_3": "42", "member_4": "7"
    }  # fmt: skip
    assert solution.answer == "Still, the answer is 42."


@pytest.mark.parametrize("seed", [0, 3, 11])
async def test_random_member_takes_the_final_answer_of_a_member_drawn_from_the_stream(seed):
    model = ScriptedModel(answers(SCRIPT))
    ctx = Context(model, sample_id=TASK.id, seed=seed)
    solution, _ = await run(model, ctx, rounds=2, schedule="random", final="random_member")
    orders, rng = draws(seed, 4, 2, 4)
    assert solution.metadata["orders"] == orders
    chosen = rng.choice([f"member_{i}" for i in range(1, 5)])
    assert solution.metadata["decided"] == chosen
    assert solution.answer == SCRIPT[chosen][2]


async def test_random_member_draws_differ_across_seeds():
    chosen = set()
    for seed in range(8):
        model = ScriptedModel(answers(SCRIPT))
        ctx = Context(model, sample_id=TASK.id, seed=seed)
        solution, _ = await run(model, ctx, rounds=2, final="random_member")
        chosen.add(solution.metadata["decided"])
    assert len(chosen) > 1


@pytest.mark.parametrize(("max_calls", "answer"), [(4, "41"), (5, "42"), (1, "41")])
async def test_a_budget_stop_returns_the_vote_over_the_latest_turns(max_calls, answer):
    script = {
        "member_1": ["The answer is 41.", "The answer is 42."],
        "member_2": ["The answer is 41."],
        "member_3": ["The answer is 42."],
        "member_4": ["The answer is 42."],
    }
    model = ScriptedModel(answers(script))
    ctx = Context(model, budget=Budget(max_calls=max_calls))
    solution = await SelfOrgTeam().run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and "budget" in solution.metadata
    assert ctx.usage.calls == max_calls
    assert solution.answer == f"The answer is {answer}."


async def test_garbage_replies_never_crash():
    garbage = ["", "   ", "\\boxed{", "??? no idea", '{"answer": ']
    model = ScriptedModel(garbage, cycle=True)
    solution, ctx = await run(model, rounds=2)
    assert ctx.usage.calls == 12
    assert set(solution.metadata["final_answers"].values()) == {None}
    assert solution.metadata["votes"] == {}
    assert solution.answer == model.calls[8].response  # the first member's final stands
    model = ScriptedModel(garbage, cycle=True)
    solution, _ = await run(model, rounds=1, final="random_member", elicit_final=False)
    assert solution.answer in garbage


class Team:
    """A ``team:`` provider: ``team:expert`` always answers right; on ``team:member``, member_1
    is right on the first task only, member_3 defers to the expert on the second and third
    tasks when told who the expert is, and every other answer is wrong (gold + member number)."""

    def __init__(self, tasks: list[Task]) -> None:
        self.golds = [(t.question.strip(), int(t.gold)) for t in tasks]

    def task_of(self, request: ChatRequest) -> tuple[int, int]:
        text = last_user_message(request)
        ((index, gold),) = [(i, g) for i, (q, g) in enumerate(self.golds) if q in text]
        return index, gold

    def expert(self, request: ChatRequest) -> str:
        return f"I have checked it twice: \\boxed{{{self.task_of(request)[1]}}}"

    def member(self, request: ChatRequest) -> str:
        agent = agent_of(request)
        index, gold = self.task_of(request)
        told = reveal_note("member_2") in system_of(request)
        right = (agent == "member_1" and index == 0) or (
            agent == "member_3" and told and index in (1, 2)
        )
        return f"My answer: \\boxed{{{gold if right else gold + int(agent[-1])}}}"

    def provider(self, name: str, settings: object) -> ScriptedModel:
        respond = self.expert if name == "expert" else self.member
        return ScriptedModel(respond, name=f"team:{name}")


@pytest.fixture
def team_provider(monkeypatch):
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    tasks = get_benchmark("arith")().load(limit=4)
    register_provider("team")(Team(tasks).provider)
    return tasks


@pytest.mark.system
def test_a_scripted_team_with_a_known_expert_reproduces_the_synergy_gaps(team_provider, tmp_path):
    def evaluate(label: str, **config) -> maslab.RunResult:
        return maslab.evaluate(
            "self_org_team", "arith", "team:member", limit=4, config=config,
            model_roles={"member_2": "team:expert"}, cache=False, out=tmp_path / label,
            progress=False,
        )  # fmt: skip

    runs = {
        condition: evaluate(condition, condition=condition, expert="member_2")
        for condition in ("no_information", "expert_not_mentioned", "reveal_expert")
    }
    runs["best_individual"] = evaluate("alone_2", condition="best_individual", expert="member_2")
    alone = {
        f"member_{k}": evaluate(f"alone_{k}", condition="best_individual", expert=f"member_{k}")
        for k in (1, 3, 4)
    }
    alone["member_2"] = runs["best_individual"]
    for condition, run in runs.items():
        assert sorted(r.task_id for r in run.records) == [t.id for t in team_provider]
        calls = 1 if condition == "best_individual" else 20
        assert all(r.usage["calls"] == calls and r.status == "ok" for r in run.records)
    by_model = runs["reveal_expert"].records[0].usage_by_model
    assert by_model["team:expert"]["calls"] == 5 and by_model["team:member"]["calls"] == 15
    # the team's runs, read back from disk, scored as designed task by task
    reread = {c: maslab.load_run(run.dir) for c, run in runs.items()}
    correct = {
        c: [next(r.correct for r in run.records if r.task_id == t.id) for t in team_provider]
        for c, run in reread.items()
    }
    assert correct == {
        "no_information": [True, False, False, False],
        "expert_not_mentioned": [True, False, False, False],
        "reveal_expert": [True, True, True, False],
        "best_individual": [True, True, True, True],
    }
    members = {name: alone[name] for name in sorted(alone)}
    enm = synergy(reread["expert_not_mentioned"], members)
    assert enm.team == Fraction(1, 4)
    assert enm.members == {
        "member_1": Fraction(1, 4), "member_2": Fraction(1), "member_3": Fraction(0),
        "member_4": Fraction(0),
    }  # fmt: skip
    assert (enm.best_member, enm.best, enm.average) == ("member_2", 1, Fraction(5, 16))
    assert enm.oracle == 1 and enm.tasks == 4
    assert (enm.strong_synergy, enm.weak_synergy) == (False, False)
    assert enm.relative_gap == enm.oracle_gap == Fraction(3, 4)
    revealed = synergy(reread["reveal_expert"], members)
    assert revealed.team == Fraction(3, 4)
    assert (revealed.strong_synergy, revealed.weak_synergy) == (False, True)
    assert revealed.relative_gap == Fraction(1, 4)
    gaps = condition_gaps(
        reread["expert_not_mentioned"], reread["reveal_expert"], reread["best_individual"]
    )
    assert (gaps.expert_not_mentioned, gaps.reveal_expert, gaps.best_individual) == (
        Fraction(1, 4), Fraction(3, 4), Fraction(1)
    )  # fmt: skip
    assert gaps.identification_gap == Fraction(1, 2)
    assert gaps.leveraging_gap == Fraction(1, 4)
    # the metadata of a team sample: each member's first-turn and final answers
    (record,) = [r for r in runs["reveal_expert"].records if r.task_id == team_provider[1].id]
    meta = record.metadata
    gold = int(team_provider[1].gold)
    assert meta["final_answers"] == {
        "member_1": str(gold + 1), "member_2": str(gold), "member_3": str(gold),
        "member_4": str(gold + 4),
    }  # fmt: skip
    assert meta["first_answers"] == meta["final_answers"]


@pytest.mark.system
def test_the_command_line_runs_a_team_and_the_expert_alone(tmp_path):
    # not scripted:echo: echoing a prompt that holds the whole thread doubles it every turn
    member, expert = tmp_path / "member.yaml", tmp_path / "expert.yaml"
    member.write_text('".": "I go with \\\\boxed{5}"\n')
    expert.write_text('".": "Alone I say \\\\boxed{3}"\n')
    out = tmp_path / "team"
    argv = ["run", "--method", "self_org_team", "--benchmark", "arith", "--model",
            f"scripted:{member}", "--limit", "2", "--out", str(out), "--no-cache",
            "--quiet"]  # fmt: skip
    assert main(argv) == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 20 for r in results)
    assert all(r["metadata"]["votes"] == {"5": 4} for r in results)
    alone = tmp_path / "alone"
    argv = ["run", "--method", "self_org_team", "--benchmark", "arith", "--model",
            f"scripted:{member}", "--config", "condition=best_individual", "--config",
            "expert=member_2", "--model-role", f"member_2=scripted:{expert}", "--limit", "1",
            "--out", str(alone), "--no-cache", "--quiet"]  # fmt: skip
    assert main(argv) == 0
    trace = json.loads((alone / "traces.jsonl").read_text().splitlines()[0])
    assert [(c["agent"], c["model"]) for c in trace["calls"]] == [
        ("member_2", f"scripted:{expert}")
    ]
    (result,) = [json.loads(line) for line in (alone / "results.jsonl").read_text().splitlines()]
    assert result["answer"] == "Alone I say \\boxed{3}"
    assert result["metadata"]["final_answers"] == {"member_2": "3"}
