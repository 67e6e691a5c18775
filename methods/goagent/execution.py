"""GoAgent step 3: the agent graph of a selection and what each agent is shown."""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx

from maslab.core.messages import Message
from maslab.core.task import Task
from maslab.core.topology import Topology
from maslab.methods.goagent.pool import Group
from maslab.methods.goagent.selection import Selection


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
    forward: nx.DiGraph[str] = nx.DiGraph()
    backward: nx.DiGraph[str] = nx.DiGraph()
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
