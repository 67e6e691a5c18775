"""GoAgent: groups of agents as the units of the communication topology.

Chen, Zheng, Liu, Jiao, Li, Liu, Zhao, Xu, Khalil, Pan. "GoAgent: Group-of-Agents
Communication Topology Generation for LLM-based Multi-Agent Systems". arXiv:2603.19677 (2026).

Algorithm:

1. Group pool (once per domain): an LLM proposes K candidate groups for the task domain, each
   a name, an expertise, its roles in working order and an intra-group template (chain, star
   or complete). The pool is cached per method instance and domain (and in ``pool_path``, a
   JSON file, if set); a malformed reply falls back to a small built-in pool.
2. Selection: a selector picks at most ``max_groups`` groups and the inter-group edges. The
   agent graph is ``Topology.groups``: each group wired by its template, and an edge A -> B
   links A's sink agents to B's source agents (all members of a group without them).
   - ``selector="llm"``: one call returns JSON (groups, edges); unknown names are dropped,
     edges that close a cycle are dropped, and an unusable reply falls back to the default
     selection (the pool's first two groups, chained).
   - ``selector="learned"``: a per-domain policy decodes greedily, no call. It is the
     autoregressive generator reduced to per-domain parameters: at each step a softmax over
     the unchosen groups and END, then a Bernoulli per earlier group for the edge into the
     new one (the likeliest edge if none, so the graph stays connected). ``optimize`` trains
     it by REINFORCE on validation accuracy minus ``sparsity`` per chosen group and edge (an
     information-bottleneck-like pressure towards small graphs), with the batch mean as
     baseline (:mod:`maslab.kit.learning`; draws from a generator seeded by the run seed). The
     trained policies, with the pools they were trained on, are the method's learned state
     (``maslab run --optimize-on``) and are also written to ``selector_path`` if set, which a
     later instance loads.
3. Execution for R rounds. Agents are ordered group by group in topological order; an edge
   pointing forward in that order acts within the round (spatial), one pointing backward
   (inside a star or complete group) carries the previous round's output (temporal). In
   round r an agent sees the task, its own round r-1 output, the round r outputs of its
   spatial predecessors and the round r-1 outputs of its temporal predecessors, nothing else.
   The agents of a layer run concurrently. A decision node reads every agent's last output
   and states the answer.

LLM calls: pool (1 per domain and method instance, 0 when cached) + selector (1 for "llm",
0 for "learned") + R·Σ|roles of the selected groups| + 1 decision. ``optimize`` costs
``train_epochs`` · Σ_tasks (R·Σ|roles| + 1) calls (plus the pool call if needed).

Model roles: ``pool_builder``, ``selector``, ``member`` (every group member, whatever its role in
its group: the members are only known once the pool is built) and ``aggregator`` (the decision).

Budget stop: the majority vote over every agent's latest output after the last complete layer
(the decision node's reading, without its call); ties go to the agent furthest downstream.

Deviations: prompts are our own paraphrase. The paper's selector is a small neural generator
(sentence-encoded task, GRU, CIB layers) trained by supervised learning on minimal successful
graphs; ours is either an LLM (labelled as an approximation) or the per-domain policy above,
which is not conditioned on the question and is trained by REINFORCE, not teacher forcing.
Pool size K = 16 and three roles at most per group follow the paper's examples; R = 3
follows ARG-Designer's ``Graph.run`` (GoAgent's own round count is unverified). How an
inter-group edge maps onto agents, and the temporal use of backward intra-group edges, are
our choices (the paper leaves them open). The decision node is ``llm_aggregate``. Tasks do not
name their benchmark, so the domain is the ``domain`` option, else ``task.metadata["domain"]``,
else a label for the answer type. Only LLM-built pools are written to ``pool_path``; the
built-in fallback stays in memory, so a later run asks again. ``Solution.metadata`` records
the pool's source, which selector ran (``selector``, ``selector_file``) and every repair made
to the selection (``selection_notes``).

Modules: ``pool`` (step 1), ``selection`` (step 2, the LLM selector), ``policy`` (the learned
selector) and ``execution`` (step 3's agent graph and prompts); this one holds the method.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import Field

from maslab.bench.evaluation import Scorer
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, MethodState, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import llm_aggregate, propose_vote
from maslab.kit.learning import mean_baseline, policy_rng
from maslab.kit.parsing import parse_json_object
from maslab.methods.goagent.execution import agent_graph, agent_prompt, split_by_order
from maslab.methods.goagent.policy import SELECTOR_FORMAT, GroupPolicy, GroupPolicyState
from maslab.methods.goagent.pool import (
    BUILTIN_POOL,
    Group,
    Pool,
    groups_from,
    parse_pool,
    pool_prompt,
    read_json,
)
from maslab.methods.goagent.selection import (
    Selection,
    default_selection,
    selector_prompt,
    validate_selection,
)
from maslab.store.run_store import write_atomically

__all__ = ["GoAgent"]

DOMAIN_BY_ANSWER_TYPE = {
    "number": "math word problems",
    "math": "competition mathematics",
    "choice": "multiple-choice knowledge questions",
    "code": "Python programming",
    "text": "general question answering",
}


@register_method("goagent")
class GoAgent(Method):
    """Select and connect candidate groups of agents, run them for R rounds, then decide."""

    roles = ("pool_builder", "selector", "member", "aggregator")
    paper = "GoAgent, arXiv 2603.19677"
    category = "group-of-agents topology"
    calls = "pool 1 (once per domain) + selector 1 (`llm`) or 0 (`learned`) + R·Σ agents + 1"

    class Config(MethodConfig):
        domain: str | None = None  # None: task.metadata["domain"], else from the answer type
        pool_size: int = Field(16, ge=1)
        max_roles: int = Field(3, ge=1)
        pool_path: str | None = None
        selector: Literal["llm", "learned"] = "llm"
        selector_path: str | None = None
        max_groups: int = Field(3, ge=1)
        rounds: int = Field(3, ge=1)
        # optimize (learned selector only)
        train_epochs: int = Field(5, ge=1)
        learning_rate: float = Field(1.0, gt=0)
        sparsity: float = Field(0.05, ge=0)
        evaluator: str | None = None  # None: by answer type (numeric, math, choice, code, exact)

    config: Config

    class LearnedState(MethodState):
        format: Literal["goagent-selector/2"]
        domains: dict[str, GroupPolicyState]
        """Each domain's trained policy and its pool (none: an ``llm`` selector's)."""

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self._pools: dict[str, Pool] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._policies: dict[str, GroupPolicy] = {}
        self._optimized = False
        path = self.config.selector_path
        if path and (data := read_json(path, "learned selector")):
            selector = self.check_learned_state(data, path)  # a GoAgent.LearnedState
            self._load(cast(GoAgent.LearnedState, selector), "selector file")

    def domain(self, task: Task) -> str:
        return str(
            self.config.domain
            or task.metadata.get("domain")
            or DOMAIN_BY_ANSWER_TYPE[task.answer_type]
        )

    # -- pool ----------------------------------------------------------------------------------

    async def pool(self, domain: str, ctx: Context) -> tuple[Pool, bool]:
        """The domain's pool, and whether this call built it (with one LLM call)."""
        async with self._locks.setdefault(domain, asyncio.Lock()):
            if domain in self._pools:
                return self._pools[domain], False
            cfg = self.config
            stored = read_json(cfg.pool_path, "group pool") if cfg.pool_path else {}
            if cfg.pool_path and domain in stored:  # stored is {} without a pool file
                self._pools[domain] = Pool(groups_from(stored[domain], cfg.pool_path), "pool file")
                return self._pools[domain], False
            reply = await ctx.agent("pool_builder").reply(
                pool_prompt(domain, cfg.pool_size, cfg.max_roles),
                kind="pool", remember=False, stream=f"goagent pool:{domain}",
            )  # fmt: skip
            groups = parse_pool(reply.content, cfg.pool_size, cfg.max_roles)
            if not groups:
                self._pools[domain] = Pool(list(BUILTIN_POOL), "builtin (malformed pool reply)")
                return self._pools[domain], True
            if cfg.pool_path:
                stored[domain] = [g.model_dump(mode="json") for g in groups]
                Path(cfg.pool_path).write_text(json.dumps(stored, indent=2), encoding="utf-8")
            self._pools[domain] = Pool(groups, "llm")
            return self._pools[domain], True

    # -- selector ------------------------------------------------------------------------------

    async def select(
        self, task: Task, ctx: Context, domain: str, pool: Sequence[Group]
    ) -> tuple[Selection, list[str]]:
        cfg = self.config
        if cfg.selector == "learned":
            if domain not in self._policies:
                notes = [f"no learned selector for domain {domain!r}: default selection"]
                return default_selection(pool, cfg.max_groups), notes
            return self._policies[domain].decode(cfg.max_groups)[0], []
        reply = await ctx.agent("selector").reply(
            selector_prompt(task, pool, cfg.max_groups), kind="selection", remember=False
        )
        return validate_selection(parse_json_object(reply.content), pool, cfg.max_groups)

    def learned_state(self) -> GoAgent.LearnedState | None:
        """The trained per-domain policies with their pools (none after an ``llm`` selector's
        ``optimize``; None: neither optimised nor loaded)."""
        if not (self._policies or self._optimized):
            return None
        domains = {d: p.state() for d, p in sorted(self._policies.items())}
        return self.LearnedState(format=SELECTOR_FORMAT, domains=domains)

    def load_learned_state(self, state: GoAgent.LearnedState) -> None:
        self._load(state, "learned state")
        self._optimized = True

    def _load(self, state: GoAgent.LearnedState, source: str) -> None:
        """Take the policies of a checked learned state; their pools' ``source`` is where
        they came from."""
        for domain, entry in state.domains.items():
            policy = GroupPolicy.from_state(entry)
            self._policies[domain] = policy
            self._pools[domain] = Pool(policy.pool, source)

    # -- execution -----------------------------------------------------------------------------

    async def execute(
        self, task: Task, ctx: Context, pool: Sequence[Group], selection: Selection
    ) -> tuple[Topology, Message]:
        """Run the selected groups for R rounds; return the agent graph and the decision."""
        topology = agent_graph(pool, selection)
        spatial, temporal = split_by_order(topology)
        layers = spatial.layers()
        roles = dict(topology.graph.nodes(data="role"))
        agents = {
            name: ctx.agent(
                name,
                system=f"You are the {roles[name]} of the group '{topology.group_of(name)}' in "
                "a team of AI agents solving a task together.",
                role="member",
            )
            for name in topology.nodes
        }
        log: list[Message] = []  # this execution's outputs, in a fixed order

        async def turn(name: str, r: int) -> Message:
            own = [m for m in log if m.sender == name and m.round == r - 1]
            seen = spatial.visible_messages(name, log, r, rounds="current")
            seen += temporal.visible_messages(name, log, r, rounds="previous")
            prompt = agent_prompt(task, roles[name], own, seen)
            return await agents[name].reply(prompt, round=r, remember=False)

        for r in range(self.config.rounds):
            for layer in layers:
                log += await asyncio.gather(*(turn(name, r) for name in layer))
                latest = {m.sender: m.content for m in log}  # each agent's latest, layer order
                # reversed: a tie goes to the agent furthest downstream (the first response)
                propose_vote(ctx, task, list(latest.values())[::-1], round=r)
        last = [m.content for m in log if m.round == self.config.rounds - 1]
        return topology, await llm_aggregate(ctx, task, last, round=self.config.rounds)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        domain = self.domain(task)
        pool, built = await self.pool(domain, ctx)
        selection, notes = await self.select(task, ctx, domain, pool.groups)
        topology, decision = await self.execute(task, ctx, pool.groups, selection)
        ctx.topology = topology
        return Solution(
            answer=decision.content,
            metadata={
                "domain": domain,
                "pool": {
                    "source": pool.source,
                    "built_in_this_sample": built,
                    "groups": [g.name for g in pool.groups],
                },
                "selector": cfg.selector,
                "selector_file": cfg.selector_path if cfg.selector == "learned" else None,
                "selection": {
                    "groups": list(selection.groups),
                    "edges": [list(edge) for edge in selection.edges],
                },
                "selection_notes": notes,
                "agents": len(topology),
                "rounds": cfg.rounds,
            },
        )

    # -- training ------------------------------------------------------------------------------

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """Train the learned selector by REINFORCE (for ``selector="llm"`` there is nothing to
        train: its learned state holds no policy).

        Each epoch samples one selection per task (from a generator seeded by the run seed,
        ``ctx.seed``), runs them all, and moves every sampled choice's logits by its reward
        (score − sparsity · size) minus the batch mean. The result is the method's learned
        state, also written to ``selector_path`` if set.
        """
        cfg = self.config
        self._optimized = True
        if cfg.selector != "learned" or not tasks:
            return
        rng = policy_rng(ctx.seed, "goagent")
        async with Scorer(cfg.evaluator) as scorer:
            for _ in range(cfg.train_epochs):
                batch = []
                for task in tasks:
                    domain = self.domain(task)
                    pool, _ = await self.pool(domain, ctx)
                    policy = self._policies.setdefault(domain, GroupPolicy.new(pool.groups))
                    selection, trace = policy.decode(cfg.max_groups, rng)
                    batch.append((task, policy, selection, trace))
                outcomes = await asyncio.gather(
                    *(self.execute(t, ctx, p.pool, s) for t, p, s, _ in batch)
                )
                rewards = []
                for (task, _, selection, _), (_, decision) in zip(batch, outcomes, strict=True):
                    score = await scorer.score(task, decision.content, ctx=ctx)
                    rewards.append(score.value - cfg.sparsity * selection.size())
                advantages = mean_baseline(rewards)
                for (_, policy, _, trace), advantage in zip(batch, advantages, strict=True):
                    policy.reinforce(trace, float(advantage), cfg.learning_rate)
        if cfg.selector_path:
            state = json.dumps(self.dump_learned_state(), indent=2, sort_keys=True)
            write_atomically(Path(cfg.selector_path), state.encode())
