"""Graph-GRPO: a communication topology learned with edge-level group-relative advantages.

Cang, Zhang, Zhao, Ji, Liu, He, Ning, Chen, Que, Shi. "Graph-GRPO: Stabilizing Multi-Agent
Topology Learning via Group Relative Policy Optimization". arXiv:2603.02701 (2026). No code was
published (github.com/Zhubaoheng/Graph-GRPO is an unrelated paper, arXiv 2603.10395).

Agents and graph: N role agents ``agent_1`` .. ``agent_N`` (agent i holds the i-th role of
``agent_roles``; the paper uses 4 agents on math tasks). The potential edges are every forward
pair ``agent_i -> agent_j``, i < j: a complete DAG in agent order, so any subset is acyclic.
An edge policy (:class:`maslab.kit.learning.EdgePolicy`) gives each potential edge a probability
``sigmoid(b_e + w_e · x)`` from cheap features ``x`` of the query (:func:`query_features`:
length buckets, how many numbers, code and multiple-choice flags). All logits start at
``logit(initial_probability)``.

Inference (``solve``): the graph keeps the edges whose probability for this query exceeds
``threshold`` (0.5). Untrained, no edge exceeds it: the agents answer independently and only
the decision node combines them; training keeps the edges that earned it.

1. R rounds. In round r the agents run layer by layer in the graph's topological order (a
   layer concurrently); an agent sees the question, its own round r-1 output (r >= 1) and the
   round r outputs of its predecessors in the graph, nothing else.
2. A decision node (``llm_aggregate``, role ``aggregator``) reads every agent's last output and
   states the answer.

Training (``optimize``, per epoch over the validation tasks): for each task draw a group of K
graphs from the policy (a generator seeded by the run seed, draws in task order before any
call) and run them all; the reward of a graph is its answer's score by the task's evaluator
(``evaluator``, or the one of its answer type: 1 correct, 0 wrong). A group whose K rewards are
all equal says nothing about any edge and is filtered out (no update). Otherwise each edge e
gets the advantage ``A_e = S(with e) − S(without e)``, the group's success rate over the graphs
that kept e minus over those that did not (0 for an edge kept by all or none;
:func:`maslab.kit.learning.edge_credit`). The update is a policy-gradient step on the edge
decisions: in
graph k the decision about e (keep or drop) has advantage ``+A_e`` if it kept e and ``−A_e`` if
it dropped it, so ``θ_e += lr/K · Σ_k ±A_e · ∇θ_e log π(decision_k,e)``, ``θ_e`` being the
edge's bias and feature weights. Every term has the sign of ``A_e``: an edge that raised the
success rate becomes likelier, one that lowered it less likely, an edge that made no
difference is untouched (no credit for free-loader edges). The trained policy is the
method's learned state (``maslab run --optimize-on``).

LLM calls: N·R + 1 per task (default 4·3 + 1 = 13). ``optimize``: epochs · K · (N·R + 1) per
validation task (default 1 · 16 · 13 = 208), plus the evaluator's calls if it asks a model.

Budget stop: the majority vote over every agent's latest output after the last complete layer
(ties go to the earliest agent).

Deviations:

- The paper's policy is a G-Designer-style graph attention network over all-MiniLM-L6-v2
  embeddings of the query and the roles, trained with Adam (lr 1e-4). Ours is
  :class:`~maslab.kit.learning.EdgePolicy`, a logit per edge linear in five cheap query features
  (no encoder, no model download), trained by plain gradient steps with ``learning_rate``.
- The paper's edge advantage is reported as ``S_e = P(success | e ∈ g)`` standardised over
  the edges, ``(S_e − mean) / std``; ours is the contrast ``S(with e) − S(without e)``, which
  scores an edge against the graphs without it (an edge kept in most graphs of a good group is
  not credited for the group's success). The step is a policy gradient, not a direct logit
  shift, so the feature weights learn as well.
- Potential edges are the forward pairs in agent order: G-Designer's spatial edges may point
  either way with cycle-closing ones rejected. Backward information flows only through an
  agent's own previous output (no temporal edges between agents).
- Roles and prompts are our own; R = 3 is the paper's cap on communication rounds, K = 16 its
  group size. ``train_epochs`` (1) and ``learning_rate`` (1.0) are our choices.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from maslab.bench.evaluation import Scorer
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, MethodState, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import llm_aggregate, propose_vote
from maslab.kit.features import QUERY_FEATURES, query_features
from maslab.kit.learning import EdgePolicy, EdgePolicyState, EdgeStep, edge_credit, policy_rng

AGENT = "agent"
STATE_FORMAT: Final = "graph-grpo/1"

ROLE_PROMPTS: dict[str, str] = {
    "Math Solver": "You solve problems step by step and do every calculation with care.",
    "Mathematical Analyst": (
        "You analyse a problem before anyone computes: name the quantities, how they relate "
        "and which steps lead to the answer."
    ),
    "Programming Expert": (
        "You think like a programmer: write the computation out as precise, ordered steps (or "
        "code when code is asked for) and check the edge cases."
    ),
    "Inspector": (
        "You check the work you are shown: recompute each step, point out any error and give "
        "the corrected result."
    ),
    "Knowledge Expert": "You recall the facts and definitions a question depends on, exactly.",
    "Critic": (
        "You test the most likely answer by looking for the strongest reason it could be wrong, "
        "and keep it only if it survives."
    ),
}
Role = Literal[
    "Math Solver", "Mathematical Analyst", "Programming Expert", "Inspector", "Knowledge Expert",
    "Critic",
]  # fmt: skip
DEFAULT_ROLES: tuple[Role, ...] = (
    "Math Solver", "Mathematical Analyst", "Programming Expert", "Inspector",
)  # fmt: skip


def system_prompt(role: str) -> str:
    return (
        f"You are the {role} of a team of AI agents that solve a task together. "
        f"{ROLE_PROMPTS[role]}"
    )


def agent_prompt(task: Task, own: Message | None, seen: Sequence[Message]) -> str:
    parts = [task.prompt()]
    if own is not None:
        parts.append(f"Your answer in the previous round:\n\n{own.content.strip()}")
    if seen:
        shown = "\n\n".join(f"--- From {m.sender} ---\n{m.content.strip()}" for m in seen)
        parts.append(f"Your teammates' answers in this round:\n\n{shown}")
    parts.append(
        "Play your part: use what is right in the work above, correct what is wrong, and end "
        "with your current best final answer."
    )
    return "\n\n".join(parts)


class GroupCounts(BaseModel):
    """How many of ``optimize``'s groups updated the policy and how many were flat."""

    model_config = ConfigDict(extra="forbid")

    informative: int = Field(ge=0, strict=True)
    filtered: int = Field(ge=0, strict=True)


@register_method("graph_grpo")
class GraphGRPO(Method):
    """Role agents on a query-conditioned learned DAG, then a decision node; edge-level GRPO."""

    roles = (AGENT, "aggregator")
    paper = "Cang et al., arXiv 2603.02701 (Graph-GRPO)"
    category = "learned communication topology (edge-level group-relative optimisation)"
    calls = "N·R + 1 (default 4·3 + 1 = 13); `optimize`: epochs·K·(N·R + 1) per task (K = 16)"

    class Config(MethodConfig):
        agent_roles: tuple[Role, ...] = Field(DEFAULT_ROLES, min_length=1)
        """The agents' roles: N = its length."""
        rounds: int = Field(3, ge=1)
        threshold: float = Field(0.5, gt=0, lt=1)
        """Inference keeps the edges whose probability exceeds it."""
        initial_probability: float = Field(0.5, gt=0, lt=1)
        group_size: int = Field(16, ge=2)
        """K: graphs drawn per validation task in ``optimize``."""
        train_epochs: int = Field(1, ge=1)
        learning_rate: float = Field(1.0, gt=0)
        evaluator: str | None = None
        """The reward's evaluator; None: by answer type (numeric, math, choice, code, exact)."""

    config: Config

    class LearnedState(MethodState):
        format: Literal["graph-grpo/1"]
        policy: EdgePolicyState
        groups: GroupCounts

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.policy = self.new_policy()
        self.groups: dict[str, int] | None = None
        """After ``optimize``: how many groups were ``informative`` and ``filtered``."""

    def agent_names(self) -> tuple[str, ...]:
        return numbered(AGENT, len(self.config.agent_roles))

    def new_policy(self) -> EdgePolicy:
        """The untrained policy over the potential edges (forward pairs in agent order)."""
        names = self.agent_names()
        edges = list(combinations(names, 2))
        p = self.config.initial_probability
        policy = EdgePolicy(edges, [math.log(p / (1 - p))] * len(edges), len(QUERY_FEATURES))
        policy.nodes = list(names)
        return policy

    async def solve(self, task: Task, ctx: Context) -> Solution:
        x = query_features(task)
        graph = self.policy.graph(self.policy.threshold(self.config.threshold, x), "graph_grpo")
        ctx.topology = graph
        answer = await self.execute(task, ctx, graph)
        probabilities = self.policy.probabilities(x)
        return Solution(
            answer=answer,
            metadata={
                "edges": [list(edge) for edge in graph.edges],
                "probabilities": {
                    f"{u}->{v}": round(float(p), 4)
                    for (u, v), p in zip(self.policy.edges, probabilities, strict=True)
                },
                "features": dict(zip(QUERY_FEATURES, x, strict=True)),
                "trained": self.groups is not None,
            },
        )

    async def execute(self, task: Task, ctx: Context, graph: Topology) -> str:
        """Run the agents on ``graph`` for R rounds; the decision node's answer."""
        cfg = self.config
        names = self.agent_names()
        agents = {
            name: ctx.agent(name, role=AGENT, system=system_prompt(role))
            for name, role in zip(names, cfg.agent_roles, strict=True)
        }
        layers = graph.layers()
        log: list[Message] = []  # this execution's outputs, in layer order

        async def turn(name: str, r: int) -> Message:
            own = next((m for m in log if m.sender == name and m.round == r - 1), None)
            seen = graph.visible_messages(name, log, r, rounds="current")
            return await agents[name].reply(agent_prompt(task, own, seen), round=r, remember=False)

        for r in range(cfg.rounds):
            for layer in layers:
                log += await asyncio.gather(*(turn(name, r) for name in layer))
                latest = {m.sender: m.content for m in log}
                propose_vote(ctx, task, [latest[n] for n in names if n in latest], round=r)
        last = {m.sender: m.content for m in log if m.round == cfg.rounds - 1}
        verdict = await llm_aggregate(ctx, task, [last[n] for n in names], round=cfg.rounds)
        return verdict.content

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """Edge-level GRPO on ``tasks`` (see the module): per epoch, a group of K graphs per
        task, run and scored; informative groups update the policy, flat ones are filtered."""
        cfg = self.config
        if not tasks:
            return
        rng = policy_rng(ctx.seed, "graph_grpo")
        informative = filtered = 0
        async with Scorer(cfg.evaluator) as scorer:
            for _ in range(cfg.train_epochs):
                groups = [
                    [self.policy.sample(rng, features=query_features(task))
                     for _ in range(cfg.group_size)]
                    for task in tasks
                ]  # fmt: skip
                answers = await asyncio.gather(
                    *(
                        self.execute(task, ctx, self.policy.graph(draw))
                        for task, group in zip(tasks, groups, strict=True)
                        for draw in group
                    )
                )
                for i, (task, group) in enumerate(zip(tasks, groups, strict=True)):
                    rewards = [
                        (await scorer.score(task, answer, ctx=ctx)).value
                        for answer in answers[i * cfg.group_size : (i + 1) * cfg.group_size]
                    ]
                    credit = edge_credit([[s.taken for s in draw] for draw in group], rewards)
                    if credit is None:
                        filtered += 1
                        continue
                    informative += 1
                    self.update(group, credit.tolist())
        self.groups = {"informative": informative, "filtered": filtered}

    def update(self, group: Sequence[Sequence[EdgeStep]], credit: Sequence[float]) -> None:
        """One policy-gradient step from a group's edge advantages: each decision about edge
        e is reinforced with ``+A_e`` if it kept e, ``−A_e`` if it dropped it (mean over K)."""
        for draw in group:
            for step, advantage in zip(draw, credit, strict=True):
                signed = advantage if step.taken else -advantage
                self.policy.reinforce([step], signed / len(group), self.config.learning_rate)

    def learned_state(self) -> GraphGRPO.LearnedState | None:
        """The trained edge policy and the group counts (None before ``optimize`` ran)."""
        if self.groups is None:
            return None
        groups = GroupCounts.model_validate(self.groups)
        return self.LearnedState(format=STATE_FORMAT, policy=self.policy.state(), groups=groups)

    def load_learned_state(self, state: GraphGRPO.LearnedState) -> None:
        policy = EdgePolicy.from_state(state.policy)
        expected = self.new_policy()
        if policy.edges != expected.edges or policy.weights.shape != expected.weights.shape:
            raise ValueError(
                f"trained for other agents or features (edges {policy.edges}) than this "
                f"config's {len(expected.nodes)} agents"
            )
        self.policy = policy
        self.groups = state.groups.model_dump()
