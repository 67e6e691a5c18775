"""DyLAN (arXiv 2310.02170) with scripted models: the call formula, early consensus, listwise
agent selection (who saw whose solutions), importance scores, team optimisation, budget stops,
model roles, garbage replies and the command line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from helpers import TASK, agent_of, method_runner

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.roles import numbered
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.dylan import (
    DEBATE_SYSTEM,
    DEFAULT_TEAM,
    MMLU_POOL,
    DyLAN,
    Ranking,
    Update,
    covers,
    edge_weights,
    read_ranking,
    read_update,
    system_prompt,
    text_vote,
)

TAG = re.compile(r"(agent_\d+)@(\d+):")


def index_of(agent: str) -> int:
    return int(agent.rsplit("_", 1)[1])


def seen(request: ChatRequest) -> list[str]:
    """The agents whose solutions the request shows, in the order shown."""
    return [agent for agent, _ in TAG.findall(last_user_message(request))]


def round_of(request: ChatRequest) -> int:
    """The round of a scripted call: one after the solutions it is shown (round 0: none)."""
    shown = TAG.findall(last_user_message(request))
    return int(shown[0][1]) + 1 if shown else 0


def choose(*agents: str) -> Callable[[list[str]], list[int]]:
    """A ranker that picks ``agents`` (by the tags of the solutions it is shown)."""
    return lambda shown: [shown.index(a) + 1 for a in agents if a in shown]


def script(
    answer: Callable[[str, int], object] = lambda agent, r: 42,
    rate: Callable[[str, str], object] = lambda rater, ratee: 3,
    pick: Callable[[list[str]], list[int]] = lambda shown: [1, 2],
) -> Callable[[ChatRequest], str]:
    """Agent a in round r writes 'a@r: The answer is <answer(a, r)>.' (rounds >= 1 as JSON,
    rating each shown solution's author with ``rate``); the ranker picks ``pick(shown)``."""

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        shown = seen(request)
        if agent == "ranker":
            return json.dumps({"reasoning": "RANKING", "best": pick(shown)})
        r = round_of(request)
        text = f"{agent}@{r}: The answer is {answer(agent, r)}."
        if not shown:
            return text
        return json.dumps({"solution": text, "ratings": [rate(agent, a) for a in shown]})

    return respond


def distinct(agent: str, r: int) -> int:
    return index_of(agent)


run = method_runner(DyLAN, TASK)


def calls_by_round(ctx: Context) -> dict[int, list[str]]:
    rounds: dict[int, list[str]] = {}
    for record in ctx.ledger.records:
        rounds.setdefault(record.round, []).append(record.agent)
    return rounds


def team(n: int) -> list[str]:
    return ["Assistant", "Mathematician", "Economist", "Programmer", "Lawyer", "Doctor"][:n]


def test_defaults_and_validation():
    method = DyLAN()
    assert get_method("dylan") is DyLAN
    assert method.config.team == DEFAULT_TEAM and len(DEFAULT_TEAM) == 4
    assert method.config.rounds == 3
    assert len(method.config.pool) == 7 and method.config.team_size == 4
    assert method.agent_names() == tuple(f"agent_{i}" for i in range(1, 8))
    for bad in ({"rounds": 2}, {"team": []}, {"team": ["Wizard"]}, {"team_size": 8},
                {"pool": ["Doctor", "Doctor"], "team_size": 1}):  # fmt: skip
        with pytest.raises(ConfigError):
            DyLAN(**bad)


@pytest.mark.parametrize(
    ("n", "rounds", "expected"), [(4, 3, 11), (5, 4, 15), (4, 5, 15), (3, 3, 9), (2, 4, 8)]
)
async def test_without_consensus_the_calls_reach_the_formula(n, rounds, expected):
    model = ScriptedModel(script(answer=distinct))
    solution, ctx = await run(model, team=team(n), rounds=rounds)
    formula = 2 * n + 1 + 2 * (rounds - 2) if n > 3 else n * rounds
    assert len(model.calls) == ctx.usage.calls == formula == expected
    by_round = calls_by_round(ctx)
    assert sorted(by_round[0]) == sorted(by_round[1]) == [f"agent_{i}" for i in range(1, n + 1)]
    for r in range(2, rounds):
        agents = [a for a in by_round[r] if a != "ranker"]
        assert by_round[r].count("ranker") == (1 if n > 3 and r == 2 else 0)
        assert len(agents) == (2 if n > 3 else n)
    meta = solution.metadata
    assert meta["stopped_early"] is False and meta["rounds_run"] == rounds
    # the final answer is the majority of the last round: all differ, so the first activated
    first = meta["activated"][-1][0]
    assert solution.answer == f"{first}@{rounds - 1}: The answer is {index_of(first)}."


async def test_consensus_in_round_zero_stops_after_the_first_three_nodes():
    model = ScriptedModel(script(), latency=0.01)
    solution, _ = await run(model)
    assert len(model.calls) == 3
    assert max(c.started for c in model.calls) < min(c.finished for c in model.calls)
    meta = solution.metadata
    assert meta["stopped_early"] is True and meta["rounds_run"] == 1
    assert meta["activated"] == [meta["activated"][0]] and len(meta["activated"][0]) == 4
    called = [agent_of(c.request) for c in model.calls]
    assert sorted(called) == sorted(meta["activated"][0][:3])
    assert solution.answer.endswith("The answer is 42.")
    importance = meta["importance"]
    left_out = meta["activated"][0][3]
    assert importance[left_out] == 0
    assert all(importance[a] == pytest.approx(1 / 3) for a in called)


async def test_the_fourth_node_runs_after_the_first_three_and_can_reach_consensus():
    seen_cases = set()
    for seed in range(12):
        model = ScriptedModel(
            script(answer=lambda agent, r: 7 if agent == "agent_4" else 42), latency=0.005
        )
        solution, _ = await run(model, ctx=Context(model, seed=seed))
        order = solution.metadata["activated"][0]
        late = "agent_4" in order[:3]
        seen_cases.add(late)
        assert len(model.calls) == (4 if late else 3)
        assert solution.metadata["stopped_early"] is True
        assert solution.answer.endswith("The answer is 42.")
        if late:  # the fourth node is called alone, after the first three have answered
            fourth = model.calls[-1]
            assert agent_of(fourth.request) == order[3]
            assert all(c.finished <= fourth.started for c in model.calls[:3])
    assert seen_cases == {True, False}


async def test_consensus_in_round_one_uses_the_whole_team_as_the_active_set():
    model = ScriptedModel(script(answer=lambda agent, r: 42 if r else index_of(agent)))
    solution, _ = await run(model)
    assert len(model.calls) == 4 + 3  # round 1: the first 3 agree (3 > floor(2/3·4))
    assert solution.metadata["rounds_run"] == 2 and solution.metadata["stopped_early"]


async def test_the_ranker_selects_agents_by_id_and_only_they_run_in_later_rounds():
    for seed in range(6):
        model = ScriptedModel(script(answer=distinct, pick=choose("agent_3", "agent_1")))
        solution, _ = await run(model, ctx=Context(model, seed=seed), rounds=4)
        assert len(model.calls) == 4 + 4 + 1 + 2 * 2
        by_round: dict[int, list[ChatRequest]] = {}
        for request in model.requests:
            by_round.setdefault(round_of(request), []).append(request)
        for r in (2, 3):
            ranker = [q for q in by_round[r] if agent_of(q) == "ranker"]
            nodes = [q for q in by_round[r] if agent_of(q) != "ranker"]
            assert len(ranker) == (1 if r == 2 else 0)  # round 3: nothing left to choose from
            assert sorted(agent_of(q) for q in nodes) == ["agent_1", "agent_3"]
            expected = (
                ["agent_1", "agent_2", "agent_3", "agent_4"] if r == 2 else ["agent_1", "agent_3"]
            )
            # the ranker and every node see the active round r-1 solutions, and only those
            for request in [*ranker, *nodes]:
                assert sorted(seen(request)) == expected
                assert {int(t) for _, t in TAG.findall(last_user_message(request))} == {r - 1}
        for request in by_round[1]:  # round 1 sees every round-0 solution
            assert sorted(seen(request)) == ["agent_1", "agent_2", "agent_3", "agent_4"]
        assert all(seen(q) == [] for q in by_round[0])  # round 0: the question only
        assert sorted(solution.metadata["activated"][2]) == ["agent_1", "agent_3"]


async def test_the_ranker_is_never_asked_to_keep_every_candidate():
    model = ScriptedModel(script(answer=distinct))
    solution, _ = await run(model, rounds=5)
    rankings = [q for q in model.requests if agent_of(q) == "ranker"]
    assert [len(seen(q)) for q in rankings] == [4]  # round 2 only; later rounds have 2 agents
    assert len(model.calls) == 4 + 4 + 1 + 2 * 3
    assert solution.metadata["rounds_run"] == 5
    assert [len(a) for a in solution.metadata["activated"]] == [4, 4, 2, 2, 2]


async def test_each_node_sees_the_solutions_in_its_own_shuffled_order():
    model = ScriptedModel(script(answer=distinct))
    await run(model)
    orders = [tuple(seen(q)) for q in model.requests if round_of(q) == 1]
    assert len(orders) == 4 and all(sorted(o) == sorted(orders[0]) for o in orders)
    assert len(set(orders)) > 1  # not one order for the whole round


async def test_prompts_do_not_depend_on_completion_order():
    def slow_first(request: ChatRequest) -> float:
        agent = agent_of(request)
        return 0.0 if agent == "ranker" else 0.004 * (5 - index_of(agent))

    def slow_last(request: ChatRequest) -> float:
        agent = agent_of(request)
        return 0.0 if agent == "ranker" else 0.004 * index_of(agent)

    prompts = []
    for latency in (slow_first, slow_last):
        model = ScriptedModel(script(answer=distinct), latency=latency)
        solution, ctx = await run(model)
        prompts.append(
            (
                sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records),
                solution.answer,
                solution.metadata["importance"],
            )
        )
    assert prompts[0] == prompts[1]


async def test_importance_scores_by_hand():
    # 3 agents (no ranker), 3 rounds; agents 1 and 3 answer 1, agent 2 answers 2: no round has
    # a consensus (2 of 3 is not > 2), and the final answer is 1.
    table = {
        "agent_1": {"agent_1": 5, "agent_2": 1, "agent_3": 4},
        "agent_2": {"agent_1": 3, "agent_2": 3, "agent_3": 3},
        "agent_3": {"agent_1": 2, "agent_2": 4, "agent_3": 4},
    }
    model = ScriptedModel(
        script(
            answer=lambda agent, r: 2 if agent == "agent_2" else 1,
            rate=lambda rater, ratee: table[rater][ratee],
        )
    )
    solution, _ = await run(model, team=team(3))
    assert len(model.calls) == 9 and solution.answer.endswith("The answer is 1.")
    # round 2: agents 1 and 3 share 1. Edge weights into agent_1's node: 5/10, 1/10, 4/10;
    # into agent_3's: 2/10, 4/10, 4/10; into agent_2's: 1/3 each.
    r1 = {"agent_1": 0.5 * 0.5 + 0.2 * 0.5, "agent_2": 0.1 * 0.5 + 0.4 * 0.5,
          "agent_3": 0.4 * 0.5 + 0.4 * 0.5}  # fmt: skip
    r0 = {
        a: table["agent_1"][a] / 10 * r1["agent_1"]
        + 1 / 3 * r1["agent_2"]
        + table["agent_3"][a] / 10 * r1["agent_3"]
        for a in r1
    }
    assert r1 == pytest.approx({"agent_1": 0.35, "agent_2": 0.25, "agent_3": 0.4})
    assert r0 == pytest.approx({"agent_1": 0.3383333, "agent_2": 0.2783333, "agent_3": 0.3833333})
    expected = {"agent_1": 0.5 + r1["agent_1"] + r0["agent_1"], "agent_2": r1["agent_2"]
                + r0["agent_2"], "agent_3": 0.5 + r1["agent_3"] + r0["agent_3"]}  # fmt: skip
    assert solution.metadata["importance"] == pytest.approx(expected)
    assert sum(solution.metadata["importance"].values()) == pytest.approx(3)


def test_readers_tolerate_garbage():
    assert read_update('{"solution": "S", "ratings": [5, "4", 1.5]}', 3) == ("S", [5, 4, 1.5])
    assert read_update('{"solution": "S", "ratings": ["x", 9, null, true]}', 4) == (
        "S",
        [3, 3, 3, 3],
    )
    assert read_update('{"solution": "S", "ratings": [5, 1]}', 3) == ("S", [3, 3, 3])
    assert read_update('{"ratings": "five"}', 2) == ('{"ratings": "five"}', [3, 3])
    assert read_update("no JSON at all", 2) == ("no JSON at all", [3, 3])
    assert read_ranking('{"best": [3, 3, "1", 9, true]}', 4) == [2, 0]
    assert read_ranking('{"best": [2.5, 2]}', 4) == [1, 0]
    assert read_ranking("I like them all", 4) == [0, 1]
    assert read_ranking('{"best": [2, 1, 3]}', 2) == [1, 0]
    assert edge_weights([5, 1, 4]) == pytest.approx([0.5, 0.1, 0.4])
    assert edge_weights([3, 3, 3]) == pytest.approx([1 / 3] * 3)


async def test_garbage_replies_never_crash():
    def respond(request: ChatRequest) -> str:
        agent, r = agent_of(request), round_of(request)
        if agent == "ranker":
            return "They all look fine to me."
        tag = f"{agent}@{r}: The answer is {index_of(agent)}."
        if r == 0:
            return tag
        return {
            "agent_1": f"Not JSON. {tag}",
            "agent_2": json.dumps({"solution": tag, "ratings": ["x", 9, None, 2]}),
            "agent_3": json.dumps({"ratings": [1, 2], "note": tag}),
            "agent_4": json.dumps({"solution": None, "ratings": "five", "note": tag}),
        }[agent]

    model = ScriptedModel(respond)
    solution, _ = await run(model)
    assert len(model.calls) == 11
    ranked = next(c.request for c in model.calls if agent_of(c.request) == "ranker")
    # an unreadable ranking keeps the first two solutions in the (random) order shown
    assert sorted(solution.metadata["activated"][2]) == sorted(seen(ranked)[:2])
    assert sum(solution.metadata["importance"].values()) == pytest.approx(3)


async def test_native_structured_output_is_asked_for_updates_and_rankings():
    model = ScriptedModel(script(answer=distinct), native=["structured_output"])
    await run(model)
    for request in model.requests:
        fmt = request.response_format
        if round_of(request) == 0:
            assert fmt is None
        else:
            reply, name, end = (
                (Ranking, "dylan_ranking", "to be correct.")
                if agent_of(request) == "ranker"
                else (Update, "dylan_update", "well argued).")
            )
            schema = {"name": name, "schema": reply.json_schema(), "strict": True}
            assert fmt["json_schema"] == schema
            assert last_user_message(request).endswith(f"{end}\n\n{reply.instructions()}")


async def test_a_budget_stop_returns_the_best_answer_so_far():
    answers = {"agent_1": 42, "agent_2": 42, "agent_3": 7, "agent_4": 9}
    model = ScriptedModel(script(answer=lambda agent, r: answers[agent] if r == 0 else 5))
    ctx = Context(model, budget=Budget(max_calls=5))  # round 0 done, round 1 cut short
    solution = await DyLAN().run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert solution.answer.endswith("The answer is 42.")  # the round-0 majority


async def test_optimize_keeps_the_most_important_roles():
    pool = ("Economist", "Doctor", "Lawyer", "Mathematician", "Psychologist")
    strong = {"agent_3", "agent_5"}
    model = ScriptedModel(
        script(
            answer=lambda agent, r: 42 if agent in strong else 100 + index_of(agent),
            rate=lambda rater, ratee: 5 if ratee in strong else 1,
            pick=choose("agent_5", "agent_3"),
        )
    )
    method = DyLAN(pool=pool, team_size=2)
    tasks = [TASK, Task(id="t2", question="What is 40 + 2?", answer_type="number")]
    await method.optimize(tasks, Context(model))
    assert len(model.calls) == 2 * (5 + 5 + 3)  # two tasks; round 2 agrees at once
    assert method.optimized_team == ("Lawyer", "Psychologist")
    importance = method.pool_importance
    # round 2: the two strong agents share 1; every later node gives them 5/13 each, the
    # weak ones 1/13: 5/13 per strong agent in rounds 1 and 0 alike
    assert importance["Lawyer"] == importance["Psychologist"] == pytest.approx(0.5 + 10 / 13)
    assert importance["Economist"] == importance["Doctor"] == pytest.approx(2 / 13)
    assert sum(importance.values()) == pytest.approx(3)
    # later solves run the chosen team: agent_1 is the Lawyer, agent_2 the Psychologist
    solver = ScriptedModel(script())
    solution, _ = await run_with(method, solver)
    systems = {agent_of(c.request): c.request.messages[0]["content"] for c in solver.calls}
    assert systems == {"agent_1": system_prompt("Lawyer"), "agent_2": system_prompt("Psychologist")}
    assert solution.metadata["team"] == {"agent_1": "Lawyer", "agent_2": "Psychologist"}


async def run_with(method: DyLAN, model: ScriptedModel):
    ctx = Context(model)
    return await method.solve(TASK, ctx), ctx


def test_model_roles_route_agents_and_the_ranker(tmp_path):
    b, r = tmp_path / "b.yaml", tmp_path / "r.yaml"
    b.write_text('".": "B says the answer is 42."\n')
    r.write_text('".": \'{"reasoning": "r", "best": [1, 2]}\'\n')
    on_b, on_r = f"scripted:{b}", f"scripted:{r}"
    model = ScriptedModel(script(answer=distinct))
    outcome = DyLAN().run(TASK, model, model_roles={"agent_2": on_b, "ranker": on_r})
    records = outcome.context.ledger.records
    assert len(records) == 11
    for record in records:
        expected = {"agent_2": on_b, "ranker": on_r}.get(record.agent, model.name)
        assert record.model == expected
    assert len(model.calls) == 11 - 3 - 1  # agent_2 ran in rounds 0 and 1 and was picked


def test_role_names_are_checked():
    method = DyLAN()
    method.check_model_roles({"agent": "scripted:echo", "ranker": "scripted:echo"})
    method.check_model_roles({"agent_7": "scripted:echo"})  # the pool's 7 agents
    with pytest.raises(ConfigError, match="no role or agent 'agent_8'"):
        method.check_model_roles({"agent_8": "scripted:echo"})


def test_the_command_line_runs_dylan_end_to_end(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "dylan", "--benchmark", "arith", "--model", "scripted:echo",
         "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 3 for r in results)


# --- MASLab's protocol (preset=maslab) ----------------------------------------------------------

MATH_TASK = Task(
    id="m1", question="What is 6 * 7?", answer_type="math", instruction="Box the answer."
)


def worded(agent: str, r: int) -> str:
    """The answer 42 in words of the agent's own: no agent's reply covers another's."""
    return " ".join(f"w{index_of(agent)}-{k}" for k in range(12)) + " so 42"


def debate_script(
    answer: Callable[[str, int], object] = distinct,
    pick: Callable[[list[str]], list[int]] = lambda shown: [1, 2],
) -> Callable[[ChatRequest], str]:
    """Agent a in round r writes 'a@r: The answer is \\boxed{<answer(a, r)>}.' as plain text;
    the ranker picks ``pick(shown)``."""

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        if agent == "ranker":
            return json.dumps({"reasoning": "RANKING", "best": pick(seen(request))})
        r = round_of(request)
        return f"{agent}@{r}: The answer is \\boxed{{{answer(agent, r)}}}."

    return respond


def test_the_maslab_preset_sets_its_protocol_and_explicit_settings_win():
    config = DyLAN(preset="maslab").config
    assert config.team == ("Assistant",) * 4 and config.rounds == 3
    assert (config.variant, config.agreement) == ("by_task", "text")
    defaults = DyLAN().config
    assert (defaults.variant, defaults.agreement) == ("network", None)
    mmlu = DyLAN(preset="maslab", team=MMLU_POOL, agreement="answer").config
    assert (mmlu.team, mmlu.agreement, mmlu.variant) == (MMLU_POOL, "answer", "by_task")
    every_default = DyLAN.Config().model_dump(mode="json")
    assert DyLAN({**every_default, "preset": "maslab"}).config == config
    for bad in ({"preset": "nope"}, {"variant": "mmlu"}, {"agreement": "bleu"}):
        with pytest.raises(ConfigError):
            DyLAN(**bad)


def test_text_agreement_is_word_overlap_of_whole_replies():
    ten = " ".join(f"w{k}" for k in range(10))
    assert covers(ten, ten) and covers(ten, "W0 w1 w2 w3 w4 w5 w6 w7 w8 new")  # 9 of 10
    assert not covers(ten, "w0 w1 w2 w3 w4 w5 w6 w7 new other")  # 8 of 10
    assert covers(ten + " extra words", "w1 w2") and not covers("w1 w2", ten)  # one way
    assert not covers(ten, "") and not covers("", ten)
    assert text_vote(["a b", "c d", "c d", "a b"]) == (0, 2)  # ties: the earliest
    assert text_vote(["x", "a b c", "a b c d e f g h i j"]) == (2, 2)
    assert text_vote(["", ""]) == (0, 0)


async def test_maslab_dylan_main_compares_whole_replies_and_costs_11_calls():
    model = ScriptedModel(script(answer=lambda agent, r: 42))
    _, ctx = await run(model)
    assert ctx.usage.calls == 3  # our default: the same answer is a consensus at once
    model = ScriptedModel(script(answer=worded))
    solution, ctx = await run(model, preset="maslab")
    # MASLab's dylan_main.py: 4 round-1 nodes, 4 round-2 nodes, 1 listwise ranker, the 2 it
    # keeps in round 3: 4 + 4 + 1 + 2 = 11 (no two replies reach its 90% BLEU)
    assert len(model.calls) == ctx.usage.calls == 4 + 4 + 1 + 2 == 11
    meta = solution.metadata
    assert meta["variant"] == "network" and meta["stopped_early"] is False
    first = meta["activated"][-1][0]  # every reply has its own votes: the first activated
    assert solution.answer == f"{first}@2: The answer is {worded(first, 2)}."
    systems = {
        c.request.messages[0]["content"] for c in model.calls if "agent" in agent_of(c.request)
    }
    assert systems == {system_prompt("Assistant")}
    # identical replies cover each other: the text consensus stops after the first three
    model = ScriptedModel(lambda request: "Same words: the answer is 42.")
    solution, ctx = await run(model, preset="maslab")
    assert ctx.usage.calls == 3 and solution.metadata["stopped_early"]


async def test_maslab_dylan_mmlu_is_the_preset_with_its_team_of_7():
    model = ScriptedModel(script(answer=distinct))
    solution, ctx = await run(model, preset="maslab", team=MMLU_POOL, agreement="answer")
    # MASLab's dylan_mmlu.py: 7 + 7 + 1 listwise ranker + 2 = 17
    assert ctx.usage.calls == 7 + 7 + 1 + 2 == 17
    assert solution.metadata["team"] == dict(zip(numbered("agent", 7), MMLU_POOL, strict=True))
    model = ScriptedModel(script(answer=lambda agent, r: 42))
    _, ctx = await run(model, preset="maslab", team=MMLU_POOL, agreement="answer")
    assert ctx.usage.calls == 5  # answers compared: 5 of 7 agree (> floor(14/3))


async def test_maslab_dylan_math_debates_and_lets_the_ranker_s_two_finish():
    model = ScriptedModel(debate_script(pick=choose("agent_3", "agent_1")), latency=0.002)
    solution, ctx = await run(model, task=MATH_TASK, preset="maslab")
    # MASLab's dylan_math.py: 4 answers, 4 debate replies, 1 ranking, a final debate of the
    # ranker's 2: 4 + 4 + 1 + 2 = 11
    assert len(model.calls) == ctx.usage.calls == 4 + 4 + 1 + 2 == 11
    meta = solution.metadata
    assert meta["variant"] == "math" and meta["picked"] == ["agent_3", "agent_1"]
    assert meta["activated"] == [["agent_1", "agent_2", "agent_3", "agent_4"]] * 2 + [
        ["agent_3", "agent_1"]
    ]
    by_round: dict[int, list[ChatRequest]] = {}
    for request in model.requests:
        by_round.setdefault(round_of(request), []).append(request)
    everyone = ["agent_1", "agent_2", "agent_3", "agent_4"]
    for request in by_round[1]:  # every agent sees every round-0 solution, in agent order
        assert seen(request) == everyone and request.response_format is None
        assert "rate" not in last_user_message(request)
    (ranker,) = [q for q in by_round[2] if agent_of(q) == "ranker"]
    assert seen(ranker) == everyone  # in agent order, not shuffled
    final = [q for q in by_round[2] if agent_of(q) != "ranker"]
    assert sorted(agent_of(q) for q in final) == ["agent_1", "agent_3"]
    assert all(seen(q) == ["agent_3", "agent_1"] for q in final)  # the picks, in pick order
    assert {
        c.request.messages[0]["content"] for c in model.calls if agent_of(c.request) != "ranker"
    } == {DEBATE_SYSTEM}
    assert solution.answer == "agent_3@2: The answer is \\boxed{3}."  # no majority: first pick


async def test_maslab_dylan_math_stops_when_the_ranker_s_two_agree():
    answers = {"agent_1": 5, "agent_2": 6, "agent_3": 5, "agent_4": 8}
    model = ScriptedModel(
        debate_script(answer=lambda agent, r: answers[agent], pick=choose("agent_1", "agent_3"))
    )
    solution, ctx = await run(model, task=MATH_TASK, preset="maslab")
    assert ctx.usage.calls == 4 + 4 + 1  # the picks agree: no final debate
    meta = solution.metadata
    assert (
        meta["stopped_early"]
        and meta["rounds_run"] == 2
        and meta["picked"] == ["agent_1", "agent_3"]
    )
    assert solution.answer == "agent_1@1: The answer is \\boxed{5}."
    # the preset on a number task runs the network
    model = ScriptedModel(script(answer=distinct))
    solution, _ = await run(model, preset="maslab")
    assert solution.metadata["variant"] == "network" and "picked" not in solution.metadata


async def test_maslab_dylan_math_prompts_do_not_depend_on_completion_order():
    def later_last(request: ChatRequest) -> float:
        agent = agent_of(request)
        return 0.0 if agent == "ranker" else 0.003 * index_of(agent)

    def later_first(request: ChatRequest) -> float:
        agent = agent_of(request)
        return 0.0 if agent == "ranker" else 0.003 * (5 - index_of(agent))

    outcomes = []
    for latency in (later_last, later_first):
        model = ScriptedModel(debate_script(), latency=latency)
        solution, ctx = await run(model, task=MATH_TASK, variant="math")
        calls = sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records)
        outcomes.append((calls, solution.answer, solution.metadata["importance"]))
    assert outcomes[0] == outcomes[1] and len(outcomes[0][0]) == 11


async def test_maslab_dylan_math_budget_stop_returns_the_latest_majority():
    answers = {"agent_1": 5, "agent_2": 5, "agent_3": 7, "agent_4": 9}
    model = ScriptedModel(debate_script(answer=lambda agent, r: answers[agent] if r == 0 else 1))
    ctx = Context(model, budget=Budget(max_calls=5))  # round 0 done, round 1 cut short
    solution = await DyLAN(variant="math").run_sample(MATH_TASK, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert solution.answer == "agent_1@0: The answer is \\boxed{5}."


def test_the_maslab_preset_runs_on_the_command_line(tmp_path):
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "dylan", "--benchmark", "arith", "--model", "scripted:echo",
         "--config", "preset=maslab", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # echoed round-0 replies are the same text: the text consensus after three
    assert len(results) == 2 and all(r["usage"]["calls"] == 3 for r in results)
