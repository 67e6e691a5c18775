"""Scripted play shared by the tests of the three graph designers (agentprune, agentdropout,
g_designer): who each agent was shown in each round against what the solve's graph says, a
validation set where one agent is always right, and the checks every designer must pass
(budget stop, reordered latencies, model roles, garbage, ``maslab run``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from helpers import GOLD_TASK, agent_of, lines

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import Method
from maslab.core.task import Task
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.graph_designers.spacetime import GraphDesigner, TiedDesigner

BEFORE = re.compile(r"--- (agent_\d+) \((you, )?previous round\) ---")
NOW = re.compile(r"--- (agent_\d+) ---\n")
BLOCK = re.compile(r"--- (agent_\d+)[^\n]*---\n(.*)")
BOXED = re.compile(r"\\boxed\{([^}]*)\}")
DEV = get_benchmark("arith")().load("dev")[:4]
TEST = get_benchmark("arith")().load("test")[0]
WRONG = "-1"

View = tuple[list[str], list[str]]
"""Whose previous-round answers, then whose answers of this round, an agent was shown."""


def shown(prompt: str) -> View:
    return [m[1] for m in BEFORE.finditer(prompt)], NOW.findall(prompt)


def views(ctx: Context) -> dict[tuple[str, int], View]:
    """What every agent was shown in every round, from the sample's ledger."""
    return {
        (r.agent, r.round): shown(r.messages[-1]["content"])
        for r in ctx.ledger.records
        if r.agent.startswith("agent_")
    }


def expected_views(graph: Sequence[dict[str, Any]]) -> dict[tuple[str, int], View]:
    """What every agent must be shown under the solution's ``graph`` (its metadata): the
    temporal then the spatial predecessors of its round, in agent order."""
    out = {}
    for r, step in enumerate(graph):
        for agent in step["agents"]:
            before = sorted((u for u, v in step["temporal"] if v == agent), key=index)
            now = sorted((u for u, v in step["spatial"] if v == agent), key=index)
            out[(agent, r)] = (before, now)
    return out


def tagged(answer: Callable[[str], object] = lambda agent: 42) -> Callable[[ChatRequest], str]:
    """Agent a says 'a: The answer is <answer(a)>.'; the aggregator says 'DECIDED: ... 42.'"""
    return lambda q: (
        "DECIDED: The answer is 42." if agent_of(q) == "aggregator"
        else f"{agent_of(q)}: The answer is {answer(agent_of(q))}."
    )  # fmt: skip


def index(agent: str) -> int:
    """agent_k's k; 0 for the aggregator."""
    return int(agent.rsplit("_", 1)[1]) if agent.startswith("agent_") else 0


def gold_in(prompt: str) -> str:
    return next(t.gold or "" for t in [*DEV, TEST] if t.question in prompt)


def one_is_right(right: str = "agent_1") -> Callable[[ChatRequest], str]:
    """``right`` always answers the gold; another agent answers it only when shown an answer
    of ``right`` (this round or the previous one), else a wrong -1. The aggregator states the
    gold only if every answer it reads is the gold: a graph scores 1 when every agent of the
    last round reads ``right`` (or is it)."""

    def respond(request: ChatRequest) -> str:
        prompt = last_user_message(request)
        gold = gold_in(prompt)
        if agent_of(request) == "aggregator":
            answers = set(BOXED.findall(prompt)) - {"N"}  # N: the instruction's
            return f"Decided: \\boxed{{{gold if answers == {gold} else WRONG}}}"
        before, now = shown(prompt)
        if agent_of(request) == right or right in before or right in now:
            return f"Step by step: \\boxed{{{gold}}}"
        return f"I think \\boxed{{{WRONG}}}"

    return respond


async def solve(method: Method, model: ScriptedModel, task: Task = GOLD_TASK, **context: Any):
    ctx = Context(model, **context)
    return await method.solve(task, ctx), ctx


async def check_views_and_calls(method: Method, decision_calls: int) -> dict[str, Any]:
    """Solve with ``method``: the calls are Σ agents per round + ``decision_calls``, and every
    agent saw exactly what the solution's graph says; returns the solution's metadata."""
    model = ScriptedModel(tagged(index))
    solution, ctx = await solve(method, model)
    graph = solution.metadata["graph"]
    assert len(model.calls) == sum(len(s["agents"]) for s in graph) + decision_calls
    assert views(ctx) == expected_views(graph)
    for record in ctx.ledger.records:
        prompt = record.messages[-1]["content"]
        for match in BEFORE.finditer(prompt):  # an agent's own previous answer is marked
            assert bool(match[2]) == (match[1] == record.agent)
        for agent, text in BLOCK.findall(prompt):  # each block holds its agent's answer
            assert text == f"{agent}: The answer is {index(agent)}."
    assert ctx.topology is not None and "decision" in ctx.topology
    return solution.metadata


async def check_budget_stop(method: Method) -> None:
    """On the untrained full graph (a chain of layers), a budget of 3 calls stops after
    agents 1-3 answered 7, 42, 42: the vote over them is agent_2's 42."""
    model = ScriptedModel(tagged(lambda agent: 7 if agent == "agent_1" else 42))
    ctx = Context(model, budget=Budget(max_calls=3))
    solution = await method.run_sample(GOLD_TASK, ctx)
    assert ctx.budget_stop is not None and solution.metadata["budget"]
    assert len(model.calls) == 3 and solution.answer == "agent_2: The answer is 42."
    ctx = Context(ScriptedModel(tagged(lambda agent: 7 if agent == "agent_1" else 42)),
                  budget=Budget(max_calls=2))  # fmt: skip
    assert (await method.run_sample(GOLD_TASK, ctx)).answer == "agent_1: The answer is 7."


async def check_latency_independence(method: Method) -> None:
    """Two runs whose latencies reverse the finishing order of concurrent calls: the same
    prompts, rounds and answer (every agent answers differently, the vote picks the first)."""
    seen = []
    for latency in (
        lambda q: 0.002 * index(agent_of(q)),
        lambda q: 0.01 / (index(agent_of(q)) or 9),
    ):
        model = ScriptedModel(tagged(index), latency=latency)
        solution, ctx = await solve(method, model)
        seen.append(
            (sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records),
             solution.answer)
        )  # fmt: skip
    assert seen[0] == seen[1]
    assert any(a.started < b.finished and b.started < a.finished  # some calls overlapped
               for a, b in combinations(model.calls, 2))  # fmt: skip


def check_model_roles(method: Method, tmp_path: Path) -> None:
    """agent_2 on a model of its own, the aggregator on another: every call on its model."""
    b, d = tmp_path / "b.yaml", tmp_path / "d.yaml"
    b.write_text('".": "B says the answer is 41."\n')
    d.write_text('".": "The decision: 42."\n')
    on_b, on_d = f"scripted:{b}", f"scripted:{d}"
    model = ScriptedModel(tagged())
    roles = {"agent_2": on_b, "aggregator": on_d}
    outcome = method.run(GOLD_TASK, model, model_roles=roles)
    records = outcome.context.ledger.records
    assert outcome.answer == "The decision: 42."
    assert {r.agent for r in records if r.model == on_b} == {"agent_2"}
    assert [r.agent for r in records if r.model == on_d] == ["aggregator"]
    assert len(model.calls) == sum(r.model == model.name for r in records) > 0
    method.check_model_roles({"agent": "scripted:echo", "aggregator": "scripted:echo"})
    names = method.agent_names()
    method.check_model_roles({names[-1]: "scripted:echo"})
    with pytest.raises(Exception, match=f"no role or agent 'agent_{len(names) + 1}'"):
        method.check_model_roles({f"agent_{len(names) + 1}": "scripted:echo"})


def numbers_under(data: Any, key: str) -> list[float]:
    """Every number under a ``key`` anywhere in ``data`` (a learned state's JSON)."""
    if isinstance(data, dict):
        return [
            x for k, v in data.items() for x in (flat(v) if k == key else numbers_under(v, key))
        ]
    if isinstance(data, list):
        return [x for item in data for x in numbers_under(item, key)]
    return []


def flat(data: Any) -> list[float]:
    return [x for item in data for x in flat(item)] if isinstance(data, list) else [data]


async def check_garbage(method: Method, majority: Method) -> None:
    """Unreadable replies: the llm decision states the aggregator's reply, the vote (nothing
    to count) falls back to the first final answer; training on them scores 0 and moves no
    logit or weight from its start (probability 0.5: logit 0)."""
    garbage = ["", "{{{", "no number at all", "\\boxed{", "null", "\x00 ünïcödé"]

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        return "]]" if agent == "aggregator" else garbage[index(agent) % len(garbage)]

    solution, _ = await solve(method, ScriptedModel(respond))
    assert solution.answer == "]]"
    solution, _ = await solve(majority, ScriptedModel(respond))
    first = solution.metadata["graph"][-1]["agents"][0]
    assert solution.metadata["votes"] == {}
    assert solution.answer == garbage[index(first) % len(garbage)]
    assert majority.learned_state() is None
    await majority.optimize(DEV[:2], Context(ScriptedModel(respond), sample_id="optimize"))
    state = majority.dump_learned_state()
    assert state is not None
    accuracies = [x for k, v in state.items() if "accuracy" in k for x in v]
    assert accuracies and set(accuracies) == {0.0}
    assert set(numbers_under(state, "logits") + numbers_under(state, "weights")) <= {0.0}


def run(tmp_path: Path, method: str, *extra: str) -> tuple[int, Path]:
    out = tmp_path / "run"
    argv = ["run", "--method", method, "--model", "scripted:echo", "--out", str(out),
            "--no-cache", "--quiet", *extra]  # fmt: skip
    return main(argv), out


def gsm8k_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """gsm8k offline: four train tasks in the data cache; returns a file of two test tasks."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(cache))
    train = cache / "data" / "gsm8k" / "train.jsonl"
    train.parent.mkdir(parents=True)
    train.write_text("".join(
        json.dumps({"question": f"Ann has {n} apples and buys {n} more. How many now?",
                    "answer": f"{n} + {n} = {2 * n}\n#### {2 * n}"}) + "\n"
        for n in range(3, 7)
    ))  # fmt: skip
    data = tmp_path / "test.jsonl"
    data.write_text("".join(
        json.dumps({"question": f"Bo reads {n} pages a day for 2 days. How many pages?",
                    "answer": f"#### {2 * n}"}) + "\n"
        for n in (10, 20)
    ))  # fmt: skip
    return data


class DesignerChecks:
    """What every designer must do; a test file subclasses it (``Test...``) for its method."""

    method: ClassVar[type[GraphDesigner]]
    untrained_calls: ClassVar[int]
    """A solve's calls with the default config, untrained."""
    cheap: ClassVar[dict[str, int]]
    """A config whose ``optimize`` costs ``cheap_calls`` on four tasks."""
    cheap_calls: ClassVar[int]
    learner: ClassVar[dict[str, object]]
    """A config that learns something in a few steps from :func:`one_is_right`."""

    def concurrent(self) -> GraphDesigner:
        """A trained method whose graph has a layer of several agents."""
        raise NotImplementedError

    def randomise(self, method: GraphDesigner, rng: np.random.Generator) -> GraphDesigner:
        """``method`` as if trained, its logits (and weights) drawn from ``rng``."""
        raise NotImplementedError

    def team(self, method: GraphDesigner, trained: bool) -> int:
        """How many agents run in each round."""
        return method.config.agents

    @pytest.mark.parametrize(
        ("agents", "rounds", "decision"),
        [(4, 1, "llm"), (3, 2, "majority"), (2, 3, "llm"), (1, 2, "majority"), (5, 2, "llm")],
    )
    @pytest.mark.parametrize("trained", [False, True])
    async def test_calls_are_the_agents_run_plus_the_decision_and_views_follow_the_graph(
        self, agents, rounds, decision, trained
    ):
        method = self.method(agents=agents, rounds=rounds, decision=decision)
        if trained:  # some learned graph, whatever it is
            self.randomise(method, np.random.default_rng(agents * 10 + rounds))
        meta = await check_views_and_calls(method, int(decision == "llm"))
        assert [len(step["agents"]) for step in meta["graph"]] == [
            self.team(method, trained)
        ] * rounds
        assert meta["optimized"] is trained

    async def test_a_budget_stop_returns_the_vote_so_far(self):
        await check_budget_stop(self.method())

    async def test_prompts_do_not_depend_on_completion_order(self):
        await check_latency_independence(self.concurrent())

    def test_model_roles_route_an_agent_and_the_aggregator(self, tmp_path):
        check_model_roles(self.method(rounds=2), tmp_path)

    async def test_garbage_replies_never_crash_and_teach_nothing(self):
        await check_garbage(
            self.method(**self.cheap), self.method(decision="majority", **self.cheap)
        )

    async def test_optimisation_is_seeded_by_the_run_seed(self):
        states = []
        for seed in (5, 5, 6):
            method = self.method(**self.learner)
            await method.optimize(DEV, Context(ScriptedModel(one_is_right()), seed=seed))
            states.append(method.dump_learned_state())
        assert states[0] == states[1] != states[2]
        method, model = self.method(), ScriptedModel(one_is_right())
        await method.optimize([], Context(model))
        assert model.calls == [] and method.learned_state() is None

    def test_maslab_run_untrained(self, tmp_path):
        code, out = run(tmp_path, self.method.name, "--benchmark", "arith", "--limit", "2")
        assert code == 0
        results = lines(out / "results.jsonl")
        assert len(results) == 2
        for record in results:
            assert record["usage"]["calls"] == self.untrained_calls
            assert record["metadata"]["optimized"] is False

    def test_maslab_run_optimises_on_gsm8k_then_runs_what_it_learned(self, tmp_path, monkeypatch):
        data = gsm8k_files(tmp_path, monkeypatch)
        config = [x for key, value in self.cheap.items() for x in ("--config", f"{key}={value}")]
        args = ["--benchmark", "gsm8k", "--data", str(data), "--optimize-on", "train", *config]
        code, out = run(tmp_path, self.method.name, *args)
        assert code == 0
        (attempt,) = lines(out / "optimize.jsonl")
        assert attempt["status"] == "ok" and attempt["usage"]["calls"] == self.cheap_calls
        state = json.loads((out / "learned_state.json").read_text())["state"]
        learned = self.method(**self.cheap)
        learned.restore_learned_state(state, "learned_state.json")
        assert learned.dump_learned_state() == state
        tasks = {t.id: t for t in get_benchmark("gsm8k")().load(data=data)}
        results = lines(out / "results.jsonl")
        assert len(results) == 2
        for record in results:
            plan, details = learned.inference_plan(tasks[record["task_id"]])
            assert details["optimized"] and record["usage"]["calls"] == plan.calls("llm")
            assert record["metadata"] == {**record["metadata"], **details, "graph": plan.describe()}


class TiedChecks(DesignerChecks):
    """:class:`DesignerChecks` for agentprune and g_designer, whose defaults agree (N = 4,
    R = 1, 10 steps of 4 tasks) and whose edge logits are the same in every round."""

    untrained_calls = 4 + 1
    cheap: ClassVar = {"iterations": 2}
    cheap_calls = 2 * 4 * 5  # iterations · batch_size · (N·R + d)
    learner: ClassVar = {"agents": 5, "iterations": 3}

    def randomise(self, method: GraphDesigner, rng: np.random.Generator) -> GraphDesigner:
        assert isinstance(method, TiedDesigner)
        method.spatial.logits[:] = rng.normal(size=len(method.spatial.edges))
        method.spatial.weights[:] = rng.normal(size=method.spatial.weights.shape)
        method.temporal.logits[:] = rng.normal(size=len(method.temporal.edges))
        method.accuracy = [0.5]
        return method
