"""A topology drawn as inline SVG for the report: no plotting library is involved."""

from __future__ import annotations

import math
from functools import lru_cache
from html import escape

import orjson

_ARROW = (
    '<defs><marker id="maslab-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#666"/>'
    "</marker></defs>"
)


def _edge(a: tuple[float, float], b: tuple[float, float], r: float, bend: float) -> str:
    """An arrow from the circle of radius ``r`` at ``a`` to the one at ``b``; ``bend`` > 0
    curves it to the left (so the two edges between a mutual pair stay apart)."""
    (ax, ay), (bx, by) = a, b
    dx, dy = bx - ax, by - ay
    length = math.hypot(dx, dy) or 1.0
    nx_, ny_ = -dy / length, dx / length  # the left normal
    cx, cy = (ax + bx) / 2 + bend * length * nx_, (ay + by) / 2 + bend * length * ny_

    def rim(px: float, py: float, gap: float) -> tuple[float, float]:
        """Where the edge leaves (or enters) the circle at (px, py): towards the control point."""
        tx, ty = cx - px, cy - py
        norm = math.hypot(tx, ty) or 1.0
        return px + tx / norm * (r + gap), py + ty / norm * (r + gap)

    (sx, sy), (ex, ey) = rim(ax, ay, 0), rim(bx, by, 2)  # the arrowhead ends just outside
    return (
        f'<path d="M{sx:.1f},{sy:.1f} Q{cx:.1f},{cy:.1f} {ex:.1f},{ey:.1f}" fill="none" '
        'stroke="#666" stroke-width="1.3" marker-end="url(#maslab-arrow)"/>'
    )


@lru_cache(maxsize=64)
def topology_svg(spec: bytes) -> str:
    """The topology in ``spec`` (``Topology.to_dict()`` as JSON) drawn as inline SVG.

    A DAG is drawn in layers (topological generations) left to right, anything else on a circle;
    nodes are sized to fit their labels. No plotting library is involved.
    """
    from maslab.core.topology import Topology

    topology = Topology.from_dict(orjson.loads(spec))
    graph = topology.graph
    if not graph:
        return ""
    r = max(18.0, 3.3 * max(len(str(n)) for n in graph) + 8)  # radius for 11 px labels
    margin = 1.6 * r
    if topology.is_dag():
        layers = topology.layers()
        rows = max(map(len, layers))
        pos = {
            name: (margin + x * 3.4 * r, margin + (y + (rows - len(layer)) / 2) * 2.6 * r)
            for x, layer in enumerate(layers)
            for y, name in enumerate(layer)
        }
    else:
        k = len(graph)
        ring = max(2.0 * r, 1.4 * r / math.sin(math.pi / max(2, k)))
        pos = {
            name: (
                margin + ring + ring * math.cos(2 * math.pi * i / k - math.pi / 2),
                margin + ring + ring * math.sin(2 * math.pi * i / k - math.pi / 2),
            )
            for i, name in enumerate(graph)
        }
    width = max(x for x, _ in pos.values()) + margin
    height = max(y for _, y in pos.values()) + margin
    edges = []
    for u, v in graph.edges:
        if u == v:  # a loop: a small arc over the node
            x, y = pos[u]
            edges.append(
                f'<path d="M{x - r / 2:.1f},{y - 0.87 * r:.1f} C{x - r:.1f},{y - 2.3 * r:.1f} '
                f'{x + r:.1f},{y - 2.3 * r:.1f} {x + r / 2:.1f},{y - 0.87 * r:.1f}" fill="none" '
                'stroke="#666" stroke-width="1.3" marker-end="url(#maslab-arrow)"/>'
            )
        else:
            edges.append(_edge(pos[u], pos[v], r, 0.12 if graph.has_edge(v, u) else 0.0))
    nodes = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" fill="#dbe7f6" stroke="#4a6fa5"/>'
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle" dominant-baseline="central" '
        f'font-size="11">{escape(str(name))}</text>'
        for name, (x, y) in pos.items()
    )
    title = escape(f"topology {topology.name}".strip())
    return (
        f'<svg class="topology" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{min(width, 1100):.0f}" role="img" aria-label="{title}"><title>{title}</title>'
        f"{_ARROW}{''.join(edges)}{nodes}</svg>"
    )
