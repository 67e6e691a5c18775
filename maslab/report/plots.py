"""The report's plots, each an ``<img>`` holding a base64 PNG under its title: accuracy against
tokens, pass@k and, per method, per-round agreement and accuracy.

Each run is a number (its row in the leaderboard and in the key beside the plots) with its own
colour and marker. A point's number goes beside it where it collides neither with the other
numbers nor with the points and intervals (:func:`place_numbers`); a curve's number goes in a
column right of the axes, at the curve's end but spaced apart (:func:`stack`). matplotlib is
imported only when a plot is drawn.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING

from maslab.analysis.stats import Summary
from maslab.report.figures import RoundFigures

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Box = tuple[float, float, float, float]
"""(left, bottom, right, top) in points."""

_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
_MARKERS = (("o", "●"), ("s", "■"), ("^", "▲"), ("D", "◆"), ("v", "▼"), ("P", "✚"), ("X", "✖"))
_FONT = 8.0  # the numbers' font size, in points
_MARK = 4.0  # half the size of a marker, in points
_RINGS = (2.0, 9.0, 17.0, 26.0)  # gaps between a point and its number, nearest first
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))

Run = tuple[int, Summary]
"""A run's number and summary."""


def colour(number: int) -> str:
    """The colour of run ``number`` (1-based) in every plot."""
    return _PALETTE[(number - 1) % len(_PALETTE)]


def glyph(number: int) -> str:
    """The marker of run ``number`` as a character, for the key."""
    return _MARKERS[(number - 1) // len(_PALETTE) % len(_MARKERS)][1]


def _marker(number: int) -> str:
    return _MARKERS[(number - 1) // len(_PALETTE) % len(_MARKERS)][0]


def _overlap(a: Box, b: Box) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _outside(box: Box, bounds: Box) -> float:
    inside = _overlap(box, bounds)
    return (box[2] - box[0]) * (box[3] - box[1]) - inside


def place_numbers(
    anchors: Sequence[tuple[float, float]],
    texts: Sequence[str],
    obstacles: Sequence[Box],
    bounds: Box,
) -> list[tuple[float, float]]:
    """Where each text's centre goes, as an offset in points from its anchor (a point, in
    points): in order, each at the nearest of a few rings of places around its anchor where it
    overlaps least (the texts placed so far, the ``obstacles`` and the area outside ``bounds``).
    """
    placed: list[Box] = []
    offsets = []
    for (x, y), text in zip(anchors, texts, strict=True):
        half_w, half_h = 0.31 * _FONT * len(text) + 1, 0.6 * _FONT
        best: tuple[float, tuple[float, float], Box] | None = None
        for ring, gap in enumerate(_RINGS):
            for i, (dx, dy) in enumerate(_DIRECTIONS):
                ox, oy = dx * (_MARK + gap + half_w), dy * (_MARK + gap + half_h)
                box = (x + ox - half_w, y + oy - half_h, x + ox + half_w, y + oy + half_h)
                cost = sum(_overlap(box, other) for other in (*placed, *obstacles))
                cost += 10 * _outside(box, bounds) + 1e-3 * (ring * len(_DIRECTIONS) + i)
                if best is None or cost < best[0]:
                    best = (cost, (ox, oy), box)
        assert best is not None
        offsets.append(best[1])
        placed.append(best[2])
    return offsets


def stack(ys: Sequence[float], low: float, high: float, gap: float) -> list[float]:
    """Heights for labels wanted at ``ys``: as near them as can be while at least ``gap``
    apart, kept within [``low``, ``high``] where there is room for them all."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed = [0.0] * len(ys)
    floor = low
    for i in order:  # up from the bottom, each at least a gap above the one below
        placed[i] = floor = max(ys[i], floor)
        floor += gap
    ceiling = max(high, low + gap * (len(ys) - 1))
    for i in reversed(order):  # then down from the top, where that pushed them past it
        placed[i] = ceiling = min(placed[i], ceiling)
        ceiling -= gap
    return placed


def _column(ax: Axes, ends: Sequence[tuple[int, float, float]]) -> None:
    """Write each (number, x, y), a curve's end in data coordinates, in a column just right of
    the axes at the curve's height, spaced apart, with a line to its end where it moved."""
    ax.get_xlim(), ax.get_ylim()  # settle the autoscaled limits before mapping to points
    scale = 72 / ax.figure.dpi
    _, bottom, right, top = (v * scale for v in ax.get_window_extent().extents)
    anchors = [tuple(v * scale for v in ax.transData.transform((x, y))) for _, x, y in ends]
    heights = stack([y for _, y in anchors], bottom, top, 1.3 * _FONT)
    for (number, x, y), (px, py), height in zip(ends, anchors, heights, strict=True):
        ax.annotate(
            str(number), (x, y), xytext=(right + 10 - px, height - py),
            textcoords="offset points", ha="left", va="center", fontsize=_FONT,
            fontweight="bold", color=colour(number),
            arrowprops={"arrowstyle": "-", "color": "#bbb", "lw": 0.5, "shrinkA": 1, "shrinkB": 2},
            annotation_clip=False,
        )  # fmt: skip


def _number(ax: Axes, points: Sequence[tuple[int, float, float]], bars: Sequence[Box] = ()) -> None:
    """Write each (number, x, y) beside its point in data coordinates; ``bars`` (also in data
    coordinates) are kept clear too."""
    ax.get_xlim(), ax.get_ylim()  # settle the autoscaled limits before mapping to points
    scale = 72 / ax.figure.dpi

    def at(x: float, y: float) -> tuple[float, float]:
        px, py = ax.transData.transform((x, y))
        return px * scale, py * scale

    anchors = [at(x, y) for _, x, y in points]
    obstacles = [(x - _MARK, y - _MARK, x + _MARK, y + _MARK) for x, y in anchors]
    for x0, y0, x1, y1 in bars:
        (a, b), (c, d) = at(x0, y0), at(x1, y1)
        obstacles.append((a - 1.5, b, c + 1.5, d))
    left, bottom, right, top = ax.get_window_extent().extents
    bounds = (left * scale, bottom * scale, right * scale, top * scale)
    texts = [str(number) for number, _, _ in points]
    offsets = place_numbers(anchors, texts, obstacles, bounds)
    for (number, x, y), text, offset in zip(points, texts, offsets, strict=True):
        far = abs(offset[0]) > 14 or abs(offset[1]) > 12
        ax.annotate(
            text, (x, y), xytext=offset, textcoords="offset points", ha="center", va="center",
            fontsize=_FONT, fontweight="bold", color=colour(number),
            arrowprops={"arrowstyle": "-", "color": "#999", "lw": 0.6} if far else None,
        )  # fmt: skip


def _img(fig: Figure, alt: str) -> str:
    """``fig`` as an ``<img>`` holding a base64 PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}">'


def _compact(value: float, _position: int | None = None) -> str:
    """``1500`` as ``1.5k``, ``2e6`` as ``2M``."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def cost_accuracy(runs: Sequence[Run]) -> str:
    """Accuracy (with its interval) against tokens used per sample, one numbered point per run
    with results; none for fewer than two (one point compares nothing)."""
    runs = [(number, s) for number, s in runs if s.n]
    if len(runs) < 2:
        return ""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig = Figure(figsize=(7.5, 4.8))
    ax = fig.add_subplot()
    points, bars = [], []
    for number, s in runs:
        x, y = s.mean_tokens, 100 * s.accuracy
        lo, hi = (100 * bound for bound in s.ci)
        # clamp: float rounding can put a bound a hair past the point
        ax.errorbar(
            x, y, yerr=[[max(0.0, y - lo)], [max(0.0, hi - y)]], fmt=_marker(number),
            color=colour(number), capsize=3, markersize=6, elinewidth=1,
        )  # fmt: skip
        points.append((number, x, y))
        bars.append((x, lo, x, hi))
    xs = [s.mean_tokens for _, s in runs]
    ax.margins(x=0.08)
    if min(xs) > 0 and max(xs) >= 10 * min(xs):
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(_compact))
    ax.set(xlabel="tokens per sample (spent + cached)", ylabel="accuracy (%)", ylim=(-2, 102))
    ax.set_title("Accuracy against tokens per sample")
    ax.grid(alpha=0.3)
    _number(ax, points, bars)
    return _img(fig, "accuracy against tokens per sample, one numbered point per run")


def pass_at_k(runs: Sequence[Run]) -> str:
    """pass@k against k for each run with repeats (k up to its repeats); none without."""
    runs = [(number, s) for number, s in runs if s.repeats > 1]
    if not runs:
        return ""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot()
    ends = []
    for number, s in runs:
        ks = range(1, s.repeats + 1)
        ys = [100 * s.pass_at(k) for k in ks]
        ax.plot(ks, ys, marker=_marker(number), color=colour(number), markersize=4)
        ends.append((number, ks[-1], ys[-1]))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="k (samples drawn per task)", ylabel="pass@k (%)", ylim=(-2, 102))
    ax.set_title("pass@k: a task solved in k samples")
    ax.grid(alpha=0.3)
    _column(ax, ends)
    return _img(fig, "pass@k against k, one numbered curve per run with repeats")


def convergence(runs: Sequence[tuple[int, str, Mapping[int, RoundFigures]]]) -> list[str]:
    """One plot per method with round-based runs (``runs``: number, method, rounds): per round,
    the share of samples whose agents agree and the accuracy of the round's majority answer,
    one numbered curve per run. Methods number their rounds in their own ways (a debate's
    rounds are not a moderator's), so each has its own axes; a measure no run of the method has
    (agreement, with one agent a round) is left out."""
    methods: dict[str, list[tuple[int, Mapping[int, RoundFigures]]]] = {}
    for number, method, rounds in runs:
        if len(rounds) > 1:
            methods.setdefault(method, []).append((number, rounds))
    return [_convergence(method, numbered) for method, numbered in methods.items()]


def _convergence(method: str, runs: Sequence[tuple[int, Mapping[int, RoundFigures]]]) -> str:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    measures = {
        "agents agree": {
            number: [(r, 100 * f.agree / f.panels) for r, f in rounds.items() if f.panels]
            for number, rounds in runs
        },
        "majority answer correct": {
            number: [(r, 100 * f.correct / f.samples) for r, f in rounds.items() if f.samples]
            for number, rounds in runs
        },
    }
    shown = {name: curves for name, curves in measures.items() if any(curves.values())}
    fig = Figure(figsize=(4.5 * len(shown), 3.6))
    axes = fig.subplots(1, len(shown), sharex=True, squeeze=False)[0]
    fig.subplots_adjust(wspace=0.45)  # room for the numbers between; before they are placed
    for ax, (name, curves) in zip(axes, shown.items(), strict=True):
        ends = []
        for number, curve in curves.items():
            if not curve:
                continue
            xs, ys = zip(*curve, strict=True)
            ax.plot(xs, ys, marker=_marker(number), color=colour(number), markersize=4)
            ends.append((number, xs[-1], ys[-1]))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set(xlabel=f"round of {method}", ylabel=f"{name} (%)", ylim=(-2, 102))
        ax.set_title(f"{method}: {name}, per round")
        ax.grid(alpha=0.3)
        _column(ax, ends)
    about = " and ".join(shown)
    return _img(fig, f"{method}, per round: {about}, one numbered curve per run")
