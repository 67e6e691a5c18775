"""GoAgent step 2: which groups work on a task and how they hand work on (the LLM selector)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import networkx as nx

from maslab.core.task import Task
from maslab.methods.goagent.pool import Group

DEFAULT_GROUPS = 2


@dataclass(frozen=True)
class Selection:
    """Chosen group names in topological order and inter-group edges between them."""

    groups: tuple[str, ...]
    edges: tuple[tuple[str, str], ...] = ()

    def size(self) -> int:
        return len(self.groups) + len(self.edges)


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
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(names)
    raw = data.get("edges")
    for item in raw if isinstance(raw, list) else []:
        raw_ends = _edge_ends(item)
        ends = [end for end in map(lookup, raw_ends) if end in names]  # the known ones
        if len(raw_ends) != 2 or len(ends) != 2 or ends[0] == ends[1]:
            notes.append(f"dropped edge {item!r}")
        elif nx.has_path(graph, ends[1], ends[0]):
            notes.append(f"dropped edge {ends[0]} -> {ends[1]}: it closes a cycle")
        else:
            graph.add_edge(*ends)
    order = tuple(nx.lexicographical_topological_sort(graph, key=names.index))
    return Selection(order, tuple(graph.edges)), notes
