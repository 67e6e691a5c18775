"""GPTSwarm: a swarm of agents as a graph whose edges are learned.

Zhuge, Wang, Kirsch, Faccio, Khizbullin, Schmidhuber. "GPTSwarm: Language Agents as
Optimizable Graphs". arXiv:2402.16823 (ICML 2024).

Algorithm (N agents, as in MASLab's GPTSwarm for math: N = 6 single-call agents and a final
decision node):

1. Potential edges: ``agent_i -> agent_j`` for every i < j (a DAG by index) and
   ``agent_i -> decision`` for every i. Each is an independent Bernoulli with a learnable logit
   (:class:`maslab.kit.learning.EdgePolicy`), initial probability 0.5.
2. A realisation: before optimisation, the graph is sampled from the edge probabilities with
   the sample's random stream (``graph="auto"``: the swarm as it stands, the paper's random
   swarm at p = 0.5; a strict threshold at p = 0.5 would keep no edge at all). Once optimised
   (or with a learned state loaded), the edges whose *probability* exceeds ``threshold`` (0.5)
   are kept. ``graph="sample"`` or ``"threshold"`` forces either. If the realisation has no
   edge into the decision node, the likeliest such edge is added (the first agent's on a tie),
   so a solve always has an answer.
3. Only the agents with a path to the decision node can change the answer: they run, in
   topological order, the agents of a layer concurrently. An agent reads the task and the
   answers of its predecessors (in agent order); an agent without one answers alone.
4. The decision node is a majority vote over the answers of the agents with an edge into it
   (ties to the earliest agent), no call; ``decision="llm"`` makes it one aggregator call.

``optimize`` (edge optimisation, ``maslab run --optimize-on``): ``iterations`` steps; each
takes the next ``batch_size`` validation tasks (cycling through them), samples one graph per
task from a generator seeded by the run seed (:func:`maslab.kit.learning.policy_rng`), runs it
(without the repair of step 2: a graph with no edge into the decision node answers nothing,
which scores 0), scores each answer against its gold with the evaluator of its answer type
(:class:`maslab.bench.evaluation.Scorer`, or ``evaluator``) and moves every edge logit by one
REINFORCE step with the batch mean as baseline (``lr = 0.1``). The logits are the learned
state.

LLM calls (solve): K + d, K ≤ N the agents with a path to the decision node in the kept graph,
d = 1 with ``decision="llm"`` else 0 (default N = 6: 1-6). ``optimize``: Σ over
``iterations`` · ``batch_size`` sampled graphs of (K + d), at most 100 · 4 · 6 = 2,400.

Budget stop: the majority vote over the answers given so far by agents with an edge into the
decision node (all answers so far if none of them has answered), after each complete layer.

Deviations: prompts are our own. GPTSwarm draws edges between all ordered pairs of agents and
rejects those that close a cycle; we restrict the candidates to a DAG by agent index (the
agents are interchangeable, so any acyclic realisation of the paper's has an equal one up to
renaming, but the index order becomes part of the structure). GPTSwarm optimises with Adam and
no baseline; we take plain REINFORCE steps with the batch mean as baseline. Its utility is the
running accuracy; ours is each graph's own score. MASLab keeps the edges with
``edge_logits > 0.5`` (a logit compared with a probability); we threshold probabilities.
Agents without a path to the decision node are not run (GPTSwarm runs every node; their
answers reach nobody). MASLab's ``order_params`` and the paper's node (prompt) optimisation
are not implemented. The unoptimised default samples the graph (see step 2).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import networkx as nx
import numpy as np
from pydantic import Field

from maslab.bench.evaluation import Scorer
from maslab.core.context import Context
from maslab.core.method import FiniteNumber, Method, MethodConfig, MethodState, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import decide, propose_vote
from maslab.kit.layers import run_layers
from maslab.kit.learning import Edge, EdgePolicy, EdgePolicyState, mean_baseline, policy_rng

__all__ = ["GPTSwarm"]

AGENT = "agent"
DECISION = "decision"
STATE_FORMAT: Final = "gptswarm/1"


def agent_prompt(task: Task, shown: Sequence[tuple[str, str]]) -> str:
    """The task, and the answers of the agent's predecessors (name, answer) if it has any."""
    if not shown:
        return f"{task.prompt()}\n\nWork it out step by step, then give your final answer."
    blocks = "\n\n".join(f"--- {name} ---\n{answer.strip()}" for name, answer in shown)
    return (
        f"{task.prompt()}\n\nOther agents of your team have answered before you (they may be "
        f"wrong):\n\n{blocks}\n\nCheck their work as you solve the problem yourself, step by "
        "step, then give your final answer."
    )


def candidates(names: Sequence[str]) -> Topology:
    """The potential edges: agent i -> agent j for i < j, then every agent -> decision."""
    forward = [(u, v) for i, u in enumerate(names) for v in names[i + 1 :]]
    decision = [(u, DECISION) for u in names]
    return Topology.from_edges([*forward, *decision], name="gptswarm candidates")


@register_method("gptswarm")
class GPTSwarm(Method):
    """A swarm of agents on a DAG whose edge probabilities are learned by REINFORCE."""

    roles = (AGENT, "aggregator")
    paper = "Zhuge et al., arXiv 2402.16823 (GPTSwarm)"
    category = "optimisable agent graph (edge learning)"
    calls = "K + d: K ≤ N agents reaching the decision node, d = 1 with `decision=llm` (N = 6: 1–6)"

    class Config(MethodConfig):
        agents: int = Field(6, ge=1)
        """N: MASLab's ``num-truthful-agent``."""
        initial_probability: float = Field(0.5, gt=0, lt=1)
        graph: Literal["auto", "sample", "threshold"] = "auto"
        """How a solve realises the graph; ``auto``: sample until optimised, then threshold."""
        threshold: float = Field(0.5, ge=0, lt=1)
        """The edge probability an edge must exceed to be kept (``threshold`` graphs)."""
        decision: Literal["majority", "llm"] = "majority"
        # optimize
        iterations: int = Field(100, ge=1)
        batch_size: int = Field(4, ge=1)
        learning_rate: float = Field(0.1, gt=0)
        evaluator: str | None = None
        """The evaluator of the rewards; None: by answer type (numeric, math, choice, ...)."""

    config: Config

    class LearnedState(MethodState):
        format: Literal["gptswarm/1"]
        policy: EdgePolicyState
        accuracy: list[FiniteNumber]
        """The mean reward of each batch."""

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        logit = float(
            np.log(self.config.initial_probability / (1 - self.config.initial_probability))
        )
        self.policy = EdgePolicy.from_topology(candidates(self.agent_names()), init=logit)
        self.optimized = False
        """Whether the logits were learned (``optimize`` ran or a learned state was loaded)."""
        self.accuracy: list[float] = []
        """The mean reward of each optimisation step's batch."""

    def agent_names(self) -> tuple[str, ...]:
        return numbered(AGENT, self.config.agents)

    # -- the graph -----------------------------------------------------------------------------

    def realise(self, ctx: Context) -> tuple[list[Edge], str]:
        """A solve's edges and how they were chosen (``sample`` or ``threshold``)."""
        mode = self.config.graph
        if mode == "auto":
            mode = "threshold" if self.optimized else "sample"
        if mode == "threshold":
            return self.policy.threshold(self.config.threshold), mode
        steps = self.policy.sample(np.random.default_rng(ctx.rng.getrandbits(64)))
        return [s.edge for s in steps if s.taken], mode

    def with_decision_input(self, edges: list[Edge]) -> tuple[list[Edge], bool]:
        """``edges``, plus the likeliest edge into the decision node if none enters it."""
        if any(v == DECISION for _, v in edges):
            return edges, False
        into = [e for e in self.policy.edges if e[1] == DECISION]
        best = max(into, key=lambda e: (self.policy.probability(e), -into.index(e)))
        return [*edges, best], True

    def kept_graph(self, edges: Sequence[Edge]) -> Topology:
        """The realised graph on the agents with a path to the decision node, and the node."""
        full = self.policy.graph(edges, name="gptswarm")
        keep = nx.ancestors(full.graph, DECISION) | {DECISION}
        kept = Topology(name="gptswarm")
        for node in full.nodes:
            if node in keep:
                kept.add_node(node)
        for u, v in full.edges:
            if u in keep and v in keep:
                kept.add_edge(u, v)
        return kept

    # -- execution -----------------------------------------------------------------------------

    async def execute(self, task: Task, ctx: Context, graph: Topology) -> Solution:
        """Run the agents of ``graph`` layer by layer, then the decision node."""
        order = {name: i for i, name in enumerate(graph.nodes)}
        inputs = sorted(graph.predecessors(DECISION), key=order.__getitem__)
        layers = graph.layers()[:-1]  # the last layer is the decision node alone
        agents = {n: ctx.agent(n, role=AGENT) for layer in layers for n in layer}
        answers: dict[str, str] = {}

        async def turn(name: str, r: int, shown: list[tuple[str, str]]) -> str:
            reply = await agents[name].reply(agent_prompt(task, shown), round=r, remember=False)
            return reply.content

        async for r, replies in run_layers(graph, turn, layers=layers):
            answers.update(replies)
            heard = [answers[n] for n in inputs if n in answers] or list(answers.values())
            propose_vote(ctx, task, heard, round=r)
        if not inputs:
            return Solution(answer="", metadata={"aggregate": "none (no edge into the decision)"})
        return await decide(
            ctx, task, [answers[n] for n in inputs], self.config.decision, round=len(layers)
        )

    async def solve(self, task: Task, ctx: Context) -> Solution:
        edges, mode = self.realise(ctx)
        edges, repaired = self.with_decision_input(edges)
        graph = self.kept_graph(edges)
        ctx.topology = graph
        solution = await self.execute(task, ctx, graph)
        return solution.model_copy(
            update={
                "metadata": {
                    **solution.metadata,
                    "graph": mode,
                    "optimized": self.optimized,
                    "edges": [list(e) for e in graph.edges],
                    "agents_run": [n for n in graph.nodes if n != DECISION],
                    "decision_edge_added": repaired,
                }
            }
        )

    # -- optimisation --------------------------------------------------------------------------

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """Edge optimisation by REINFORCE on the scores of sampled graphs (see the module)."""
        cfg = self.config
        if not tasks:
            return
        rng = policy_rng(ctx.seed, "gptswarm")
        async with Scorer(cfg.evaluator) as scorer:
            for i in range(cfg.iterations):
                batch = [
                    tasks[(i * cfg.batch_size + k) % len(tasks)] for k in range(cfg.batch_size)
                ]
                draws = [self.policy.sample(rng) for _ in batch]
                solutions = await asyncio.gather(
                    *(
                        self.execute(task, ctx, self.kept_graph([s.edge for s in draw if s.taken]))
                        for task, draw in zip(batch, draws, strict=True)
                    )
                )
                rewards = [
                    (await scorer.score(task, solution.answer, ctx=ctx)).value
                    for task, solution in zip(batch, solutions, strict=True)
                ]
                for draw, advantage in zip(draws, mean_baseline(rewards), strict=True):
                    self.policy.reinforce(draw, float(advantage), cfg.learning_rate)
                self.accuracy.append(float(np.mean(rewards)))
        self.optimized = True

    def learned_state(self) -> GPTSwarm.LearnedState | None:
        """The learned edge logits and the batch accuracies (None before ``optimize``)."""
        if not self.optimized:
            return None
        return self.LearnedState(
            format=STATE_FORMAT, policy=self.policy.state(), accuracy=self.accuracy
        )

    def load_learned_state(self, state: GPTSwarm.LearnedState) -> None:
        policy = EdgePolicy.from_state(state.policy)
        if policy.edges != self.policy.edges or policy.nodes != self.policy.nodes:
            raise ValueError(f"its edges are not those of {self.config.agents} agents")
        self.policy, self.accuracy, self.optimized = policy, list(state.accuracy), True
