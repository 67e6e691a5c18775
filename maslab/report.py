"""One self-contained HTML page over run directories: leaderboard, plot and per-task drill-down.

Styles are inline, the plot (drawn when the page compares runs) is a base64 PNG and topologies
are inline SVG, so the page loads nothing from the network.
Every string that came from a model, a dataset or a manifest is HTML-escaped. The page is
written piece by piece, each shown sample's trace read (through the run's trace index) as its
drill-down is written, so no run's traces are held at once; matplotlib is imported only when a
plot is drawn.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from maslab.results import Manifest, ResultRecord, RunStore
from maslab.roles import describe_model_roles
from maslab.secrets import redact
from maslab.stats import Summary, summarize

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Prices = Mapping[str, tuple[float, float]]

_CSS = """
body { font: 15px/1.5 system-ui, sans-serif; color: #222; max-width: 1200px; margin: 2em auto;
  padding: 0 1.5em; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 0.35em 0.7em; border-bottom: 1px solid #e4e4e4; text-align: left; }
th { background: #f3f5f8; } tbody tr:hover { background: #fafbfc; }
td:nth-child(n+4) { text-align: right; font-variant-numeric: tabular-nums; }
a { color: #2a5db0; text-decoration: none; }
.muted { color: #777; font-size: 0.9em; }
.plot { text-align: center; margin: 1.5em 0; } img { max-width: 100%; }
details { border: 1px solid #e1e4e8; border-radius: 6px; margin: 0.4em 0; padding: 0.3em 0.8em; }
summary { cursor: pointer; }
.tag { display: inline-block; min-width: 5.5em; font-size: 0.85em; font-weight: 600;
  padding: 0 0.5em; border-radius: 4px; text-align: center; }
.ok { background: #dff3e3; color: #1a6b2e; } .bad { background: #fbe1e1; color: #9b1c1c; }
.error { background: #fff1cc; color: #7a5500; }
pre, code, dd { font: 13px/1.45 ui-monospace, Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; padding: 0.6em;
  border-radius: 4px; max-height: 30em; overflow: auto; margin: 0.3em 0 0.8em; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2em 1em; }
dt { font-weight: 600; } dd { margin: 0; white-space: pre-wrap; word-break: break-word; }
.msg .who { font-size: 0.9em; }
"""


@dataclass(frozen=True)
class _Run:
    store: RunStore
    anchor: str
    manifest: Manifest
    records: list[ResultRecord]
    summary: Summary


def _load(directory: str | Path, anchor: str) -> _Run:
    """A run's manifest, records and summary; its traces are read later, one at a time."""
    store = RunStore(directory)
    records, superseded = store.records()
    records.sort(key=lambda r: r.key)
    summary = summarize(records, superseded=superseded, optimization=store.optimizations())
    return _Run(store, anchor, store.manifest(), records, summary)


def _plain(text: str) -> str:
    """``text`` safe from matplotlib's ``$...$`` mathtext."""
    return text.replace("$", r"\$")


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


def _short_model(spec: str) -> str:
    """``openai:gpt-4o@http://...`` -> ``gpt-4o``; ``scripted:/a/b/answers.yaml`` -> ``answers``."""
    name = spec.partition(":")[2].partition("@")[0] or spec
    return Path(name).stem if "/" in name else name


def _plot_labels(runs: Sequence[_Run]) -> list[str]:
    """Short point labels: the method, plus the model when the runs use several."""
    models = {run.manifest.model for run in runs}
    if len(models) == 1:
        return [run.manifest.method for run in runs]
    return [f"{run.manifest.method} · {_short_model(run.manifest.model)}" for run in runs]


def _plot(runs: Sequence[_Run]) -> str:
    """Accuracy (with its interval) against tokens used per sample, one point per run; none
    for fewer than two runs (one point compares nothing, and the leaderboard holds it)."""
    points = [run for run in runs if run.summary.n]
    if len(points) < 2:
        return ""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig = Figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot()
    xs = [run.summary.mean_tokens for run in points]
    for run, label in zip(points, _plot_labels(points), strict=True):
        s = run.summary
        x, y = s.mean_tokens, 100 * s.accuracy
        lo, hi = (100 * bound for bound in s.ci)
        # clamp: float rounding can put a bound a hair past the point
        ax.errorbar(x, y, yerr=[[max(0.0, y - lo)], [max(0.0, hi - y)]], fmt="o", capsize=4)
        rightmost = len(points) > 1 and x == max(xs)  # its label goes left, inside the axes
        ax.annotate(
            _plain(label), (x, y), xytext=(-6 if rightmost else 6, 6),
            textcoords="offset points", ha="right" if rightmost else "left",
        )  # fmt: skip
    ax.margins(x=0.08)
    if min(xs) > 0 and max(xs) >= 10 * min(xs):
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(_compact))
    ax.set(xlabel="tokens per sample (spent + cached)", ylabel="accuracy (%)", ylim=(-2, 102))
    ax.grid(alpha=0.3)
    return f'<div class="plot">{_img(fig, "accuracy against tokens per task")}</div>'


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
def _topology_svg(spec: bytes) -> str:
    """The topology in ``spec`` (``Topology.to_dict()`` as JSON) drawn as inline SVG.

    A DAG is drawn in layers (topological generations) left to right, anything else on a circle;
    nodes are sized to fit their labels. No plotting library is involved.
    """
    from maslab.topology import Topology

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


def _accuracy(s: Summary) -> str:
    if not s.n:
        return "—"
    if not s.graded:
        return "not graded"
    lo, hi = s.ci
    return f"{100 * s.accuracy:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def _cost(s: Summary, prices: Prices | None) -> str:
    cost = s.cost(prices) if prices else None
    return "—" if cost is None else f"${cost:.4f}"


def _row(cells: Iterable[object], tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{cell}</{tag}>" for cell in cells) + "</tr>"


def _leaderboard(runs: Sequence[_Run], prices: Prices | None) -> str:
    head = ("Method", "Benchmark", "Model", "n", "Accuracy [95% CI]", "Unparsed", "Errors")
    head += ("Tokens / sample", "Spent / sample", "Calls / sample", "Cost / sample")
    rows = []
    for run in runs:
        m, s = run.manifest, run.summary
        per_task = (
            f"{s.mean_tokens:,.0f}", f"{s.mean_spent_tokens:,.0f}", f"{s.mean_calls:.1f}",
            _cost(s, prices),
        )  # fmt: skip
        cells = (
            f'<a href="#{run.anchor}">{escape(m.method)}</a>',
            escape(m.benchmark),
            escape(_models(m)),
            s.n,
            _accuracy(s),
            s.unparsed,
            s.errors,
            *(per_task if s.n else ("—",) * len(per_task)),
        )
        rows.append(_row(cells))
    return f"<table><thead>{_row(head, 'th')}</thead><tbody>{''.join(rows)}</tbody></table>"


def _messages(messages: Sequence[Mapping[str, Any]]) -> str:
    items = []
    for m in messages:
        about = [
            None if m.get("round") is None else f"round {m['round']}",
            m.get("kind"),
            "→ " + ", ".join(m["recipients"]) if m.get("recipients") else None,
        ]
        items.append(
            f'<div class="msg"><div class="who"><b>{escape(str(m.get("sender")))}</b> '
            f'<span class="muted">{escape(" · ".join(filter(None, about)))}</span></div>'
            f"<pre>{escape(str(m.get('content', '')))}</pre></div>"
        )
    return "".join(items)


def _call(call: Mapping[str, Any]) -> str:
    about = [
        str(call.get("agent")),
        None if call.get("round") is None else f"round {call['round']}",
        call.get("model"),
        f"{call.get('prompt_tokens', 0)} + {call.get('completion_tokens', 0)} tokens",
        f"{call.get('latency_s', 0):.2f} s",
        "cached" if call.get("cached") else None,
        "cut at max_tokens" if call.get("finish_reason") == "length" else None,
        f"error: {call['error']}" if call.get("error") else None,
    ]
    chat = "".join(
        f"<pre><b>{escape(str(m.get('role')))}</b>\n{escape(str(m.get('content')))}</pre>"
        for m in call.get("messages") or ()
    )
    response = call.get("response")
    reply = "" if response is None else f"<b>response</b><pre>{escape(response)}</pre>"
    tools = "".join(f"{c['name']}({c['arguments']})\n" for c in call.get("tool_calls") or ())
    if tools:
        reply += f"<b>tool calls</b><pre>{escape(tools)}</pre>"
    title = escape(" · ".join(filter(None, about)))
    return f"<details><summary>{title}</summary>{chat}{reply}</details>"


def _record(record: ResultRecord, trace: Mapping[str, Any]) -> str:
    score = record.score
    verdict = "error" if record.status == "error" else "ok" if record.correct else "bad"
    marks = {"error": "error", "ok": "✓ correct", "bad": "✗ wrong"}
    mark = "∅ unparsed" if record.unparsed else marks[verdict]
    facts = {
        "Status": record.status + (" (unparsed)" if record.unparsed else ""),
        "Gold": record.gold,
        "Answer": record.answer,
        "Extracted": score and score.extracted,
        "Score": score and f"{score.value:g} {score.explanation}".strip(),
        "Error": record.error,
    }
    parts = [
        "<dl>"
        + "".join(f"<dt>{k}</dt><dd>{escape(v)}</dd>" for k, v in facts.items() if v is not None)
        + "</dl>"
    ]
    if trace.get("prompt") is not None:
        parts.append(f"<h4>Prompt</h4><pre>{escape(str(trace['prompt']))}</pre>")
    if trace.get("topology"):
        parts.append(f"<h4>Topology</h4>{_topology_svg(orjson.dumps(trace['topology']))}")
    if trace.get("messages"):
        parts.append(f"<h4>Messages</h4>{_messages(trace['messages'])}")
    if trace.get("calls"):
        parts.append(f"<h4>Calls</h4>{''.join(map(_call, trace['calls']))}")
    extracted = f" → {escape(score.extracted)}" if score and score.extracted is not None else ""
    return (
        f'<details><summary><span class="tag {verdict}">{mark}</span> '
        f"<code>{escape(record.task_id)}</code> "
        f'<span class="muted">repeat {record.repeat}{extracted}</span></summary>'
        f"{''.join(parts)}</details>"
    )


def _models(manifest: Manifest) -> str:
    """The run's model, and its model roles if it has any."""
    roles = describe_model_roles(manifest.model_roles)
    return f"{manifest.model} ({roles})" if roles else manifest.model


def _section(run: _Run, max_tasks: int, prices: Prices | None) -> Iterator[str]:
    """The run's section piece by piece: its figures, then the drill-down of each record of
    its first ``max_tasks`` tasks, whose trace is read only as it is written."""
    m, s = run.manifest, run.summary
    tasks = list(dict.fromkeys(r.task_id for r in run.records))
    shown = set(tasks[:max_tasks])
    records = [r for r in run.records if r.task_id in shown]
    about = [
        s.design if s.n else "no results",
        f"accuracy {_accuracy(s)}",
        f"{s.budget_stopped} budget-stopped",
        f"{s.mean_latency_s:.1f} s model time per sample",
        f"{s.mean_cached_tokens:,.0f} cached tokens per sample",
        f"{s.total_served_tokens:,} tokens served in all (scoring, superseded attempts and "
        f"optimisation included)",
    ]
    if optimization := s.describe_optimization():
        about.append(optimization)
    if by_model := s.describe_models(prices):
        about.append(f"per sample by model: {by_model}")
    if repeats := s.describe_repeats():
        about.append(repeats)
    if errors := s.describe_errors():
        about.append(f"errors: {errors}")
    about.extend(m.describe_caps())
    if len(tasks) > max_tasks:
        about.append(f"showing the first {max_tasks} of {len(tasks)} tasks")
    yield (
        f'<section id="{run.anchor}"><h2>{escape(m.method)} · {escape(m.benchmark)} '
        f"({escape(m.split)}) · {escape(_models(m))}</h2>"
        f'<p class="muted">{escape(" · ".join(about))}<br>'
        f"<code>{escape(str(run.store.dir))}</code> · evaluator {escape(m.evaluator)}</p>"
    )
    traces = run.store.traces_of(r.key for r in records)
    for record, (_, trace) in zip(records, traces, strict=True):
        yield _record(record, trace or {})
    yield "</section>"


def build_report(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    prices: Prices | None = None,
    max_tasks: int = 200,
) -> Path:
    """Write one self-contained HTML report over ``run_dirs`` to ``out`` and return its path.

    Args:
        run_dirs: Run directories, one leaderboard row each.
        out: The HTML file to write.
        prices: Model spec -> USD per 1M (prompt, completion) tokens; each model's tokens used
            by the method (spent or replayed) are priced at its own price. None: costs show "—".
        max_tasks: How many tasks the per-sample drill-down shows per run.
    """
    loaded = (_load(directory, f"run-{i}") for i, directory in enumerate(run_dirs))
    runs = sorted(loaded, key=lambda run: -run.summary.accuracy)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    try:
        with partial.open("w", encoding="utf-8") as f:
            for piece in _page(runs, max_tasks, prices):
                f.write(redact(piece))
        partial.replace(path)  # a reader sees the old page or the whole new one
    finally:
        partial.unlink(missing_ok=True)  # left only by a write that failed
    return path


def _page(runs: Sequence[_Run], max_tasks: int, prices: Prices | None) -> Iterator[str]:
    yield (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>maslab report</title><style>{_CSS}</style></head><body>"
        f'<h1>maslab report</h1><p class="muted">{len(runs)} runs</p>'
        f"<h2>Leaderboard</h2>{_leaderboard(runs, prices)}{_plot(runs)}"
    )
    for run in runs:
        yield from _section(run, max_tasks, prices)
    yield "</body></html>"
