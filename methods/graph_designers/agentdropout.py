"""AgentDropout: per-round agent and edge dropout on a spatial-temporal communication graph.

Wang, Wang, Liu, Ding, Zhang, Liu, Zhang. "AgentDropout: Dynamic Agent Elimination for
Token-Efficient and High-Performance LLM-Based Multi-Agent Collaboration". arXiv:2503.18891
(ACL 2025). Code: github.com/wangzx1219/AgentDropout.

Algorithm (N agents, R rounds, a decision node; the graph of
:mod:`maslab.methods.graph_designers.spacetime`: spatial candidates ``agent_i -> agent_j``
for i < j within a round, temporal candidates every ordered pair from round r-1 to round r):

1. Node dropout (``optimize``, first stage). Each round r has learnable node logits, a
   softmax over which agent to drop (:class:`maslab.kit.learning.ChoicePolicy`, one slot per
   round). ``node_iterations`` steps, each on the next ``node_batch_size`` validation tasks
   (cycling): for each task and round, k = round(node_dropout · N) (at most N - 1) agents are
   drawn to sit the round out, one after the other without replacement; the rest run on every
   candidate edge between them; the graph's score (the task's evaluator) minus the batch mean
   is the REINFORCE advantage of the draws (``learning_rate``). Then, in each round, the k
   agents with the highest drop probability are dropped (ties: the later agent); the others
   are that round's team. With k = 0 the stage is skipped.
2. Edge dropout (second stage). Every round has its own spatial edge logits and every round
   after the first its own temporal ones (:class:`maslab.kit.learning.EdgePolicy`, initial
   probability 0.5). ``edge_iterations`` steps of ``edge_batch_size`` tasks: a graph is drawn
   from the probabilities of the edges between each round's team (node dropout in force),
   run, scored, and every drawn logit takes a REINFORCE step (mean baseline). Then, in each
   round and for each kind apart, the ``round(edge_dropout · count)`` least probable of the
   edges between the teams are dropped (ties: the later candidate).
3. Inference: round r runs its team on its kept edges: agent v reads the task, the round r-1
   answers of its temporal predecessors (its own if ``v -> v`` is kept) and the round r
   answers of its spatial predecessors (agent order); a layer runs concurrently. The decision
   node (``decision="llm"``: one aggregator call, the paper's FinalRefer; ``"majority"``: a
   vote, no call) reads the last round's answers.

Draws come from a generator seeded by the run seed. Before optimisation (or without a learned
state) the graph is the full one: every agent in every round, every candidate edge.

LLM calls (solve): Σ_r K_r + d, K_r the agents of round r (N - k once optimised, N before),
d = 1 with ``decision="llm"`` else 0 (default optimised (5 - 1)·2 + 1 = 9; untrained 11).
``optimize``: (node_iterations · node_batch_size, none if k = 0, + edge_iterations ·
edge_batch_size) · ((N - k)·R + d) (default (2·20 + 4·10) · 9 = 720), plus the evaluator's
calls if it asks a model.

Budget stop: the majority vote over every agent's latest answer after the last complete
layer (ties: the earliest agent).

Defaults, from the official code (``experiments/run_gsm8k.py``, ``graph.py`` and the README's
command): N = 5, R = 2, one agent dropped per round (node_dropout 0.2 of 5), edge pruning
rate 0.20, the FinalRefer decision, learning rate 0.1, initial probability 0.5; the node stage
trains on 2 batches of 20 training queries, the edge stage on 4 batches of 10.

Deviations: prompts are our own, and the agents are alike (the official math agents take
roles from a prompt set). The official node stage trains a second set of intra-round edge
logits and ranks the agents by their weighted in- and out-degree, skipping one agent per
round drawn by a softmax over those degrees; ours learns the per-round node logits directly
(the softmax over which agent to drop) and ranks by them. The paper regularises the
adjacency matrices (low rank, distance to the initial graph); we learn plain logits by
REINFORCE with a mean baseline (the official code: Adam, no baseline). The official code
drops edges twice (after steps 2 and 4) and then keeps *sampling* the remaining edges; we drop
once, after the last step, and run every kept edge. Spatial candidates are the forward pairs
(a DAG by agent index), not all ordered pairs with cycle-closing ones rejected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any, Final, Literal

import numpy as np
from pydantic import Field

from maslab.core.context import Context
from maslab.core.method import FiniteNumber, MethodConfig, MethodState, register_method
from maslab.core.task import Task
from maslab.kit.learning import (
    ChoicePolicy,
    ChoicePolicyState,
    Edge,
    EdgePolicy,
    EdgePolicyState,
    EdgeStep,
)
from maslab.methods.graph_designers.spacetime import (
    DesignerConfig,
    Draw,
    GraphDesigner,
    Plan,
    edge_policy,
    fitted_policy,
    keep_top,
    spatial_candidates,
    taken,
    temporal_candidates,
)

__all__ = ["AgentDropout"]

STATE_FORMAT: Final = "agentdropout/1"


@register_method("agentdropout")
class AgentDropout(GraphDesigner):
    """N agents over R rounds; learned per-round agent dropout, then per-round edge dropout."""

    paper = "Wang et al., arXiv 2503.18891 (AgentDropout)"
    category = "learned communication topology (per-round agent and edge dropout)"
    calls = (
        "Σ_r K_r + d: K_r agents of round r, d = 1 with `decision=llm` (default 4·2 + 1 = 9); "
        "`optimize`: (node + edge steps)·batch·(Σ_r K_r + d) ((2·20 + 4·10)·9 = 720)"
    )

    class Config(DesignerConfig):
        agents: int = Field(5, ge=1, description="N: the agents, all alike")
        rounds: int = Field(2, ge=1, description="R: the rounds of talk before the decision")
        node_dropout: float = Field(
            0.2, ge=0, lt=1, description="the share of agents dropped from each round"
        )
        edge_dropout: float = Field(
            0.2, ge=0, lt=1, description="the share of each round's spatial, and temporal, "
            "edges dropped",
        )  # fmt: skip
        node_iterations: int = Field(2, ge=1, description="REINFORCE steps of the node stage")
        node_batch_size: int = Field(20, ge=1, description="validation tasks per node step")
        edge_iterations: int = Field(4, ge=1, description="REINFORCE steps of the edge stage")
        edge_batch_size: int = Field(10, ge=1, description="validation tasks per edge step")

    config: Config

    class LearnedState(MethodState):
        format: Literal["agentdropout/1"]
        nodes: ChoicePolicyState
        """Per round (slot), the logits of which agent to drop."""
        spatial: list[EdgePolicyState]
        """Each round's spatial edge logits."""
        temporal: list[EdgePolicyState]
        """Each round's but the first, its temporal edge logits (from the round before)."""
        node_accuracy: list[FiniteNumber]
        edge_accuracy: list[FiniteNumber]

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        cfg = self.config
        names = self.agent_names()
        self.nodes = ChoicePolicy(self.slots(), names)
        p = cfg.initial_probability
        self.spatial = [edge_policy(spatial_candidates(names), names, p) for _ in self.slots()]
        self.temporal = [
            edge_policy(temporal_candidates(names), names, p) for _ in range(cfg.rounds - 1)
        ]
        self.node_accuracy: list[float] = []
        self.edge_accuracy: list[float] | None = None
        """Each edge step's mean reward once optimised (or loaded); None: the full graph."""

    def slots(self) -> list[str]:
        return [f"round_{r}" for r in range(self.config.rounds)]

    def dropped_per_round(self) -> int:
        """k = round(node_dropout · N), at most N - 1."""
        cfg = self.config
        return min(math.floor(cfg.node_dropout * cfg.agents + 0.5), cfg.agents - 1)

    def teams(self) -> list[list[str]]:
        """Each round's agents once node dropout is decided: all but the k likeliest to drop
        (ties: the later agent is dropped)."""
        names = self.agent_names()
        k = self.dropped_per_round()
        teams = []
        for slot in range(self.config.rounds):
            probs = self.nodes.probabilities(slot)
            ranked = sorted(range(len(names)), key=lambda i: (-probs[i], -i))
            gone = set(ranked[:k])
            teams.append([n for i, n in enumerate(names) if i not in gone])
        return teams

    def between(self, teams: Sequence[Sequence[str]]) -> tuple[list[list[Edge]], list[list[Edge]]]:
        """Per round, the spatial candidates within its team and the temporal candidates from
        the team before (none in round 0)."""
        names = self.agent_names()
        spatial = [
            [(u, v) for u, v in spatial_candidates(names) if {u, v} <= set(t)] for t in teams
        ]
        temporal: list[list[Edge]] = [[]]
        for before, now in pairwise(teams):
            temporal.append(
                [(u, v) for u, v in temporal_candidates(names) if u in before and v in now]
            )
        return spatial, temporal

    def inference_plan(self, task: Task) -> tuple[Plan, dict[str, Any]]:
        names = self.agent_names()
        if self.edge_accuracy is None:
            return self.full_plan(), {"optimized": False}
        teams = self.teams()
        spatial, temporal = self.between(teams)
        cut = self.config.edge_dropout
        kept_s = [keep_top(p, e, cut) for p, e in zip(self.spatial, spatial, strict=True)]
        kept_t = [
            [],
            *(keep_top(p, e, cut) for p, e in zip(self.temporal, temporal[1:], strict=True)),
        ]
        dropped = [[n for n in names if n not in team] for team in teams]
        return Plan.build(names, teams, kept_s, kept_t), {"optimized": True, "dropped": dropped}

    async def train(self, tasks: Sequence[Task], ctx: Context, rng: np.random.Generator) -> None:
        """The node stage, then the edge stage (see the module)."""
        cfg = self.config
        names = self.agent_names()
        k = self.dropped_per_round()

        def node_draw(task: Task) -> Draw:
            steps, teams = [], []
            for slot in range(cfg.rounds):
                available = [True] * len(names)
                for _ in range(k):
                    step = self.nodes.sample(slot, rng, available=available)
                    available[step.chosen] = False
                    steps.append(step)
                teams.append([n for n, free in zip(names, available, strict=True) if free])
            plan = Plan.build(names, teams, *self.between(teams))
            return Draw(plan, lambda a: self.nodes.reinforce(steps, a, cfg.learning_rate))

        if k:
            self.node_accuracy = await self.reinforce(
                tasks, ctx, node_draw, cfg.node_iterations, cfg.node_batch_size
            )
        teams = self.teams()
        spatial, temporal = self.between(teams)
        temporal_policies: list[EdgePolicy | None] = [None, *self.temporal]

        def edge_draw(task: Task) -> Draw:
            drawn: list[tuple[list[EdgeStep], list[EdgeStep]]] = []
            for r in range(cfg.rounds):
                policy = temporal_policies[r]
                drawn.append(
                    (
                        self.spatial[r].sample(rng, spatial[r]),
                        policy.sample(rng, temporal[r]) if policy is not None else [],
                    )
                )
            plan = Plan.build(
                names, teams, [taken(s) for s, _ in drawn], [taken(t) for _, t in drawn]
            )

            def learn(advantage: float) -> None:
                for r, (s, t) in enumerate(drawn):
                    self.spatial[r].reinforce(s, advantage, cfg.learning_rate)
                    if (policy := temporal_policies[r]) is not None:
                        policy.reinforce(t, advantage, cfg.learning_rate)

            return Draw(plan, learn)

        self.edge_accuracy = await self.reinforce(
            tasks, ctx, edge_draw, cfg.edge_iterations, cfg.edge_batch_size
        )

    def learned_state(self) -> AgentDropout.LearnedState | None:
        """The node and edge logits and both stages' batch accuracies (None before
        ``optimize``)."""
        if self.edge_accuracy is None:
            return None
        return self.LearnedState(
            format=STATE_FORMAT,
            nodes=self.nodes.state(),
            spatial=[p.state() for p in self.spatial],
            temporal=[p.state() for p in self.temporal],
            node_accuracy=self.node_accuracy,
            edge_accuracy=self.edge_accuracy,
        )

    def load_learned_state(self, state: AgentDropout.LearnedState) -> None:
        cfg = self.config
        names = self.agent_names()
        if state.nodes.slots != self.slots() or state.nodes.options != list(names):
            raise ValueError(f"its node logits are not those of {cfg.agents} agents over "
                             f"{cfg.rounds} rounds")  # fmt: skip
        if len(state.spatial) != cfg.rounds or len(state.temporal) != cfg.rounds - 1:
            raise ValueError(f"its edge logits are not those of {cfg.rounds} rounds")
        spatial = [fitted_policy(s, spatial_candidates(names), names) for s in state.spatial]
        temporal = [fitted_policy(t, temporal_candidates(names), names) for t in state.temporal]
        self.nodes = ChoicePolicy.from_state(state.nodes)
        self.spatial, self.temporal = spatial, temporal
        self.node_accuracy = list(state.node_accuracy)
        self.edge_accuracy = list(state.edge_accuracy)
