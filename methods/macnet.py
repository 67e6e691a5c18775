"""MacNet: multi-agent collaboration networks over a DAG.

Qian, Xie, Wang, Liu, Dang, Du, Chen, Yang, Liu, Sun. "Scaling Large-Language-Model-based
Multi-Agent Collaboration". arXiv:2406.07155 (ICLR 2025).

Algorithm (N actor nodes on a DAG, one critic on every edge):

1. Build the DAG: chain ``i -> i+1``; star ``0 -> i``; binary tree ``i -> 2i+1, 2i+2``; mesh
   every ``u -> v`` with ``u < v``; layered ``floor(log2 N)`` layers, fully connected between
   neighbours (the first takes the remainder); random ``Topology.random_dag`` seeded by the
   config ``seed`` or, if unset, by the sample's ``ctx.rng``. Each actor gets a profession
   persona drawn with ``ctx.rng``; actors and the critics on their incoming edges sample at
   ``1 - (depth + 1) / (layer_count + 1)`` (``depth_temperature=False`` keeps the run's).
2. Run the layers in topological order; the nodes of a layer run concurrently.
   - A source node writes the first artifact from the task alone.
   - For each edge ``u -> v`` (concurrently): the edge's critic reviews u's artifact and names
     the most important improvement; v's actor then rewrites u's artifact given the critique.
   - A node with several predecessors merges its rewritten versions in one aggregation call;
     otherwise the single rewrite is its artifact. Only artifacts travel along edges, never
     conversations: every call is stateless.
3. The answer is the sink's artifact; several sinks are merged by one output aggregation call.

LLM calls: ``|sources| + 2·|E| + |{v : indegree(v) >= 2}| + [|sinks| >= 2]``. For N = 5:
chain 9, star 10, tree 10, mesh 24, layered 18.

Model roles: ``node`` (the actors ``node_0`` .. ``node_<N-1>``), ``critic`` (every edge's
critic, named after its edge at run time) and ``output`` (the merge of several sinks).

Budget stop: the artifact of the latest node in topological order, a sink's once one exists.

Deviations: prompts are our own paraphrase. The paper's virtual input and output nodes are
implicit: the input edge costs the source's single call (no critic, as there is nothing to
review), and the output node refines nothing: it only merges several sinks, so a chain costs
``2N - 1``. Each edge's critic is its own agent, as in the paper (in MASLab, v's agent plays
it). Personas come from a small built-in list, not the ~100 SRDD profiles. Random DAGs use
``random_dag`` (each forward pair with probability 1/2, weakly connected) instead of MASLab's
uniformly drawn edge count. MASLab's bug (the upstream artifact is read after its node was
deleted, so critics never run and actors never see it) is not repeated: each critic reviews
u's artifact and v's actor rewrites it. In MASLab the output node is a node like the others,
so as written a chain would cost ``2N + 1`` (a critic and an actor on every edge, the input
edge's actor alone); with the bug every edge costs one actor call, and a chain ``N + 1`` (6 at
N = 5).
"""

from __future__ import annotations

import asyncio
import math
from itertools import pairwise
from typing import Literal

from pydantic import Field

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.layers import run_layers

Shape = Literal["chain", "star", "tree", "mesh", "layered", "random"]

PERSONAS = (
    "a meticulous mathematician",
    "a pragmatic engineer",
    "a careful scientist",
    "an experienced teacher",
    "a sharp data analyst",
    "a rigorous logician",
    "a detail-oriented editor",
    "a seasoned domain expert",
)


def build_topology(shape: Shape, names: list[str], seed: int) -> Topology:
    """The DAG of ``shape`` over ``names`` (``seed`` only matters for "random")."""
    if shape == "chain":
        return Topology.chain(names)
    if shape == "star":
        return Topology.star(names[0], names[1:])
    if shape == "tree":
        return Topology.tree(names, branching=2)
    if shape == "mesh":  # every forward pair u -> v (u < v): random_dag with p = 1
        topology = Topology.random_dag(names, p=1.0, seed=0)
        topology.name = "mesh"
        return topology
    if shape == "layered":
        count = max(1, int(math.log2(len(names))))
        sizes = [len(names) // count] * count
        sizes[0] += len(names) % count
        bounds = [sum(sizes[:i]) for i in range(count + 1)]
        return Topology.layered([names[a:b] for a, b in pairwise(bounds)])
    return Topology.random_dag(names, seed=seed)


def draft_prompt(task: Task) -> str:
    return (
        f"{task.prompt()}\n\nWrite a complete solution: explain your reasoning step by step, "
        "then give your final answer."
    )


def critic_prompt(task: Task, artifact: str) -> str:
    return (
        f"Task:\n{task.prompt()}\n\nA teammate wrote this solution:\n\n{artifact.strip()}\n\n"
        "Review it and name the single most important improvement it needs: an error to fix, a "
        "missing step, or an unclear final answer. If it needs none, reply 'No revision "
        "needed.' Do not write a new solution."
    )


def revise_prompt(task: Task, artifact: str, critique: str) -> str:
    return (
        f"Task:\n{task.prompt()}\n\nA teammate's solution:\n\n{artifact.strip()}\n\n"
        f"A reviewer's comment on it:\n\n{critique.strip()}\n\n"
        "Write an improved, complete solution that applies the comment where it is right. "
        "Explain your reasoning, then give your final answer."
    )


def merge_prompt(task: Task, versions: list[str]) -> str:
    blocks = "\n\n".join(f"--- Version {i} ---\n{v.strip()}" for i, v in enumerate(versions, 1))
    return (
        f"Task:\n{task.prompt()}\n\nSeveral versions of a solution:\n\n{blocks}\n\n"
        "Merge them into one solution: keep the strongest reasoning, settle any contradiction "
        "by deciding which side is right, and drop repetition. Write the merged solution "
        "directly, ending with the final answer."
    )


@register_method("macnet")
class MacNet(Method):
    """Actors on the nodes of a DAG, critics on its edges; artifacts flow in topological order."""

    roles = ("node", "critic", "output")
    paper = "Qian et al., arXiv 2406.07155"
    category = "group-of-agents topology"
    calls = (
        "sources + 2·|E| + merge nodes (+1 with several sinks); 5 agents: chain 9, star 10, mesh 24"
    )

    class Config(MethodConfig):
        topology: Shape = "random"
        agents: int = Field(5, ge=1)
        seed: int | None = None  # random DAG seed; None: drawn from the sample's rng
        personas: bool = True
        depth_temperature: bool = True

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered("node", self.config.agents, start=0)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        names = list(self.agent_names())
        seed = cfg.seed if cfg.seed is not None else ctx.rng.getrandbits(64)
        topology = build_topology(cfg.topology, names, seed)
        layers = topology.layers()
        ctx.topology = topology

        def temperature(depth: int) -> dict[str, float]:
            return {"temperature": 1 - depth / (len(layers) + 1)} if cfg.depth_temperature else {}

        actors: dict[str, Agent] = {}
        critics: dict[tuple[str, str], Agent] = {}
        for depth, layer in enumerate(layers, 1):
            for name in layer:
                persona = ctx.rng.choice(PERSONAS) if cfg.personas else "a helpful assistant"
                topology.add_node(name, role=persona)
                system = f"You are {persona}, working in a team that solves tasks together."
                actors[name] = ctx.agent(name, system=system, role="node", **temperature(depth))
                for u in topology.predecessors(name):
                    critic = f"critic:{u}->{name}"
                    topology.add_edge(u, name, critic=critic)
                    critics[u, name] = ctx.agent(
                        critic,
                        system="You are a critical reviewer. You point out what to improve.",
                        role="critic",
                        **temperature(depth),
                    )

        artifacts: dict[str, str] = {}
        sinks = topology.sinks()
        # the best artifact so far: a sink's over any other, then the latest in layer order
        rank = {n: (n in sinks, i) for i, n in enumerate(n for layer in layers for n in layer)}

        async def through_edge(u: str, upstream: str, v: str, r: int, kind: str) -> Message:
            critique = await critics[u, v].reply(
                critic_prompt(task, upstream),
                round=r, kind="critique", recipients=(v,), remember=False,
            )  # fmt: skip
            return await actors[v].reply(
                revise_prompt(task, upstream, critique.content),
                round=r, kind=kind, remember=False,
            )  # fmt: skip

        async def run_node(v: str, r: int, inputs: list[tuple[str, str]]) -> str:
            # the call that yields the artifact is awaited in this task, with no task in
            # between, so the proposal below is made even in a budget stop's grace period
            if not inputs:
                artifact = await actors[v].reply(
                    draft_prompt(task), round=r, kind="artifact", remember=False
                )
            elif len(inputs) == 1:
                artifact = await through_edge(*inputs[0], v, r, "artifact")
            else:
                versions = await asyncio.gather(
                    *(through_edge(u, upstream, v, r, "revision") for u, upstream in inputs)
                )
                artifact = await actors[v].reply(
                    merge_prompt(task, [m.content for m in versions]),
                    round=r, kind="artifact", remember=False,
                )  # fmt: skip
            artifacts[v] = artifact.content
            best = max(artifacts, key=rank.__getitem__)
            ctx.propose(artifacts[best], node=best)
            return artifact.content

        async for _ in run_layers(topology, run_node, layers=layers):
            pass  # each node proposes the best artifact so far itself, as soon as it has one

        metadata = {
            "topology": topology.name,
            "seed": seed if cfg.topology == "random" else None,
            "edges": [list(edge) for edge in topology.edges],
            "sinks": sinks,
        }
        if len(sinks) == 1:
            return Solution(answer=artifacts[sinks[0]], metadata={**metadata, "output": "sink"})
        output = ctx.agent("output", **temperature(len(layers) + 1))
        merged = await output.reply(
            merge_prompt(task, [artifacts[s] for s in sinks]),
            round=len(layers), kind="aggregate", remember=False,
        )  # fmt: skip
        return Solution(answer=merged.content, metadata={**metadata, "output": "merged sinks"})
