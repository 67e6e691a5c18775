"""The spatial-temporal communication graph that ``agentprune``, ``agentdropout`` and
``g_designer`` learn, run and train (no method of its own).

N agents (``agent_1`` .. ``agent_N``, all alike) talk for R rounds, then a decision node
answers. A realised graph is a :class:`Plan`: for each round the agents that run in it, its
*spatial* edges (``u -> v``: v reads u's answer of the same round) and its *temporal* edges
(``u -> v``: v reads u's answer of the round before). The spatial candidates are the forward
pairs in agent order (every subset is a DAG, run layer by layer with
:func:`maslab.kit.layers.run_layers`); the temporal candidates are all N² ordered pairs,
``v -> v`` being an agent's own previous answer.

:func:`run_plan` runs a plan; :func:`reinforce_batches` is the REINFORCE loop the three learn
with; :class:`GraphDesigner` is their base class, :class:`TiedDesigner` that of the two whose
edge logits are the same in every round. Pieces like these exist inside
``gptswarm`` (its batch loop) and ``graph_grpo`` (multi-round execution), private to those
methods, so they are written here once for the three designers.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, ClassVar, Final, Literal

import numpy as np
from pydantic import Field

from maslab.bench.evaluation import Scorer
from maslab.core.context import Context
from maslab.core.method import FiniteNumber, Method, MethodConfig, MethodState
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import decide, propose_vote
from maslab.kit.layers import run_layers
from maslab.kit.learning import (
    Edge,
    EdgePolicy,
    EdgePolicyState,
    EdgeStep,
    mean_baseline,
    policy_rng,
)

AGENT: Final = "agent"
AGGREGATOR: Final = "aggregator"
DECISION: Final = "decision"
"""The decision node's name in a solve's topology (the ``aggregator`` agent makes its call)."""

Decision = Literal["llm", "majority"]


def spatial_candidates(names: Sequence[str]) -> list[Edge]:
    """``u -> v`` for every u before v in agent order."""
    return [(u, v) for i, u in enumerate(names) for v in names[i + 1 :]]


def temporal_candidates(names: Sequence[str]) -> list[Edge]:
    """``u -> v`` for every ordered pair, ``v -> v`` included."""
    return [(u, v) for u in names for v in names]


def edge_policy(
    edges: Sequence[Edge], names: Sequence[str], probability: float, features: int = 0
) -> EdgePolicy:
    """A policy over ``edges`` between the agents ``names``, each edge at ``probability``."""
    logit = math.log(probability / (1 - probability))
    policy = EdgePolicy(edges, [logit] * len(edges), features)
    policy.nodes = list(names)
    return policy


def fitted_policy(
    state: EdgePolicyState, edges: Sequence[Edge], names: Sequence[str], features: int = 0
) -> EdgePolicy:
    """The policy ``state`` holds, checked to be over ``edges`` between ``names`` with
    ``features`` query features; a ValueError says what differs."""
    if state.edges != list(edges) or state.nodes != list(names):
        raise ValueError(f"its edges are not those of {len(names)} agents")
    if state.features != features:
        raise ValueError(f"its edges take {state.features} query features, not {features}")
    return EdgePolicy.from_state(state)


def keep_top(
    policy: EdgePolicy, edges: Sequence[Edge], cut: float, features: Sequence[float] = ()
) -> list[Edge]:
    """One-shot magnitude pruning: of ``edges`` (candidates of ``policy``), cut the
    ``round(cut · len(edges))`` least probable (on a tie the later candidate goes first) and
    keep the others, in candidate order."""
    probs = policy.probabilities(features)
    ranked = sorted(range(len(edges)), key=lambda i: (probs[policy.index[edges[i]]], -i))
    gone = set(ranked[: math.floor(cut * len(edges) + 0.5)])
    return [edge for i, edge in enumerate(edges) if i not in gone]


def taken(steps: Iterable[EdgeStep]) -> list[Edge]:
    """The edges a draw took."""
    return [step.edge for step in steps if step.taken]


# -- the graph ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    """One round: the agents that run (agent order), its spatial and its temporal edges."""

    agents: tuple[str, ...]
    spatial: tuple[Edge, ...] = ()
    temporal: tuple[Edge, ...] = ()


@dataclass(frozen=True)
class Plan:
    """A realised spatial-temporal graph: every agent's name (agent order) and R rounds."""

    names: tuple[str, ...]
    rounds: tuple[Round, ...]

    @classmethod
    def build(
        cls,
        names: Sequence[str],
        agents: Sequence[Sequence[str]],
        spatial: Sequence[Iterable[Edge]],
        temporal: Sequence[Iterable[Edge]],
    ) -> Plan:
        """The plan whose round r runs ``agents[r]`` with the edges of ``spatial[r]`` between
        them and those of ``temporal[r]`` from an agent of round r-1 (none in round 0)."""
        rounds: list[Round] = []
        for r, running in enumerate(agents):
            now = [n for n in names if n in running]
            before = rounds[-1].agents if rounds else ()
            rounds.append(
                Round(
                    tuple(now),
                    tuple((u, v) for u, v in spatial[r] if u in now and v in now),
                    tuple((u, v) for u, v in temporal[r] if r and u in before and v in now),
                )
            )
        return cls(tuple(names), tuple(rounds))

    @classmethod
    def uniform(
        cls, names: Sequence[str], rounds: int, spatial: Sequence[Edge], temporal: Sequence[Edge]
    ) -> Plan:
        """Every agent in every round, the same edges in each."""
        return cls.build(names, [names] * rounds, [spatial] * rounds, [temporal] * rounds)

    def calls(self, decision: Decision) -> int:
        """The calls a solve on this plan makes: Σ agents per round, +1 for an LLM decision."""
        return sum(len(r.agents) for r in self.rounds) + (decision == "llm")

    def describe(self) -> list[dict[str, Any]]:
        """Each round's agents and edges as JSON data (a solution's metadata)."""
        return [
            {
                "agents": list(r.agents),
                "spatial": [list(e) for e in r.spatial],
                "temporal": [list(e) for e in r.temporal],
            }
            for r in self.rounds
        ]

    def topology(self, name: str) -> Topology:
        """Who read whom over the rounds: the agents that ran and the decision node; an edge's
        ``spatial`` and ``temporal`` attributes list the rounds it carried a message in."""
        rounds: dict[Edge, dict[str, list[int]]] = {}
        for r, step in enumerate(self.rounds):
            for kind, edges in (("spatial", step.spatial), ("temporal", step.temporal)):
                for edge in edges:
                    rounds.setdefault(edge, {}).setdefault(kind, []).append(r)
        topology = Topology(name=name)
        ran = {n for step in self.rounds for n in step.agents}
        for node in self.names:
            if node in ran:
                topology.add_node(node)
        topology.add_node(DECISION)
        for (u, v), attrs in rounds.items():
            topology.add_edge(u, v, **attrs)
        for node in self.rounds[-1].agents:
            topology.add_edge(node, DECISION)
        return topology


# -- execution ------------------------------------------------------------------------------


def agent_prompt(
    task: Task, name: str, before: Sequence[tuple[str, str]], now: Sequence[tuple[str, str]]
) -> str:
    """The task, the previous round's answers ``name`` reads (its own marked), then this
    round's answers of its spatial predecessors, each as (agent, answer) in agent order."""
    parts = [task.prompt()]
    if before:
        blocks = "\n\n".join(
            f"--- {u} ({'you, ' if u == name else ''}previous round) ---\n{text.strip()}"
            for u, text in before
        )
        parts.append(f"Answers of the previous round (any of them may be wrong):\n\n{blocks}")
    if now:
        blocks = "\n\n".join(f"--- {u} ---\n{text.strip()}" for u, text in now)
        parts.append(f"Teammates who answered before you this round (may be wrong):\n\n{blocks}")
    if before or now:
        parts.append(
            "Check the work above as you solve the problem yourself, step by step: keep what "
            "is right, correct what is wrong, then give your final answer."
        )
    else:
        parts.append("Work it out step by step, then give your final answer.")
    return "\n\n".join(parts)


async def run_plan(task: Task, ctx: Context, plan: Plan, decision: Decision) -> Solution:
    """Run ``plan``: round by round, each round's agents layer by layer (a layer
    concurrently), then the decision over the last round's answers (agent order).

    After every layer the majority vote over each agent's latest answer is proposed (ties:
    the earliest agent), what a budget stop returns."""
    agents = {n: ctx.agent(n, role=AGENT) for n in plan.names}
    latest: dict[str, str] = {}
    before: dict[str, str] = {}

    def runner(r: int, heard: dict[str, list[tuple[str, str]]]) -> Callable[..., Awaitable[str]]:
        async def turn(name: str, depth: int, now: list[tuple[str, str]]) -> str:
            prompt = agent_prompt(task, name, heard[name], now)
            return (await agents[name].reply(prompt, round=r, remember=False)).content

        return turn

    for r, step in enumerate(plan.rounds):
        graph = Topology(name=f"round {r}")
        for node in step.agents:
            graph.add_node(node)
        for u, v in step.spatial:
            graph.add_edge(u, v)
        heard = {
            v: [(u, before[u]) for u in plan.names if (u, v) in step.temporal and u in before]
            for v in step.agents
        }
        now: dict[str, str] = {}
        async for _, replies in run_layers(graph, runner(r, heard)):
            now.update(replies)
            latest.update(replies)
            propose_vote(ctx, task, [latest[n] for n in plan.names if n in latest], round=r)
        before = now
    final = [before[n] for n in plan.names if n in before]
    return await decide(ctx, task, final, decision, round=len(plan.rounds))


# -- learning -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Draw:
    """A graph sampled for one validation task, and how to reinforce what drew it."""

    plan: Plan
    learn: Callable[[float], None]
    """One REINFORCE step of every draw behind ``plan``, with the given advantage."""


async def reinforce_batches(
    tasks: Sequence[Task],
    ctx: Context,
    draw: Callable[[Task], Draw],
    *,
    iterations: int,
    batch_size: int,
    decision: Decision,
    evaluator: str | None,
) -> list[float]:
    """REINFORCE over ``iterations`` batches of ``batch_size`` tasks (cycling through
    ``tasks``): one draw per task, in task order before any call; the batch's graphs run
    concurrently; each is scored by the task's evaluator (or ``evaluator``) and learns with
    its reward minus the batch mean. Returns each batch's mean reward."""
    accuracy: list[float] = []
    async with Scorer(evaluator) as scorer:
        for i in range(iterations):
            batch = [tasks[(i * batch_size + k) % len(tasks)] for k in range(batch_size)]
            draws = [draw(task) for task in batch]
            solutions = await asyncio.gather(
                *(run_plan(t, ctx, d.plan, decision) for t, d in zip(batch, draws, strict=True))
            )
            rewards = [
                (await scorer.score(task, solution.answer, ctx=ctx)).value
                for task, solution in zip(batch, solutions, strict=True)
            ]
            for sampled, advantage in zip(draws, mean_baseline(rewards), strict=True):
                sampled.learn(float(advantage))
            accuracy.append(float(np.mean(rewards)))
    return accuracy


# -- the base class -------------------------------------------------------------------------


class DesignerConfig(MethodConfig):
    """The settings the three designers share."""

    agents: int = Field(4, ge=1, description="N: the agents, all alike")
    rounds: int = Field(1, ge=1, description="R: the rounds of talk before the decision")
    decision: Decision = Field(
        "llm",
        description="the decision node: one aggregator call over the last round's answers "
        "(`llm`, the papers' FinalRefer) or their majority vote (`majority`, no call)",
    )
    initial_probability: float = Field(
        0.5, gt=0, lt=1, description="every learned edge's probability before training"
    )
    learning_rate: float = Field(0.1, gt=0, description="the REINFORCE step size")
    evaluator: str | None = Field(
        None, description="the evaluator of the training rewards; None: by answer type"
    )


class GraphDesigner(Method):
    """What the three designers share: agents, roles, the untrained full graph, a solve on
    the graph :meth:`inference_plan` gives (the method's own)."""

    roles = (AGENT, AGGREGATOR)
    config: DesignerConfig

    def agent_names(self) -> tuple[str, ...]:
        return numbered(AGENT, self.config.agents)

    def full_plan(self) -> Plan:
        """Every agent in every round, every candidate edge: the graph before training."""
        names = self.agent_names()
        return Plan.uniform(
            names, self.config.rounds, spatial_candidates(names), temporal_candidates(names)
        )

    def inference_plan(self, task: Task) -> tuple[Plan, dict[str, Any]]:
        """The graph a solve of ``task`` runs, and what the solution's metadata says of it."""
        raise NotImplementedError

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """:meth:`train` on ``tasks`` with a generator seeded by the run seed (no task: no
        training, nothing learned)."""
        if tasks:
            await self.train(tasks, ctx, policy_rng(ctx.seed, self.name))

    async def train(self, tasks: Sequence[Task], ctx: Context, rng: np.random.Generator) -> None:
        """Learn from ``tasks`` (at least one), every draw from ``rng``."""
        raise NotImplementedError

    async def solve(self, task: Task, ctx: Context) -> Solution:
        plan, details = self.inference_plan(task)
        ctx.topology = plan.topology(self.name)
        solution = await run_plan(task, ctx, plan, self.config.decision)
        metadata = {**solution.metadata, **details, "graph": plan.describe()}
        return solution.model_copy(update={"metadata": metadata})

    async def reinforce(
        self,
        tasks: Sequence[Task],
        ctx: Context,
        draw: Callable[[Task], Draw],
        iterations: int,
        batch_size: int,
    ) -> list[float]:
        """:func:`reinforce_batches` with this config's decision and evaluator."""
        cfg = self.config
        return await reinforce_batches(
            tasks, ctx, draw, iterations=iterations, batch_size=batch_size,
            decision=cfg.decision, evaluator=cfg.evaluator,
        )  # fmt: skip


class TiedConfig(DesignerConfig):
    """The settings of a designer with one edge policy for all rounds."""

    iterations: int = Field(10, ge=1, description="REINFORCE steps in `optimize`")
    batch_size: int = Field(4, ge=1, description="validation tasks per step")


class TiedState(MethodState):
    """What a :class:`TiedDesigner` learns (a method's own state names its ``format``)."""

    format: str
    spatial: EdgePolicyState
    """The spatial edges' logits (and feature weights, if the policy takes the query's)."""
    temporal: EdgePolicyState
    accuracy: list[FiniteNumber]
    """The mean reward of each step's batch."""


class TiedDesigner(GraphDesigner):
    """A designer with one spatial and one temporal edge policy, the same in every round,
    learned by REINFORCE (:func:`reinforce_batches`): for each validation task a graph is
    drawn round by round from the policies (the spatial one given :meth:`features_of`),
    and each drawn edge's logit (and feature weights) takes the graph's advantage."""

    LearnedState: ClassVar[type[TiedState]]
    STATE_FORMAT: ClassVar[str]
    config: TiedConfig

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        names = self.agent_names()
        p = self.config.initial_probability
        self.spatial = edge_policy(spatial_candidates(names), names, p, self.feature_count())
        self.temporal = edge_policy(temporal_candidates(names), names, p)
        self.accuracy: list[float] | None = None
        """Each step's mean reward once optimised (or loaded); None: the full graph runs."""

    def feature_count(self) -> int:
        """How many query features the spatial edge logits take (none by default)."""
        return 0

    def features_of(self, task: Task) -> tuple[float, ...]:
        """The features of ``task`` the spatial edge logits take (none by default)."""
        return ()

    def kept(self, task: Task) -> tuple[list[Edge], list[Edge]]:
        """The spatial and the temporal edges a trained solve of ``task`` keeps."""
        raise NotImplementedError

    def about(self, task: Task) -> dict[str, Any]:
        """What a solution's metadata says of ``task`` besides its graph (nothing by default)."""
        return {}

    def inference_plan(self, task: Task) -> tuple[Plan, dict[str, Any]]:
        """Untrained: the full graph; trained: the :meth:`kept` edges in every round, and how
        many of each kind were ``cut``."""
        about = self.about(task)
        if self.accuracy is None:
            return self.full_plan(), {"optimized": False, **about}
        spatial, temporal = self.kept(task)
        plan = Plan.uniform(self.agent_names(), self.config.rounds, spatial, temporal)
        cut = {
            "spatial": len(self.spatial.edges) - len(spatial),
            "temporal": len(self.temporal.edges) - len(temporal),
        }
        return plan, {"optimized": True, "cut": cut, **about}

    async def train(self, tasks: Sequence[Task], ctx: Context, rng: np.random.Generator) -> None:
        """The edge policies' training by REINFORCE on ``tasks``."""
        cfg = self.config
        names = self.agent_names()

        def draw(task: Task) -> Draw:
            x = self.features_of(task)
            spatial = [self.spatial.sample(rng, features=x) for _ in range(cfg.rounds)]
            temporal = [self.temporal.sample(rng) if r else [] for r in range(cfg.rounds)]
            plan = Plan.build(
                names, [names] * cfg.rounds, list(map(taken, spatial)), list(map(taken, temporal))
            )

            def learn(advantage: float) -> None:
                self.spatial.reinforce(list(chain(*spatial)), advantage, cfg.learning_rate)
                self.temporal.reinforce(list(chain(*temporal)), advantage, cfg.learning_rate)

            return Draw(plan, learn)

        self.accuracy = await self.reinforce(tasks, ctx, draw, cfg.iterations, cfg.batch_size)

    def learned_state(self) -> TiedState | None:
        """The learned policies and the batch accuracies (None before ``optimize``)."""
        if self.accuracy is None:
            return None
        return self.LearnedState(
            format=self.STATE_FORMAT,
            spatial=self.spatial.state(),
            temporal=self.temporal.state(),
            accuracy=self.accuracy,
        )

    def load_learned_state(self, state: TiedState) -> None:
        names = self.agent_names()
        spatial = fitted_policy(
            state.spatial, spatial_candidates(names), names, self.feature_count()
        )
        temporal = fitted_policy(state.temporal, temporal_candidates(names), names)
        self.spatial, self.temporal = spatial, temporal
        self.accuracy = list(state.accuracy)
