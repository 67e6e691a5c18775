"""A budget stop scores each method's best answer so far (``ctx.propose``), not its last message.

Every test stops a method midway with a ``max_calls`` budget and runs it the way the runner
does (``Method.run_sample``); the scripted answers make the expected answer unambiguous.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence

import pytest
from helpers import TASK, agent_of

from maslab.benchmarks.collab_maze import CollabMaze, format_route
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Solution, Task
from maslab.evaluators.collab_maze import parse_route
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest


def per_agent(replies: Mapping[str, Sequence[str]]) -> Callable[[ChatRequest], str]:
    """Each agent's n-th call gets ``replies[agent][n]``."""
    queues = {agent: iter(texts) for agent, texts in replies.items()}
    return lambda request: next(queues[agent_of(request)])


async def stopped(
    name: str, model: ScriptedModel, max_calls: int, task: Task = TASK, **config: object
) -> tuple[Solution, Context]:
    """Run ``name`` under a call budget; check the stop was recorded and reported."""
    ctx = Context(model, budget=Budget(max_calls=max_calls))
    solution = await get_method(name)(**config).run_sample(task, ctx)
    assert ctx.budget_stop is not None and ctx.budget_stop.kind == "calls"
    assert solution.metadata["budget"] == str(ctx.budget_stop)
    assert len(model.calls) == ctx.usage.calls == max_calls
    return solution, ctx


def last_message(ctx: Context) -> str:
    return ctx.transcript.messages[-1].content


# --- single-call methods --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["vanilla", "cot"])
async def test_single_call_methods_stopped_before_their_call_answer_nothing(name):
    solution, ctx = await stopped(name, ScriptedModel(["The answer is 42."]), max_calls=0)
    assert solution.answer == "" and len(ctx.transcript) == 0


# --- voting methods -------------------------------------------------------------------------


async def test_self_consistency_votes_over_the_completed_samples_in_sample_order():
    # k=5, 3 calls allowed; they finish in the order 3, 1, 2, the last during the settling
    replies = {
        "sample_1": ["One: the answer is 42."],
        "sample_2": ["The answer is 7."],
        "sample_3": ["Three: the answer is 42."],
    }
    latency = {"sample_1": 0.02, "sample_2": 0.05, "sample_3": 0.0}
    model = ScriptedModel(per_agent(replies), latency=lambda r: latency[agent_of(r)])
    solution, ctx = await stopped("self_consistency", model, max_calls=3, k=5)
    # sample order gives sample_1's reply; completion order would have given sample_3's
    assert solution.answer == "One: the answer is 42."
    assert solution.metadata["samples"] == 3
    assert solution.metadata["votes"] == {"42": 2, "7": 1}
    assert last_message(ctx) == "The answer is 7."


async def test_llm_debate_scores_the_last_complete_rounds_vote_not_a_partial_round():
    replies = {
        "debater_1": ["The answer is 7.", "Round 1: the answer is 9."],
        "debater_2": ["Two: the answer is 42."],
        "debater_3": ["Three: the answer is 42."],
    }
    model = ScriptedModel(per_agent(replies))
    solution, ctx = await stopped("llm_debate", model, max_calls=4, agents=3, rounds=2)
    assert solution.answer == "Two: the answer is 42."
    assert solution.metadata["round"] == 0 and solution.metadata["votes"] == {"7": 1, "42": 2}
    assert last_message(ctx) == "Round 1: the answer is 9."  # the lone round-1 reply


async def test_exchange_of_thought_scores_the_vote_of_the_latest_complete_round():
    replies = {
        "Kitty": ["The answer is 7.", "The answer is 5.", "Round 2: the answer is 3."],
        "Ben": ["The answer is 8.", "Ben: the answer is 42."],
        "Peter": ["The answer is 9.", "Peter: the answer is 42."],
    }
    model = ScriptedModel(per_agent(replies))
    solution, ctx = await stopped("exchange_of_thought", model, max_calls=7)
    assert solution.answer == "Ben: the answer is 42."
    assert solution.metadata["exchange_rounds"] == 1
    assert last_message(ctx) == "Round 2: the answer is 3."


# --- MAD ------------------------------------------------------------------------------------

NO_VERDICT = json.dumps({"preference": "no", "supported_side": "", "reason": "", "answer": ""})


def mad_model() -> ScriptedModel:
    """Numbered debater arguments, a moderator who never decides, a judge listing candidates."""
    counter = itertools.count(1)

    def respond(request: ChatRequest) -> str:
        prompt = last_user_message(request)
        if "of the debate is over" in prompt:
            return NO_VERDICT
        if "candidate answers" in prompt:
            return "Candidates: 1 and 2."
        n = next(counter)
        return f"argument-{n}: The answer is {n}."

    return ScriptedModel(respond)


@pytest.mark.parametrize(
    ("max_rounds", "max_calls", "argument", "side"),
    [
        (3, 2, 2, "negative"),  # stopped at the moderator
        (3, 3, 2, "negative"),  # stopped after the moderator's verdict
        (3, 4, 3, "affirmative"),  # stopped in round 2, after the affirmative spoke
        (1, 4, 2, "negative"),  # stopped at the judge's ruling
    ],
)
async def test_mad_scores_the_latest_debater_argument(max_rounds, max_calls, argument, side):
    solution, ctx = await stopped("mad", mad_model(), max_calls, max_rounds=max_rounds)
    assert solution.answer == f"argument-{argument}: The answer is {argument}."
    assert solution.metadata["side"] == side
    if max_calls == 3:
        assert json.loads(last_message(ctx)) == json.loads(NO_VERDICT)


# --- MacNet ---------------------------------------------------------------------------------


def signed() -> Callable[[ChatRequest], str]:
    """Every reply names its agent and is unique."""
    counter = itertools.count(1)
    return lambda request: f"{agent_of(request)} #{next(counter)}: The answer is 42."


def reply_of(ctx: Context, agent: str) -> str:
    (record,) = [r for r in ctx.ledger.records if r.agent == agent]
    assert record.response is not None
    return record.response


async def test_macnet_scores_the_latest_artifact_not_the_critique_after_it():
    # chain: draft node_0, critic 0->1, node_1 rewrites, critic 1->2, then the budget stops
    solution, ctx = await stopped("macnet", ScriptedModel(signed()), max_calls=4, topology="chain")
    assert solution.answer == reply_of(ctx, "node_1") and solution.metadata["node"] == "node_1"
    assert ctx.transcript.messages[-1].kind == "critique"


async def test_macnet_artifact_finished_while_the_sample_settles_is_scored():
    # tree: node_0 -> node_1, node_2; node_1's rewrite is in flight when node_2's is refused
    latency = {"critic:node_0->node_2": 0.05, "node_1": 0.1}
    model = ScriptedModel(signed(), latency=lambda r: latency.get(agent_of(r), 0.0))
    solution, ctx = await stopped("macnet", model, max_calls=4, topology="tree")
    assert solution.answer == reply_of(ctx, "node_1")


async def test_macnet_prefers_a_sinks_artifact_to_a_later_non_sinks():
    # seed 37 on 4 agents: node_0 -> node_1 (a sink), node_0 -> node_2 -> node_3
    model = ScriptedModel(signed())
    solution, ctx = await stopped("macnet", model, max_calls=5, agents=4, seed=37)
    edges = {tuple(edge) for edge in ctx.topology.edges}
    assert edges == {("node_0", "node_1"), ("node_0", "node_2"), ("node_2", "node_3")}
    assert {r.agent for r in ctx.ledger.records} >= {"node_1", "node_2"}
    assert solution.answer == reply_of(ctx, "node_1")


# --- hierarchies ----------------------------------------------------------------------------


def action(name: str, **arguments: object) -> str:
    return json.dumps({"thought": "", "action": name, "arguments": arguments})


async def test_conductor_scores_the_latest_report_and_skips_error_observations():
    replies = {
        "planner": [action("analyst", task="Compute 6 * 7."), action("browser", task="search")],
        "analyst": ["Report: the answer is 42."],
    }
    solution, ctx = await stopped("conductor", ScriptedModel(per_agent(replies)), max_calls=3)
    assert solution.answer == "Report: the answer is 42."
    assert solution.metadata["source"] == "analyst"
    assert last_message(ctx).startswith("error: unknown tool 'browser'")


async def test_planner_executor_scores_the_latest_observation():
    plan = json.dumps({"steps": ["Add 2 and 3.", "Multiply by 4.", "Subtract 1."]})
    calls = [json.dumps({"function": f, "arguments": {"a": a, "b": b}})
             for f, a, b in (("add", 2, 3), ("multiply", 5, 4))]  # fmt: skip
    solution, _ = await stopped("planner_executor", ScriptedModel([plan, *calls]), max_calls=3)
    assert solution.answer == "20" and solution.metadata["step"] == 2


# --- GoAgent --------------------------------------------------------------------------------

GOAGENT_POOL = {
    "groups": [
        {"name": "alpha", "roles": ["a1", "a2"], "topology": "chain"},
        {"name": "beta", "roles": ["hub", "x", "y"], "topology": "star"},
    ]
}


async def test_goagent_votes_over_every_agents_latest_output():
    replies = {
        "goagent pool:math word problems": [json.dumps(GOAGENT_POOL)],  # a run-wide stream
        "selector": [json.dumps({"groups": ["alpha", "beta"], "edges": [["alpha", "beta"]]})],
        "alpha:a1": ["The answer is 1.", "a1 again: the answer is 42."],
        "alpha:a2": ["The answer is 2."],
        "beta:hub": ["hub: the answer is 42."],
        "beta:x": ["The answer is 3."],
        "beta:y": ["The answer is 4."],
    }
    # pool, selector, round 0 (five agents), then round 1 stops after alpha:a1
    model = ScriptedModel(per_agent(replies))
    solution, ctx = await stopped("goagent", model, max_calls=8, rounds=2)
    # a1's round-1 output joins the hub's answer; without it the tie would go to beta:y
    assert solution.answer == "hub: the answer is 42."
    assert solution.metadata["round"] == 1
    assert last_message(ctx) == "a1 again: the answer is 42."


# --- collaborative maze ---------------------------------------------------------------------


def maze_task() -> tuple[Task, list[str]]:
    task = CollabMaze().load(limit=1)[0]
    route = parse_route(task.gold or "")
    assert route and len(route) >= 3  # the goal is not reached within the budgets below
    return task, route


def agreeing(moves: Sequence[str]) -> list[str]:
    """Each move proposed by one agent and confirmed by the other."""
    return [f"Let's go {m}.\nMOVE: {m}" for m in moves for _ in range(2)]


async def test_collab_pair_answers_its_route_so_far_and_the_stop_is_recorded():
    task, route = maze_task()
    model = ScriptedModel(agreeing(route))
    solution, _ = await stopped("collab_pair", model, max_calls=3, task=task)
    assert solution.answer == format_route(route[:1])
    assert (solution.metadata["ended"], solution.metadata["turns"]) == ("budget", 3)


@pytest.mark.parametrize("mode", ["solo_full", "solo_distributed"])
async def test_collab_pair_solo_scores_the_first_route_when_the_review_is_stopped(mode):
    task, route = maze_task()
    first = format_route(route)
    solution, _ = await stopped("collab_pair", ScriptedModel([first]), 1, task=task, mode=mode)
    assert solution.answer == first


@pytest.mark.parametrize("max_calls", [1, 5])
async def test_relay_answers_its_route_so_far_before_or_after_the_swap(max_calls):
    task, route = maze_task()
    model = ScriptedModel(agreeing(route))
    solution, _ = await stopped("relay", model, max_calls, task=task, swap_after=2)
    assert solution.answer == format_route(route[: max_calls // 2])
    assert solution.metadata["turns"] == max_calls
