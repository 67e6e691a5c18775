"""Running a DAG of agents layer by layer: the nodes of a layer concurrently, each given its
predecessors' outputs in the topology's node order, never in the order calls finished."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

from maslab.core.topology import Topology

T = TypeVar("T")


async def run_layers(
    topology: Topology,
    node: Callable[[str, int, list[tuple[str, T]]], Awaitable[T]],
    *,
    layers: Sequence[Sequence[str]] | None = None,
) -> AsyncIterator[tuple[int, dict[str, T]]]:
    """Run ``node(name, depth, inputs)`` for every node, one layer after the other.

    ``inputs`` holds ``(predecessor, its output)`` for each predecessor already run, in the
    topology's node order. The nodes of a layer run concurrently; after each layer the runner
    yields ``(depth, {name: output})`` in the layer's order, so a method can vote or propose
    between layers.

    Args:
        topology: The DAG; a cycle is a one-line ConfigError (:meth:`Topology.layers`).
        node: One node's call; its output is what its successors are given.
        layers: The layers to run (default ``topology.layers()``), e.g. all but the last.
    """
    order = {name: i for i, name in enumerate(topology.nodes)}
    outputs: dict[str, T] = {}

    def inputs(name: str) -> list[tuple[str, T]]:
        done = [p for p in topology.predecessors(name) if p in outputs]
        return [(p, outputs[p]) for p in sorted(done, key=order.__getitem__)]

    for depth, layer in enumerate(topology.layers() if layers is None else layers):
        results = await asyncio.gather(*(node(name, depth, inputs(name)) for name in layer))
        ran = dict(zip(layer, results, strict=True))
        outputs.update(ran)
        yield depth, ran
