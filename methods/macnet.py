"""MacNet: multi-agent collaboration networks over a DAG.

Qian, Xie, Wang, Liu, Dang, Du, Chen, Yang, Liu, Sun. "Scaling Large-Language-Model-based
Multi-Agent Collaboration". arXiv:2406.07155 (ICLR 2025).

Algorithm (N actor nodes on a DAG, one critic on every edge):

1. Build the DAG: chain ``i -> i+1``; star ``0 -> i``; binary tree ``i -> 2i+1, 2i+2``; mesh
   every ``u -> v`` with ``u < v``; layered ``floor(log2 N)`` layers, fully connected between
   neighbours (the first takes the remainder); random: ``Topology.random_dag``
   (``random_graph="pairs"``) or MASLab's edge count (``random_graph="edge_count"``), seeded by
   the config ``seed`` or, if unset, by the sample's ``ctx.rng``. With ``output_node`` every
   sink gets an edge into one more node, ``output``. Each actor gets a persona drawn with
   ``ctx.rng`` from ``persona_pool``; actors and the critics on their incoming edges sample at
   ``1 - depth / (L + 1)`` for the depth-th of L layers (1-based; the output node, when there
   is one, is the L+1-th layer and samples at 0; ``depth_temperature=False`` keeps the run's).
2. Run the layers in topological order; the nodes of a layer run concurrently.
   - A source node writes the first artifact from the task alone.
   - For each edge ``u -> v`` (concurrently): the edge's critic reviews u's artifact and names
     the most important improvement; v's actor then rewrites u's artifact given the critique.
   - A node with several predecessors merges its rewritten versions in one aggregation call;
     otherwise the single rewrite is its artifact. Only artifacts travel along edges, never
     conversations: every call is stateless.
3. The answer is the sink's artifact (the output node's, with ``output_node``); without an
   output node, several sinks are merged by one output aggregation call.

LLM calls: ``|sources| + 2·|E| + |{v : indegree(v) >= 2}| + [|sinks| >= 2]``, plus
``2·|sinks|`` with ``output_node`` (its edges). For N = 5: chain 9, star 10, tree 10, mesh 24,
layered 18; ``preset=maslab``: 1 + 2·(8 + 1) + 2 = 21 (the DAG below).

Model roles: ``node`` (the actors ``node_0`` .. ``node_<N-1>``), ``critic`` (every edge's
critic, named after its edge at run time) and ``output`` (the output node, or the merge of
several sinks).

Budget stop: the artifact of the latest node in topological order, a sink's once one exists.

``preset=maslab`` (``--config preset=maslab``) runs MASLab's protocol (``methods/macnet`` at
commit 74265c7, ``configs/config_main.yaml`` and ``macnet_main.py``) with our prompts, for the
settings left at their defaults:

- ``agents=5`` (``agent_num: 5``) and ``topology="random"`` (``topology: random``).
- ``random_graph="edge_count"`` and ``seed=2025``: ``generate_random`` draws an edge count
  uniformly from N-1 .. N(N-1)/2 and takes that many forward pairs ``u < v`` from a shuffled
  list, after ``inference`` has called ``random.seed(2025)``; Python's ``random`` with that
  seed gives the same DAG for every sample: node_3->node_4, node_1->node_3, node_1->node_4,
  node_0->node_4, node_2->node_4, node_0->node_1, node_1->node_2, node_0->node_3: one source
  (node_0), one sink (node_4), and node_3 and node_4 merge two and four versions. Nodes no
  edge touches are dropped: MASLab builds its nodes from the edges (a single agent stays).
- ``output_node=True``: MASLab's virtual output node (``node_out_id: -2``) is a node like the
  others: each sink's answer crosses an edge into it (its virtual input node's edges cost the
  sources' single call, as here).
- ``persona_pool="professions"``: MASLab draws each node's system prompt with
  ``random.randint(1, 99)`` from ``prompt_main.SYSTEM_PROMPT`` (``type: Travel``, i.e. not
  ``default``): 99 profession profiles; ours are 99 professions of our own wording.
- The temperatures are ours already: MASLab's ``1 - depth / max_depth`` counts the virtual
  input node as depth 0 and the output node as ``max_depth`` (0.8, 0.6, 0.4, 0.2 and 0 above).
- A merge at two or more incoming versions (``aggregate_unit_num: 2``), as ours.

MASLab as run makes fewer, different calls: its edge ``u -> v`` passes the answers of u's
predecessors, which are deleted before u's layer runs, so the text it reviews is always empty:
its critics never run and every assistant call answers the question afresh (10 calls on the
DAG above: one per edge, the input and output edges included), and its answer is the output
node's single call at temperature 0, which sees no upstream answer. It also merges only when a
node's versions number its predecessors not yet processed, so a node whose predecessors sit in
different layers ends with the first version it received (neither merge above runs). Neither
bug is copied: here the DAG's artifacts really flow and every node with two or more
predecessors merges (21 calls), so MASLab's MacNet numbers are those of a single
temperature-0 answer under MacNet's prompt, and ours may differ from them accordingly. MASLab
also draws the personas from the reseeded global stream (the same ones for every sample,
threads aside); we draw them per sample.

Deviations: prompts are our own paraphrase. The paper's virtual input and output nodes are
implicit by default: the input edge costs the source's single call (no critic, as there is
nothing to review), and the output node refines nothing: it only merges several sinks, so a
chain costs ``2N - 1``; ``output_node=True`` makes it a node with edges (a chain: ``2N + 1``).
Each edge's critic is its own agent, as in the paper (in MASLab, v's agent plays it). Personas
come from a small built-in list by default, not the ~100 SRDD profiles
(``persona_pool="professions"``: 99 of our own). Random DAGs use
``random_dag`` (each forward pair with probability 1/2, weakly connected) by default instead of
MASLab's uniformly drawn edge count.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Mapping
from itertools import pairwise
from typing import Any, ClassVar, Literal

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
RandomGraph = Literal["pairs", "edge_count"]
OUTPUT = "output"

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
PROFESSIONS = (
    "an actuary who prices risk from mortality and loss tables",
    "an air traffic controller who keeps many moving flights safely apart",
    "an archaeologist who reconstructs past lives from excavated remains",
    "an architect who designs buildings that are safe, useful and beautiful",
    "an astronomer who models the motion and light of stars and galaxies",
    "an auditor who traces every figure in a company's accounts to its source",
    "a baker who scales recipes and controls fermentation by the gram",
    "a biochemist who studies the reactions that keep cells alive",
    "a bridge inspector who looks for cracks, corrosion and fatigue in steel",
    "a cardiologist who diagnoses and treats diseases of the heart",
    "a cartographer who turns survey data into accurate maps",
    "a chemical engineer who scales laboratory reactions up to whole plants",
    "a chess coach who teaches players to calculate variations precisely",
    "a civil servant who drafts regulations and checks them for loopholes",
    "a climate scientist who models long-term trends in temperature and rainfall",
    "a clinical pharmacist who checks doses and drug interactions",
    "a composer who structures music through harmony, rhythm and form",
    "a construction manager who schedules crews, materials and budgets",
    "a copy editor who catches every inconsistency in a manuscript",
    "a defence lawyer who tests every piece of the prosecution's evidence",
    "a cryptographer who designs ciphers and looks for ways to break them",
    "a data engineer who builds reliable pipelines for large datasets",
    "a dentist who diagnoses and repairs problems of the teeth and gums",
    "a dietitian who plans balanced meals for each patient's needs",
    "an ecologist who studies how species depend on each other and their habitat",
    "an economist who analyses markets, prices and incentives",
    "an electrician who wires buildings safely and to code",
    "an electrical engineer who designs circuits and power systems",
    "an emergency physician who makes sound decisions quickly under uncertainty",
    "an environmental lawyer who applies pollution and land-use law",
    "an epidemiologist who tracks how diseases spread through populations",
    "a film editor who builds a coherent story from hours of footage",
    "a financial planner who balances savings, debt and retirement goals",
    "a firefighter who assesses hazards and acts fast under pressure",
    "a forensic accountant who uncovers fraud hidden in financial records",
    "a game designer who balances rules so that play stays fair and fun",
    "a geneticist who studies how traits are inherited",
    "a geographer who explains how places, people and landscapes interact",
    "a geologist who reads the history of the earth in layers of rock",
    "a mathematics teacher who explains every step of a proof",
    "a historian who weighs primary sources against each other",
    "a hotel manager who keeps guests, staff and bookings running smoothly",
    "a human-resources manager who settles workplace conflicts fairly",
    "a hydrologist who models rivers, groundwater and floods",
    "an industrial designer who shapes products around how people use them",
    "an insurance underwriter who weighs the odds of a claim",
    "an interpreter who conveys meaning precisely between two languages",
    "an investigative journalist who verifies every claim before publishing it",
    "a judge who weighs arguments and applies the law impartially",
    "a librarian who finds the authoritative source for any question",
    "a linguist who analyses the structure and history of languages",
    "a logistics planner who routes goods at the lowest cost and delay",
    "a machinist who works metal to a hundredth of a millimetre",
    "a marine biologist who studies life in the oceans",
    "a market researcher who designs surveys and reads their results critically",
    "a materials scientist who relates a material's structure to its strength",
    "a mechanical engineer who designs machines and checks the stresses in them",
    "a meteorologist who forecasts the weather from atmospheric data",
    "a microbiologist who cultures and identifies bacteria and viruses",
    "a midwife who guides families through pregnancy and birth",
    "a museum curator who researches and explains collections",
    "a music teacher who trains students' ear and technique",
    "a network administrator who keeps computer networks secure and available",
    "a neuroscientist who studies how the brain processes information",
    "a nurse who monitors patients and notices small changes early",
    "an occupational therapist who helps people regain everyday skills",
    "an oceanographer who measures currents, tides and the chemistry of the sea",
    "an operations researcher who optimises schedules with mathematical models",
    "an optometrist who examines eyes and prescribes lenses",
    "a paediatrician who cares for the health of children",
    "a patent attorney who compares inventions with the prior art",
    "a pharmacologist who studies how drugs act on the body",
    "a philosopher who examines arguments for hidden assumptions",
    "a photographer who controls light, exposure and composition",
    "a physiotherapist who restores movement after an injury",
    "a physicist who explains phenomena from first principles",
    "a pilot who follows checklists and cross-checks every instrument",
    "a political scientist who compares institutions and elections",
    "a product manager who weighs what users need against what it costs to build",
    "a project manager who keeps tasks, risks and deadlines under control",
    "a psychologist who studies how people think, feel and decide",
    "a public-health officer who plans vaccination and prevention campaigns",
    "a quality inspector who tests products against their specifications",
    "a radiologist who reads X-ray, CT and MRI images",
    "a property appraiser who values buildings from comparable sales",
    "a research chemist who synthesises and characterises new compounds",
    "a robotics engineer who integrates sensors, motors and control software",
    "a social worker who connects families with the support they need",
    "a software engineer who writes and tests reliable programs",
    "a sociologist who studies how groups and institutions shape behaviour",
    "a statistician who designs studies and tests hypotheses rigorously",
    "a structural engineer who calculates the loads a building must carry",
    "a surgeon who plans each operation step by step",
    "a tax adviser who applies tax rules to individual cases",
    "a translator who renders technical documents faithfully",
    "a travel agent who plans routes, connections and budgets for trips",
    "an urban planner who designs transport, housing and public space",
    "a veterinarian who diagnoses and treats animals",
    "a wildlife conservationist who protects endangered species and their habitats",
)
"""99 profession personas (our wording): the size of MASLab's pool."""
POOLS: dict[str, tuple[str, ...]] = {"short": PERSONAS, "professions": PROFESSIONS}

PRESETS: dict[str, dict[str, Any]] = {
    "maslab": {
        "agents": 5,
        "topology": "random",
        "random_graph": "edge_count",
        "seed": 2025,
        "output_node": True,
        "persona_pool": "professions",
    },
}


def edge_count_dag(count: int, seed: int) -> list[tuple[int, int]]:
    """MASLab's random DAG over ``count`` nodes: an edge count drawn uniformly from count-1 ..
    count(count-1)/2, then that many forward pairs ``u < v`` from a shuffled list of them."""
    rng = random.Random(seed)
    edges = rng.randint(count - 1, count * (count - 1) // 2)
    pairs = [(u, v) for u in range(count) for v in range(u + 1, count)]
    rng.shuffle(pairs)
    return pairs[:edges]


def build_topology(
    shape: Shape, names: list[str], seed: int, random_graph: RandomGraph = "pairs"
) -> Topology:
    """The DAG of ``shape`` over ``names`` (``seed`` and ``random_graph`` only matter for
    "random")."""
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
    if random_graph == "edge_count":  # nodes no edge touches are left out, as in MASLab
        edges = [(names[u], names[v]) for u, v in edge_count_dag(len(names), seed)]
        nodes = () if edges else names[:1]  # a single agent stays
        return Topology.from_edges(edges, name="random_edge_count", nodes=nodes)
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

    roles = ("node", "critic", OUTPUT)
    paper = "Qian et al., arXiv 2406.07155"
    category = "group-of-agents topology"
    calls = (
        "sources + 2·|E| + merge nodes (+1 with several sinks; +2·sinks with `output_node`); "
        "5 agents: chain 9, star 10, mesh 24; `preset=maslab`: 1 + 2·(8 + 1) + 2 = 21"
    )

    class Config(MethodConfig):
        presets: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
        preset: Literal["maslab"] | None = None
        """Another protocol's values (``PRESETS``) for the settings left at their defaults."""
        topology: Shape = "random"
        agents: int = Field(5, ge=1)
        seed: int | None = None  # random DAG seed; None: drawn from the sample's rng
        random_graph: RandomGraph = Field(
            "pairs",
            description="how topology=random draws its DAG: 'pairs' (each forward pair with "
            "probability 1/2, weakly connected) or 'edge_count' (MASLab's: a uniform edge "
            "count, then that many forward pairs at random)",
        )
        output_node: bool = Field(
            False,
            description="a node 'output' after every sink (MASLab's virtual output node): each "
            "sink's artifact crosses an edge (critic and rewrite) into it, merged if several",
        )
        personas: bool = True
        persona_pool: Literal["short", "professions"] = Field(
            "short",
            description="the personas drawn: 'short' (8 built-in) or 'professions' (99, the "
            "size of MASLab's pool)",
        )
        depth_temperature: bool = True

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered("node", self.config.agents, start=0)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        names = list(self.agent_names())
        seed = cfg.seed if cfg.seed is not None else ctx.rng.getrandbits(64)
        topology = build_topology(cfg.topology, names, seed, cfg.random_graph)
        if cfg.output_node:
            for sink in topology.sinks():
                topology.add_edge(sink, OUTPUT)
        layers = topology.layers()
        ctx.topology = topology
        # the virtual output node is one layer deeper than the last, or the output node's own
        span = len(layers) if cfg.output_node else len(layers) + 1

        def temperature(depth: int) -> dict[str, float]:
            return {"temperature": 1 - depth / span} if cfg.depth_temperature else {}

        pool = POOLS[cfg.persona_pool]
        actors: dict[str, Agent] = {}
        critics: dict[tuple[str, str], Agent] = {}
        for depth, layer in enumerate(layers, 1):
            for name in layer:
                persona = ctx.rng.choice(pool) if cfg.personas else "a helpful assistant"
                topology.add_node(name, role=persona)
                system = f"You are {persona}, working in a team that solves tasks together."
                role = OUTPUT if name == OUTPUT else "node"
                actors[name] = ctx.agent(name, system=system, role=role, **temperature(depth))
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
            how = "output node" if cfg.output_node else "sink"
            return Solution(answer=artifacts[sinks[0]], metadata={**metadata, "output": how})
        output = ctx.agent(OUTPUT, **temperature(span))
        merged = await output.reply(
            merge_prompt(task, [artifacts[s] for s in sinks]),
            round=len(layers), kind="aggregate", remember=False,
        )  # fmt: skip
        return Solution(answer=merged.content, metadata={**metadata, "output": "merged sinks"})
