"""The report's plots, each an inline ``<svg>`` under its title, drawn here without a plotting
library: accuracy against tokens, pass@k and, per method, per-round agreement and accuracy.

Each run is a number (its row in the leaderboard and in the key beside the plots) with its own
colour and marker. A point's number goes beside it where it collides neither with the other
numbers nor with the points and intervals (:func:`place_numbers`); a curve's number goes in a
column right of the axes, at the curve's end but spaced apart (:func:`stack`). Those two work in
points with y up; a plot is drawn in pixels (110 to the inch) with y down, its axes mapping data
to pixels (:class:`_Axes`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from maslab.analysis.stats import Summary
from maslab.report.figures import RoundFigures

Box = tuple[float, float, float, float]
"""(left, bottom, right, top) in points."""

Polygon = tuple[tuple[float, float], ...]
"""A marker's corners around its centre, for a radius of 1, y down."""

_PLUS: Polygon = (
    (-0.35, -1.0), (0.35, -1.0), (0.35, -0.35), (1.0, -0.35), (1.0, 0.35), (0.35, 0.35),
    (0.35, 1.0), (-0.35, 1.0), (-0.35, 0.35), (-1.0, 0.35), (-1.0, -0.35), (-0.35, -0.35),
)  # fmt: skip
_CROSS: Polygon = tuple((0.75 * (u - v), 0.75 * (u + v)) for u, v in _PLUS)  # turned 45°

_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
_MARKERS: tuple[tuple[Polygon | None, str], ...] = (
    (None, "●"),  # a circle
    (((-0.85, -0.85), (0.85, -0.85), (0.85, 0.85), (-0.85, 0.85)), "■"),
    (((0.0, -1.15), (1.0, 0.6), (-1.0, 0.6)), "▲"),
    (((0.0, -1.15), (0.85, 0.0), (0.0, 1.15), (-0.85, 0.0)), "◆"),
    (((0.0, 1.15), (1.0, -0.6), (-1.0, -0.6)), "▼"),
    (_PLUS, "✚"),
    (_CROSS, "✖"),
)
_FONT = 8.0  # the numbers' font size, in points
_MARK = 4.0  # half the size of a marker, in points
_RINGS = (2.0, 9.0, 17.0, 26.0)  # gaps between a point and its number, nearest first
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))

_PX = 110 / 72  # pixels to the point
_TICK, _LABEL, _TITLE = 13.0, 14.0, 16.0  # font sizes, in pixels
_Y = (-2.0, 102.0)  # every plot's y range: a percentage
_Y_TICKS = (0, 20, 40, 60, 80, 100)
_INK = "#333"

Run = tuple[int, Summary]
"""A run's number and summary."""

Curves = Mapping[int, Sequence[tuple[float, float]]]
"""Run number -> its curve's (x, y) points, in data coordinates."""


def colour(number: int) -> str:
    """The colour of run ``number`` (1-based) in every plot."""
    return _PALETTE[(number - 1) % len(_PALETTE)]


def glyph(number: int) -> str:
    """The marker of run ``number`` as a character, for the key."""
    return _MARKERS[(number - 1) // len(_PALETTE) % len(_MARKERS)][1]


def _overlap(a: Box, b: Box) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    return width * height if width > 0 and height > 0 else 0.0


def _outside(box: Box, bounds: Box) -> float:
    inside = _overlap(box, bounds)
    return (box[2] - box[0]) * (box[3] - box[1]) - inside


def _half(text: str) -> tuple[float, float]:
    """Half the width and height of a number's box, in points."""
    return 0.31 * _FONT * len(text) + 1, 0.6 * _FONT


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
        half_w, half_h = _half(text)
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


def _points(x: float, y: float) -> tuple[float, float]:
    """A place in pixels (y down) in points with y up, as :func:`place_numbers` and
    :func:`stack` take it."""
    return x / _PX, -y / _PX


@dataclass(frozen=True)
class _Axes:
    """An axes: its box in the picture (left, top, right, bottom, in pixels, y down) and the x
    range it spans, on a log scale when ``log``; y spans :data:`_Y`."""

    box: tuple[float, float, float, float]
    xlim: tuple[float, float]
    log: bool = False

    def x(self, value: float) -> float:
        """Where data x ``value`` is, in pixels."""
        left, _, right, _ = self.box
        (lo, hi), v = self.xlim, value
        if self.log:
            lo, hi, v = math.log10(lo), math.log10(hi), math.log10(v)
        return left + (v - lo) / (hi - lo) * (right - left)

    def y(self, value: float) -> float:
        """Where data y ``value`` is, in pixels."""
        _, top, _, bottom = self.box
        lo, hi = _Y
        return bottom - (value - lo) / (hi - lo) * (bottom - top)

    def bounds(self) -> Box:
        """The box in points, y up."""
        left, top, right, bottom = self.box
        return (*_points(left, bottom), *_points(right, top))


def _limits(values: Sequence[float], margin: float, log: bool = False) -> tuple[float, float]:
    """The range of ``values`` widened on each side by ``margin`` of it (in log space when
    ``log``); of the value's own size where they are all one (of 1 where that is 0)."""
    lo, hi = min(values), max(values)
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    span = (hi - lo) or abs(hi) or 1.0
    lo, hi = lo - margin * span, hi + margin * span
    return (10**lo, 10**hi) if log else (lo, hi)


def _ticks(lo: float, hi: float, integer: bool = False, most: int = 8) -> list[float]:
    """Multiples of the finest round step (1, 2, 2.5 or 5 × 10^k; whole numbers when
    ``integer``) of which at most ``most`` fall in [``lo``, ``hi``]."""
    steps = (1.0, 2.0, 5.0) if integer else (1.0, 2.0, 2.5, 5.0)
    k = math.floor(math.log10((hi - lo) / most))
    if integer:
        k = max(k, 0)
    while True:
        for m in steps:
            step = m * 10.0**k
            first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
            if last - first < most:
                return [round(i * step, 12) for i in range(first, last + 1)]
        k += 1


def _log_ticks(lo: float, hi: float, most: int = 10) -> list[float]:
    """1, 2 and 5 × 10^k in [``lo``, ``hi``]; where those are more than ``most``, the powers
    of ten only, every few decades if need be."""
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    ticks = [m * 10.0**k for k in decades for m in (1, 2, 5) if lo <= m * 10.0**k <= hi]
    stride = 1
    while len(ticks) > most:
        ticks = [10.0**k for k in decades[::stride] if lo <= 10.0**k <= hi]
        stride += 1
    return ticks


def _compact(value: float) -> str:
    """``1500`` as ``1.5k``, ``2e6`` as ``2M``."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _text(
    x: float, y: float, text: str, size: float, kind: str, anchor: str = "middle", extra: str = ""
) -> str:
    """``text`` (escaped here) anchored at x (its middle, or its ``end``), its baseline at y;
    ``extra``: more attributes."""
    return (
        f'<text class="{kind}" x="{x:.1f}" y="{y:.1f}" font-size="{size:.1f}" '
        f'text-anchor="{anchor}"{extra}>{escape(text)}</text>'
    )


def _fit(text: str, room: float, size: float) -> float:
    """``size``, or less so that ``text`` fits in ``room`` pixels."""
    return min(size, room / (0.56 * max(1, len(text))))


def _frame(ax: _Axes, xticks: Sequence[float], title: str, xlabel: str, ylabel: str) -> str:
    """The axes' light grid, frame, ticks with their labels, axis labels and title."""
    left, top, right, bottom = ax.box
    centre, middle = (left + right) / 2, (top + bottom) / 2
    width, height = right - left, bottom - top
    grid = "".join(f"M{ax.x(t):.1f},{top:.1f}V{bottom:.1f}" for t in xticks)
    grid += "".join(f"M{left:.1f},{ax.y(t):.1f}H{right:.1f}" for t in _Y_TICKS)
    marks = "".join(f"M{ax.x(t):.1f},{bottom:.1f}v4" for t in xticks)
    marks += "".join(f"M{left:.1f},{ax.y(t):.1f}h-4" for t in _Y_TICKS)
    turn = f' transform="rotate(-90 {left - 44:.1f} {middle:.1f})"'
    return "".join((
        f'<path class="grid" d="{grid}" fill="none" stroke="#e4e4e4"/>',
        f'<rect x="{left:.1f}" y="{top:.1f}" width="{width:.1f}" height="{height:.1f}" '
        f'fill="none" stroke="{_INK}"/><path d="{marks}" stroke="{_INK}"/>',
        *(_text(ax.x(t), bottom + 19, _compact(t), _TICK, "xtick") for t in xticks),
        *(_text(left - 7, ax.y(t), f"{t:g}", _TICK, "ytick", "end", ' dy="0.35em"')
          for t in _Y_TICKS),
        _text(centre, bottom + 44, xlabel, _fit(xlabel, width, _LABEL), "xlabel"),
        _text(left - 44, middle, ylabel, _fit(ylabel, height, _LABEL), "ylabel", extra=turn),
        _text(centre, top - 14, title, _fit(title, width + 80, _TITLE), "title"),
    ))  # fmt: skip


def _mark(number: int, x: float, y: float, radius: float) -> str:
    """Run ``number``'s marker centred on (x, y) in pixels."""
    shape = _MARKERS[(number - 1) // len(_PALETTE) % len(_MARKERS)][0]
    if shape is None:
        return f'<circle class="mark" cx="{x:.1f}" cy="{y:.1f}" r="{radius:.1f}"/>'
    corners = "L".join(f"{x + radius * u:.1f},{y + radius * v:.1f}" for u, v in shape)
    return f'<path class="mark" d="M{corners}Z"/>'


def _run(number: int, body: str) -> str:
    """Run ``number``'s marks, in its colour."""
    c = colour(number)
    return f'<g class="run" data-run="{number}" fill="{c}" stroke="{c}">{body}</g>'


def _number(number: int, x: float, y: float, anchor: str) -> str:
    """Run ``number``'s number, its middle at height y; x is its centre or (``start``) its
    left end."""
    return (
        f'<text class="number" data-run="{number}" x="{x:.1f}" y="{y:.1f}" '
        f'font-size="{_FONT * _PX:.1f}" font-weight="bold" text-anchor="{anchor}" dy="0.35em" '
        f'fill="{colour(number)}">{number}</text>'
    )


def _segment(a: tuple[float, float], b: tuple[float, float], cut_a: float, cut_b: float) -> str:
    """Path data from ``a`` to ``b`` (pixels), ``cut_a`` and ``cut_b`` pixels short of each."""
    (ax, ay), (bx, by) = a, b
    length = math.hypot(bx - ax, by - ay) or 1.0
    ux, uy = (bx - ax) / length, (by - ay) / length
    return (
        f"M{ax + cut_a * ux:.1f},{ay + cut_a * uy:.1f}L{bx - cut_b * ux:.1f},{by - cut_b * uy:.1f}"
    )


def _leaders(lines: Sequence[str], stroke: str, width: float) -> str:
    """The lines (path data) from points to their numbers, thin and grey; none without."""
    if not lines:
        return ""
    return (
        f'<path class="leader" d="{"".join(lines)}" fill="none" stroke="{stroke}" '
        f'stroke-width="{width}"/>'
    )


def _numbers(points: Sequence[tuple[int, float, float]], bars: Sequence[Box], ax: _Axes) -> str:
    """Each run's number beside its point (number, x, y in pixels), clear of the other numbers,
    the points and the ``bars`` (in points), with a grey line to a point it went far from."""
    anchors = [_points(x, y) for _, x, y in points]
    obstacles = [(x - _MARK, y - _MARK, x + _MARK, y + _MARK) for x, y in anchors]
    texts = [str(number) for number, _, _ in points]
    offsets = place_numbers(anchors, texts, [*obstacles, *bars], ax.bounds())
    lines, numbers = [], []
    for (number, x, y), text, (dx, dy) in zip(points, texts, offsets, strict=True):
        at = (x + dx * _PX, y - dy * _PX)
        if abs(dx) > 14 or abs(dy) > 12:  # far: a line from the point to the number's box
            half_w, half_h = _half(text)
            edge = min(half_w / abs(dx) if dx else math.inf, half_h / abs(dy) if dy else math.inf)
            reach = math.hypot(dx, dy) * edge * _PX  # from the number's centre to its box's edge
            lines.append(_segment((x, y), at, _MARK * _PX, reach + 1))
        numbers.append(_number(number, *at, "middle"))
    return _leaders(lines, "#999", 0.9) + "".join(numbers)


def _column(ends: Sequence[tuple[int, float, float]], ax: _Axes) -> str:
    """Each (number, x, y), a curve's end in pixels, written in a column just right of the axes
    at the curve's height, spaced apart, with a grey line to its end where it moved."""
    _, low, _, high = ax.bounds()
    wanted = [_points(x, y)[1] for _, x, y in ends]
    heights = [-h * _PX for h in stack(wanted, low, high, 1.3 * _FONT)]
    column = ax.box[2] + 10 * _PX
    lines, numbers = [], []
    for (number, x, y), height in zip(ends, heights, strict=True):
        if abs(height - y) > 0.5:
            lines.append(_segment((x, y), (column, height), 2 * _PX, _PX))
        numbers.append(_number(number, column, height, "start"))
    return _leaders(lines, "#bbb", 0.8) + "".join(numbers)


def _curves(ax: _Axes, curves: Curves, title: str, xlabel: str, ylabel: str) -> str:
    """One axes of numbered curves against whole numbers (k, a round): each curve in its run's
    colour and markers, its number in the column right of the axes."""
    drawn, ends = [], []
    for number, curve in curves.items():
        at = [(ax.x(x), ax.y(y)) for x, y in curve]
        line = " ".join(f"{x:.1f},{y:.1f}" for x, y in at)
        marks = "".join(_mark(number, x, y, 3.2) for x, y in at)
        drawn.append(
            _run(number, f'<polyline points="{line}" fill="none" stroke-width="2"/>{marks}')
        )
        ends.append((number, *at[-1]))
    xticks = _ticks(*ax.xlim, integer=True)
    return (
        f'<g class="axes">{_frame(ax, xticks, title, xlabel, ylabel)}{"".join(drawn)}'
        f"{_column(ends, ax)}</g>"
    )


def _point(number: int, x: float, y: float, low: float, high: float) -> str:
    """Run ``number``'s point at (x, y) with its interval from ``low`` to ``high``, in pixels."""
    cap = 3 * _PX
    caps = "".join(f"M{x - cap:.1f},{end:.1f}h{2 * cap:.1f}" for end in (low, high))
    interval = (
        f'<path class="interval" d="M{x:.1f},{low:.1f}V{high:.1f}{caps}" fill="none" '
        'stroke-width="1.5"/>'
    )
    return _run(number, interval + _mark(number, x, y, 4.5))


def _svg(width: int, height: int, label: str, body: str) -> str:
    """A picture ``width`` × ``height`` pixels, shrunk to its column where that is narrower;
    ``label`` (escaped here) says what it shows to a screen reader."""
    label = escape(label)
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" '
        f'style="max-width:{width}px" role="img" aria-label="{label}" fill="{_INK}">'
        f"<title>{label}</title>{body}</svg>"
    )


def cost_accuracy(runs: Sequence[Run]) -> str:
    """Accuracy (with its interval) against tokens used per sample, one numbered point per run
    with results; none for fewer than two (one point compares nothing)."""
    runs = [(number, s) for number, s in runs if s.n]
    if len(runs) < 2:
        return ""
    xs = [s.mean_tokens for _, s in runs]
    log = min(xs) > 0 and max(xs) >= 10 * min(xs)
    ax = _Axes((70.0, 40.0, 805.0, 472.0), _limits(xs, 0.08, log), log)
    drawn, points, bars = [], [], []
    for number, s in runs:
        x, y = ax.x(s.mean_tokens), ax.y(100 * s.accuracy)
        low, high = (ax.y(100 * bound) for bound in s.ci)
        drawn.append(_point(number, x, y, low, high))
        points.append((number, x, y))
        bars.append((*_points(x - 1.5 * _PX, low), *_points(x + 1.5 * _PX, high)))
    xticks = _log_ticks(*ax.xlim) if log else _ticks(*ax.xlim)
    frame = _frame(
        ax, xticks, "Accuracy against tokens per sample", "tokens per sample (spent + cached)",
        "accuracy (%)",
    )  # fmt: skip
    body = f'<g class="axes">{frame}{"".join(drawn)}{_numbers(points, bars, ax)}</g>'
    return _svg(825, 528, "accuracy against tokens per sample, one numbered point per run", body)


def pass_at_k(runs: Sequence[Run]) -> str:
    """pass@k against k for each run with repeats (k up to its repeats); none without."""
    curves = {
        number: [(k, 100 * s.pass_at(k)) for k in range(1, s.repeats + 1)]
        for number, s in runs
        if s.repeats > 1
    }
    if not curves:
        return ""
    ks = [k for curve in curves.values() for k, _ in curve]
    ax = _Axes((70.0, 40.0, 775.0, 340.0), _limits(ks, 0.05))
    body = _curves(
        ax, curves, "pass@k: a task solved in k samples", "k (samples drawn per task)",
        "pass@k (%)",
    )  # fmt: skip
    return _svg(825, 396, "pass@k against k, one numbered curve per run with repeats", body)


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
    """The panels side by side, one per measure a run has, on the same rounds."""
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
    shown = {
        name: {number: curve for number, curve in curves.items() if curve}
        for name, curves in measures.items()
        if any(curves.values())
    }
    rounds = [r for curves in shown.values() for curve in curves.values() for r, _ in curve]
    xlim = _limits(rounds, 0.05)
    panels = []
    for i, (name, curves) in enumerate(shown.items()):
        ax = _Axes((495.0 * i + 70, 40.0, 495.0 * i + 445, 340.0), xlim)
        panels.append(
            _curves(ax, curves, f"{method}: {name}, per round", f"round of {method}", f"{name} (%)")
        )
    about = " and ".join(shown)
    label = f"{method}, per round: {about}, one numbered curve per run"
    return _svg(495 * len(shown), 396, label, "".join(panels))
