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
     baseline, and saves it with the pool it was trained on in ``selector_path``.
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
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from maslab.aggregation import llm_aggregate, majority_decision
from maslab.context import Context
from maslab.errors import ConfigError
from maslab.evaluation import Evaluator, get_evaluator
from maslab.messages import Message
from maslab.method import Method, MethodConfig, register_method
from maslab.parsing import parse_json_object
from maslab.task import Solution, Task
from maslab.topology import Template, Topology


class Group(BaseModel):
    """A candidate group: its members are ``<name>:<role>``, wired by ``template``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    expertise: str = ""
    roles: tuple[str, ...] = Field(min_length=1)
    template: Template = "chain"

    def members(self) -> list[str]:
        return [f"{self.name}:{role}" for role in self.roles]


BUILTIN_POOL = (
    Group(
        name="solve_and_verify",
        expertise="break the problem down, solve it, check the result",
        roles=("decomposer", "solver", "verifier"),
    ),
    Group(
        name="plan_and_execute",
        expertise="plan first, then carry out the plan",
        roles=("planner", "executor"),
    ),
    Group(
        name="expert_panel",
        expertise="independent expert views pooled by a moderator",
        roles=("moderator", "domain expert", "generalist"),
        template="star",
    ),
    Group(
        name="debate_pair",
        expertise="two solvers who challenge each other",
        roles=("proponent", "skeptic"),
        template="complete",
    ),
)
DOMAIN_BY_ANSWER_TYPE = {
    "number": "math word problems",
    "math": "competition mathematics",
    "choice": "multiple-choice knowledge questions",
    "code": "Python programming",
    "text": "general question answering",
}
EVALUATOR_BY_ANSWER_TYPE = {
    "number": "numeric", "math": "math", "choice": "choice", "code": "code", "text": "exact",
}  # fmt: skip
TEMPLATE_WORDS: dict[str, Template] = {
    "chain": "chain", "sequential": "chain", "pipeline": "chain",
    "star": "star", "hub": "star", "hierarchical": "star",
    "complete": "complete", "mesh": "complete", "fully connected": "complete",
    "none": "none", "parallel": "none", "independent": "none",
}  # fmt: skip
DEFAULT_GROUPS = 2
SELECTOR_FORMAT = "goagent-selector/1"


@dataclass(frozen=True)
class Selection:
    """Chosen group names in topological order and inter-group edges between them."""

    groups: tuple[str, ...]
    edges: tuple[tuple[str, str], ...] = ()

    def size(self) -> int:
        return len(self.groups) + len(self.edges)


# -- step 1: the group pool ------------------------------------------------------------------


def pool_prompt(domain: str, size: int, max_roles: int) -> str:
    return (
        f"You design teams of AI agents that solve tasks in this domain: {domain}.\n\n"
        f"Propose {size} different candidate groups. A group is a small team of at most "
        f"{max_roles} agents that works together on one aspect of such tasks (say, one agent "
        "breaks the problem down, one solves it and one checks it). Reply with one JSON object "
        'whose key "groups" holds the list of groups. Each group has a unique short "name" '
        '(snake_case), an "expertise" sentence, "roles" (a list of role names in working '
        'order) and "topology", how its members talk: "chain" (each hands its work to the '
        'next), "star" (the first role coordinates the others) or "complete" (everyone sees '
        "everyone)."
    )


def parse_pool(text: str, size: int, max_roles: int) -> list[Group]:
    """The valid groups of a pool reply (bad entries are skipped), at most ``size``."""
    data = parse_json_object(text)
    items = data.get("groups") if data else None
    pool: dict[str, Group] = {}
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name = item["name"].strip().replace(":", "-")
        raw_roles = item.get("roles") if isinstance(item.get("roles"), list) else []
        roles = [r.strip() for r in raw_roles if isinstance(r, str) and r.strip()]
        roles = list(dict.fromkeys(roles))[:max_roles]
        if not name or name.casefold() in pool or not roles:
            continue
        expertise = item.get("expertise")
        pool[name.casefold()] = Group(
            name=name,
            expertise=expertise.strip() if isinstance(expertise, str) else "",
            roles=tuple(roles),
            template=TEMPLATE_WORDS.get(str(item.get("topology", "")).strip().lower(), "chain"),
        )
    return list(pool.values())[:size]


def read_json(path: str, what: str) -> dict[str, Any]:
    """The JSON object in ``path`` ({} if the file does not exist)."""
    file = Path(path)
    if not file.exists():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable {what} ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {what} file holds one JSON object")
    return data


def groups_from(data: Any, path: str) -> list[Group]:
    """Stored groups, validated; a file's pool must hold at least one group."""
    try:
        groups = [Group.model_validate(g) for g in data]
    except (TypeError, ValidationError) as exc:
        raise ConfigError(f"{path}: malformed group pool ({exc})") from None
    if not groups:
        raise ConfigError(f"{path}: empty group pool")
    return groups


@dataclass(frozen=True)
class Pool:
    groups: list[Group]
    source: str  # "llm", "pool file", "selector file" or "builtin (...)"


# -- step 2: selection -----------------------------------------------------------------------


def default_selection(pool: Sequence[Group], max_groups: int) -> Selection:
    names = tuple(g.name for g in pool[: min(DEFAULT_GROUPS, max_groups)])
    return Selection(names, tuple(pairwise(names)))


def selector_prompt(task: Task, pool: Sequence[Group], max_groups: int) -> str:
    listing = "\n".join(
        f"- {g.name} ({g.template}): {g.expertise or 'no description'}. "
        f"Roles: {', '.join(g.roles)}."
        for g in pool
    )
    return (
        f"{task.prompt()}\n\nYou are assembling a team for the task above from these "
        f"candidate groups:\n\n{listing}\n\nChoose the groups this task needs (at most "
        f"{max_groups}; fewer is cheaper) and how they hand work on: an edge from group A to "
        "group B means B sees A's results. Edges must not form a cycle. Reply with one JSON "
        'object with keys "groups" (the chosen names, in working order) and "edges" (a list '
        "of [from, to] pairs of chosen names)."
    )


def _edge_ends(item: Any) -> list[Any]:
    if isinstance(item, Mapping):
        return [item.get("from", item.get("source")), item.get("to", item.get("target"))]
    return list(item) if isinstance(item, list | tuple) else []


def validate_selection(
    data: dict[str, Any] | None, pool: Sequence[Group], max_groups: int
) -> tuple[Selection, list[str]]:
    """A valid selection from a selector reply, and notes on what was repaired."""
    if data is None:
        return default_selection(pool, max_groups), ["no JSON object: default selection"]
    known = {g.name.casefold(): g.name for g in pool}

    def lookup(name: Any) -> str | None:
        return known.get(name.strip().casefold()) if isinstance(name, str) else None

    notes: list[str] = []
    names: list[str] = []
    raw = data.get("groups")
    for item in raw if isinstance(raw, list) else []:
        if (name := lookup(item)) is None:
            notes.append(f"dropped unknown group {item!r}")
        elif name not in names:
            names.append(name)
    if len(names) > max_groups:
        notes.append(f"kept the first {max_groups} of {len(names)} groups")
        names = names[:max_groups]
    if not names:
        return default_selection(pool, max_groups), [*notes, "no known group: default selection"]
    graph = nx.DiGraph()
    graph.add_nodes_from(names)
    raw = data.get("edges")
    for item in raw if isinstance(raw, list) else []:
        ends = [lookup(end) for end in _edge_ends(item)]
        if len(ends) != 2 or not all(end in names for end in ends) or ends[0] == ends[1]:
            notes.append(f"dropped edge {item!r}")
        elif nx.has_path(graph, ends[1], ends[0]):
            notes.append(f"dropped edge {ends[0]} -> {ends[1]}: it closes a cycle")
        else:
            graph.add_edge(*ends)
    order = tuple(nx.lexicographical_topological_sort(graph, key=names.index))
    return Selection(order, tuple(graph.edges)), notes


def sigmoid(x: float) -> float:
    return 0.5 * (1 + math.tanh(x / 2))  # no overflow for large |x|


def softmax(xs: Sequence[float]) -> list[float]:
    top = max(xs)
    exps = [math.exp(x - top) for x in xs]
    return [e / sum(exps) for e in exps]


@dataclass(frozen=True)
class GroupStep:
    options: tuple[str | None, ...]  # None is END
    probs: tuple[float, ...]
    chosen: int


@dataclass(frozen=True)
class EdgeStep:
    key: str
    prob: float
    taken: bool


@dataclass
class GroupPolicy:
    """The learned selector of one domain: group, END and edge logits over its pool."""

    pool: list[Group]
    group_logits: dict[str, float] = field(default_factory=dict)
    end_logit: float = 0.0
    edge_logits: dict[str, float] = field(default_factory=dict)  # "a->b"

    def decode(
        self, max_groups: int, rng: random.Random | None = None
    ) -> tuple[Selection, list[GroupStep | EdgeStep]]:
        """Sample a selection with ``rng``, or take the likeliest choices without one."""
        names = [g.name for g in self.pool]
        chosen: list[str] = []
        edges: list[tuple[str, str]] = []
        trace: list[GroupStep | EdgeStep] = []
        while len(chosen) < min(max_groups, len(names)):
            options = [n for n in names if n not in chosen] + ([None] if chosen else [])
            logits = [
                self.end_logit if o is None else self.group_logits.get(o, 0.0) for o in options
            ]
            probs = softmax(logits)
            k = (
                rng.choices(range(len(options)), weights=probs)[0]
                if rng
                else probs.index(max(probs))
            )
            trace.append(GroupStep(tuple(options), tuple(probs), k))
            new = options[k]
            if new is None:
                break
            incoming = []
            for prev in chosen:
                key = f"{prev}->{new}"
                prob = sigmoid(self.edge_logits.get(key, 0.0))
                taken = rng.random() < prob if rng else prob > 0.5
                trace.append(EdgeStep(key, prob, taken))
                if taken:
                    incoming.append((prev, new))
            if chosen and not incoming:  # keep the graph connected: the likeliest edge
                prev = max(chosen, key=lambda c: self.edge_logits.get(f"{c}->{new}", 0.0))
                incoming.append((prev, new))
            edges += incoming
            chosen.append(new)
        return Selection(tuple(chosen), tuple(edges)), trace

    def reinforce(self, trace: Sequence[GroupStep | EdgeStep], advantage: float, lr: float) -> None:
        """One REINFORCE step: logits += lr · advantage · ∇ log π(trace)."""
        for step in trace:
            if isinstance(step, EdgeStep):
                grad = float(step.taken) - step.prob
                self.edge_logits[step.key] = (
                    self.edge_logits.get(step.key, 0.0) + lr * advantage * grad
                )
                continue
            for i, (option, prob) in enumerate(zip(step.options, step.probs, strict=True)):
                delta = lr * advantage * (float(i == step.chosen) - prob)
                if option is None:
                    self.end_logit += delta
                else:
                    self.group_logits[option] = self.group_logits.get(option, 0.0) + delta

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": [g.model_dump(mode="json") for g in self.pool],
            "group_logits": self.group_logits,
            "end_logit": self.end_logit,
            "edge_logits": self.edge_logits,
        }

    @classmethod
    def from_json(cls, data: Any, path: str) -> GroupPolicy:
        try:
            return cls(
                pool=groups_from(data["pool"], path),
                group_logits={str(k): float(v) for k, v in data["group_logits"].items()},
                end_logit=float(data["end_logit"]),
                edge_logits={str(k): float(v) for k, v in data["edge_logits"].items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{path}: malformed learned selector ({exc!r})") from None


# -- step 3: execution -----------------------------------------------------------------------


def agent_graph(pool: Sequence[Group], selection: Selection) -> Topology:
    """The selected groups wired by their templates and the inter-group edges."""
    by_name = {g.name: g for g in pool}
    chosen = [by_name[name] for name in selection.groups]
    topology = Topology.groups(
        {g.name: g.members() for g in chosen},
        intra={g.name: g.template for g in chosen},
        inter=selection.edges,
    )
    topology.name = "goagent"
    for group in chosen:
        for member, role in zip(group.members(), group.roles, strict=True):
            topology.add_node(member, role=role)
    return topology


def split_by_order(topology: Topology) -> tuple[Topology, Topology]:
    """(spatial, temporal): edges pointing forward in node order, and those pointing back."""
    order = {n: i for i, n in enumerate(topology.nodes)}
    forward, backward = nx.DiGraph(), nx.DiGraph()
    forward.add_nodes_from(topology.nodes)
    backward.add_nodes_from(topology.nodes)
    for u, v in topology.edges:
        (forward if order[u] < order[v] else backward).add_edge(u, v)
    return Topology(forward, name="spatial"), Topology(backward, name="temporal")


def agent_prompt(task: Task, role: str, own: list[Message], seen: list[Message]) -> str:
    parts = [task.prompt()]
    if own:
        parts.append(f"Your output in the previous round:\n\n{own[0].content.strip()}")
    if seen:
        shown = "\n\n".join(f"--- From {m.sender} ---\n{m.content.strip()}" for m in seen)
        parts.append(f"What your teammates sent you:\n\n{shown}")
    parts.append(
        f"Do your part as the {role}: build on your teammates' work where it is right, fix it "
        "where it is wrong, and end with your current best final answer."
    )
    return "\n\n".join(parts)


@register_method("goagent")
class GoAgent(Method):
    """Select and connect candidate groups of agents, run them for R rounds, then decide."""

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
        seed: int = 0
        evaluator: str | None = None  # None: by answer type (numeric, math, choice, code, exact)

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self._pools: dict[str, Pool] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._policies: dict[str, GroupPolicy] = {}
        if self.config.selector_path:
            self._load_policies(self.config.selector_path)

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
            if domain in stored:
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

    def _load_policies(self, path: str) -> None:
        data = read_json(path, "learned selector")
        if not data:
            return
        if data.get("format") != SELECTOR_FORMAT or not isinstance(data.get("domains"), dict):
            raise ConfigError(f"{path}: not a {SELECTOR_FORMAT} file")
        for domain, entry in data["domains"].items():
            policy = GroupPolicy.from_json(entry, path)
            self._policies[domain] = policy
            self._pools[domain] = Pool(policy.pool, "selector file")

    def _save_policies(self, path: str) -> None:
        data = {
            "format": SELECTOR_FORMAT,
            "domains": {d: p.to_json() for d, p in sorted(self._policies.items())},
        }
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")

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
                role=roles[name],
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
                decision = majority_decision(task, list(latest.values())[::-1])
                ctx.propose(decision.response, round=r, votes=decision.vote.counts)
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
        """Train the learned selector by REINFORCE (no-op for ``selector="llm"``).

        Each epoch samples one selection per task (seeded by ``seed``), runs them all, and
        moves every sampled choice's logits by its reward (score − sparsity · size) minus the
        batch mean. The result is saved to ``selector_path`` if set.
        """
        cfg = self.config
        if cfg.selector != "learned" or not tasks:
            return
        rng = random.Random(cfg.seed)
        evaluators: dict[str, Evaluator] = {}
        try:
            for _ in range(cfg.train_epochs):
                batch = []
                for task in tasks:
                    domain = self.domain(task)
                    pool, _ = await self.pool(domain, ctx)
                    policy = self._policies.setdefault(domain, GroupPolicy(pool.groups))
                    selection, trace = policy.decode(cfg.max_groups, rng)
                    batch.append((task, policy, selection, trace))
                outcomes = await asyncio.gather(
                    *(self.execute(t, ctx, p.pool, s) for t, p, s, _ in batch)
                )
                rewards = []
                for (task, _, selection, _), (_, decision) in zip(batch, outcomes, strict=True):
                    name = cfg.evaluator or EVALUATOR_BY_ANSWER_TYPE[task.answer_type]
                    if name not in evaluators:
                        evaluators[name] = get_evaluator(name)()
                    score = await evaluators[name].score(task, decision.content, ctx=ctx)
                    rewards.append(score.value - cfg.sparsity * selection.size())
                baseline = sum(rewards) / len(rewards)
                for (_, policy, _, trace), reward in zip(batch, rewards, strict=True):
                    policy.reinforce(trace, reward - baseline, cfg.learning_rate)
        finally:
            for evaluator in evaluators.values():
                await evaluator.aclose()
        if cfg.selector_path:
            self._save_policies(cfg.selector_path)
