"""Who sees whom: agent communication topologies as data over a ``networkx.DiGraph``.

An edge ``u -> v`` means "v sees what u sends". Builders and learned methods produce
``Topology`` objects; runners ask them for ``layers()`` and ``visible_messages()``.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import pairwise, permutations, product
from typing import Any, Literal, TypeVar

import networkx as nx

from maslab.core.messages import Message, Transcript
from maslab.errors import ConfigError

Direction = Literal["out", "in", "both"]
Template = Literal["complete", "chain", "star", "none"]
Rounds = Literal["previous", "current", "history"]

T = TypeVar("T")
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_]")


def _pick(options: Mapping[str, T], key: str, what: str) -> T:
    """``options[key]``, or a ConfigError naming the valid keys."""
    if key not in options:
        raise ConfigError(
            f"unknown {what} {key!r}; expected one of {', '.join(map(repr, options))}"
        )
    return options[key]


def _unique(names: Iterable[str], what: str) -> list[str]:
    """``names`` as a list, checked to be non-empty and free of duplicates."""
    if isinstance(names, str):
        raise ConfigError(f"{what} takes a list of names, not the string {names!r}")
    names = list(names)
    if not names:
        raise ConfigError(f"{what} needs at least one name")
    if dupes := [n for n, count in Counter(names).items() if count > 1]:
        raise ConfigError(f"{what} got duplicate names: {', '.join(map(repr, dupes))}")
    return names


def _dot_quote(value: Any) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dot_attrs(attrs: Mapping[str, Any]) -> str:
    pairs = ", ".join(f"{_dot_quote(k)}={_dot_quote(v)}" for k, v in attrs.items())
    return f" [{pairs}]" if attrs else ""


class Topology:
    """A directed graph of agent names; edge ``u -> v`` means v sees what u sends."""

    def __init__(self, graph: nx.DiGraph | None = None, *, name: str = "") -> None:
        self._graph = graph if graph is not None else nx.DiGraph()
        self.name = name

    # -- graph queries ---------------------------------------------------------------------

    @property
    def graph(self) -> nx.DiGraph:
        """The underlying networkx graph (shared, not copied)."""
        return self._graph

    @property
    def nodes(self) -> list[str]:
        """Agent names in insertion order."""
        return list(self._graph.nodes)

    @property
    def edges(self) -> list[tuple[str, str]]:
        """``(u, v)`` pairs in insertion order."""
        return list(self._graph.edges)

    def __contains__(self, node: object) -> bool:
        return node in self._graph

    def __len__(self) -> int:
        return len(self._graph)

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, nodes={self.nodes!r}, edges={self.edges!r})"

    def add_node(self, node: str, /, **attrs: Any) -> None:
        """Add (or update the attributes of) an agent."""
        self._graph.add_node(node, **attrs)

    def add_edge(self, u: str, v: str, /, **attrs: Any) -> None:
        """Let ``v`` see what ``u`` sends; missing endpoints are added."""
        self._graph.add_edge(u, v, **attrs)

    def predecessors(self, node: str) -> list[str]:
        """Agents whose messages ``node`` sees, in edge insertion order."""
        return list(self._graph.predecessors(self._require(node)))

    def successors(self, node: str) -> list[str]:
        """Agents that see what ``node`` sends, in edge insertion order."""
        return list(self._graph.successors(self._require(node)))

    def sources(self) -> list[str]:
        """Agents with no predecessor."""
        return [n for n, degree in self._graph.in_degree if degree == 0]

    def sinks(self) -> list[str]:
        """Agents with no successor."""
        return [n for n, degree in self._graph.out_degree if degree == 0]

    def is_dag(self) -> bool:
        return nx.is_directed_acyclic_graph(self._graph)

    def layers(self) -> list[list[str]]:
        """Topological generations, each in node insertion order; a layer can run concurrently."""
        if not self.is_dag():
            cycle = [u for u, _ in nx.find_cycle(self._graph)]
            path = " -> ".join([*cycle, cycle[0]])
            raise ConfigError(f"{self._what} has a cycle {path}; layers() needs a DAG")
        order = {n: i for i, n in enumerate(self._graph)}
        return [sorted(g, key=order.__getitem__) for g in nx.topological_generations(self._graph)]

    def visible_messages(
        self,
        agent: str,
        transcript: Transcript | Iterable[Message],
        round: int,
        *,
        rounds: Rounds = "previous",
        include_self: bool = False,
    ) -> list[Message]:
        """Messages ``agent`` may read at ``round``, by round, then in the topology's node order.

        The order never depends on which concurrent call finished first (the transcript's
        order does), so prompts built from it are the same on every run. A message is visible
        when a predecessor of ``agent`` sent it, it is addressed to ``agent``, and its round is
        in the window.

        Args:
            agent: The reader.
            transcript: The sample's messages (``ctx.transcript``).
            round: The round the reader is about to speak in.
            rounds: The window: ``round - 1`` ("previous"), ``round`` ("current", for edges
                within a round) or every round before ``round`` ("history").
            include_self: Count ``agent``'s own messages too.
        """
        senders = set(self.predecessors(agent))
        if include_self:
            senders.add(agent)
        in_window: Callable[[int], bool] = _pick(
            {
                "previous": lambda r: r == round - 1,
                "current": lambda r: r == round,
                "history": lambda r: r < round,
            },
            rounds,
            "rounds mode",
        )
        order = {n: i for i, n in enumerate(self._graph)}
        visible = [
            m
            for m in transcript
            if m.sender in senders
            and m.addressed_to(agent)
            and m.round is not None
            and in_window(m.round)
        ]
        return sorted(visible, key=lambda m: (m.round, order[m.sender]))

    def group_of(self, node: str) -> str | None:
        """The ``group`` attribute of ``node`` (set by ``groups()``), or None."""
        return self._graph.nodes[self._require(node)].get("group")

    def group_members(self, group: str) -> list[str]:
        """Agents whose ``group`` attribute is ``group``, in insertion order."""
        if members := [n for n, data in self._graph.nodes(data=True) if data.get("group") == group]:
            return members
        raise ConfigError(f"{self._what} has no group {group!r}")

    @property
    def _what(self) -> str:
        return f"topology {self.name!r}" if self.name else "topology"

    def _require(self, node: str) -> str:
        if node not in self._graph:
            known = ", ".join(map(repr, self._graph))
            raise ConfigError(f"{self._what} has no agent {node!r}; known agents: {known}")
        return node

    # -- builders --------------------------------------------------------------------------

    @classmethod
    def _build(cls, name: str, nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> Topology:
        topology = cls(name=name)
        topology._graph.add_nodes_from(nodes)
        topology._graph.add_edges_from(edges)
        return topology

    @classmethod
    def from_edges(
        cls, edges: Iterable[tuple[str, str]], *, name: str = "", nodes: Iterable[str] = ()
    ) -> Topology:
        """The graph of ``edges`` (``u -> v``: v sees what u sends), its agents in the order the
        edges first name them, then the agents of ``nodes`` no edge names (isolated agents)."""
        topology = cls(name=name)
        topology._graph.add_edges_from(edges)
        topology._graph.add_nodes_from(nodes)
        return topology

    @classmethod
    def chain(cls, names: Sequence[str]) -> Topology:
        """``a0 -> a1 -> ... -> a_{n-1}``."""
        names = _unique(names, "chain()")
        return cls._build("chain", names, pairwise(names))

    @classmethod
    def star(cls, center: str, leaves: Sequence[str], *, direction: Direction = "out") -> Topology:
        """``center -> leaf`` ("out"), ``leaf -> center`` ("in"), or both ways ("both")."""
        names = _unique([center, *leaves], "star()")
        spokes = [(center, leaf) for leaf in names[1:]]
        edges = _pick(
            {
                "out": spokes,
                "in": [(v, u) for u, v in spokes],
                "both": [edge for u, v in spokes for edge in ((u, v), (v, u))],
            },
            direction,
            "star direction",
        )
        return cls._build("star", names, edges)

    @classmethod
    def tree(cls, names: Sequence[str], *, branching: int = 2) -> Topology:
        """``names[0]`` is the root; children are filled breadth-first, parent -> child."""
        names = _unique(names, "tree()")
        if branching < 1:
            raise ConfigError(f"tree() needs branching >= 1, got {branching}")
        edges = ((names[(i - 1) // branching], child) for i, child in enumerate(names[1:], 1))
        return cls._build("tree", names, edges)

    @classmethod
    def complete(cls, names: Sequence[str]) -> Topology:
        """Every ordered pair ``u -> v`` with ``u != v`` (a mesh without self loops)."""
        names = _unique(names, "complete()")
        return cls._build("complete", names, permutations(names, 2))

    @classmethod
    def layered(cls, layers: Sequence[Sequence[str]]) -> Topology:
        """Every node of layer ``i`` -> every node of layer ``i + 1``."""
        rows = [_unique(layer, f"layered() layer {i}") for i, layer in enumerate(layers)]
        names = _unique([n for row in rows for n in row], "layered()")
        edges = (edge for upper, lower in pairwise(rows) for edge in product(upper, lower))
        return cls._build("layered", names, edges)

    @classmethod
    def ring(cls, names: Sequence[str]) -> Topology:
        """``a0 -> a1 -> ... -> a_{n-1} -> a0``."""
        names = _unique(names, "ring()")
        if len(names) < 2:
            raise ConfigError(f"ring() needs at least two names, got {names!r}")
        return cls._build("ring", names, zip(names, [*names[1:], names[0]], strict=True))

    @classmethod
    def random_dag(cls, names: Sequence[str], *, p: float = 0.5, seed: int) -> Topology:
        """``names[i] -> names[j]`` (``i < j``) with probability ``p``, reproducible per ``seed``.

        A node left without a predecessor gets ``names[i - 1] -> names[i]``, so the graph is
        weakly connected.
        """
        names = _unique(names, "random_dag()")
        if not 0 <= p <= 1:
            raise ConfigError(f"random_dag() needs 0 <= p <= 1, got {p}")
        rng = random.Random(seed)
        edges = []
        for j, child in enumerate(names[1:], 1):
            parents = [u for u in names[:j] if rng.random() < p] or [names[j - 1]]
            edges += [(u, child) for u in parents]
        return cls._build("random_dag", names, edges)

    @classmethod
    def groups(
        cls,
        groups: Mapping[str, Sequence[str]],
        *,
        intra: Template | Mapping[str, Template] = "complete",
        inter: Sequence[tuple[str, str]] = (),
    ) -> Topology:
        """Groups wired inside by an ``intra`` template and to each other by ``inter`` edges.

        ``intra`` is one template for all groups or a per-group mapping (missing groups use
        "complete"); "star" centres on the first member, both ways. An inter edge ``(g1, g2)``
        links every sink of g1's subgraph to every source of g2's (all members when it has
        none). Each member gets the node attribute ``group``.
        """
        if not groups:
            raise ConfigError("groups() needs at least one group")
        templates = intra if isinstance(intra, Mapping) else dict.fromkeys(groups, intra)
        if stray := [g for g in templates if g not in groups]:
            raise ConfigError(f"groups() intra names unknown groups: {', '.join(map(repr, stray))}")
        members = {g: _unique(names, f"groups() group {g!r}") for g, names in groups.items()}
        _unique([n for names in members.values() for n in names], "groups()")
        builders: dict[str, Callable[[list[str]], Topology]] = {
            "complete": cls.complete,
            "chain": cls.chain,
            "star": lambda names: cls.star(names[0], names[1:], direction="both"),
            "none": lambda names: cls._build("none", names, ()),
        }
        topology = cls(name="groups")
        ends: dict[str, tuple[list[str], list[str]]] = {}
        for group, names in members.items():
            sub = _pick(builders, templates.get(group, "complete"), "intra template")(names)
            topology._graph.add_nodes_from(names, group=group)
            topology._graph.add_edges_from(sub.edges)
            ends[group] = (sub.sinks() or names, sub.sources() or names)
        for g1, g2 in inter:
            sinks, _ = _pick(ends, g1, "inter group")
            _, sources = _pick(ends, g2, "inter group")
            topology._graph.add_edges_from(product(sinks, sources))
        return topology

    # -- export ----------------------------------------------------------------------------

    def to_mermaid(self) -> str:
        """A ``flowchart LR`` diagram; ids are ``n<i>_<name with [^A-Za-z0-9_] as _>``."""
        ids = {n: f"n{i}_{_UNSAFE_ID.sub('_', n)}" for i, n in enumerate(self._graph)}
        lines = ["flowchart LR"]
        for node, role in self._graph.nodes(data="role"):
            label = (node if role is None else f"{node} ({role})").replace('"', "#quot;")
            lines.append(f'    {ids[node]}["{label}"]')
        lines += [f"    {ids[u]} --> {ids[v]}" for u, v in self._graph.edges]
        return "\n".join(lines)

    def to_dot(self) -> str:
        """A Graphviz ``digraph`` with every node and edge attribute."""
        lines = [f"digraph {_dot_quote(self.name)} {{"]
        lines += [f"  {_dot_quote(n)}{_dot_attrs(a)};" for n, a in self._graph.nodes(data=True)]
        lines += [
            f"  {_dot_quote(u)} -> {_dot_quote(v)}{_dot_attrs(a)};"
            for u, v, a in self._graph.edges(data=True)
        ]
        lines.append("}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "nodes": [{"name", "attrs"}], "edges": [{"source", "target", "attrs"}]}``."""
        return {
            "name": self.name,
            "nodes": [{"name": n, "attrs": dict(a)} for n, a in self._graph.nodes(data=True)],
            "edges": [
                {"source": u, "target": v, "attrs": dict(a)}
                for u, v, a in self._graph.edges(data=True)
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        """Inverse of ``to_dict()``."""
        try:
            topology = cls(name=data["name"])
            topology._graph.add_nodes_from((n["name"], n["attrs"]) for n in data["nodes"])
            topology._graph.add_edges_from(
                (e["source"], e["target"], e["attrs"]) for e in data["edges"]
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(
                f"malformed topology dict ({type(exc).__name__}: {exc}); use the to_dict() shape"
            ) from exc
        return topology
