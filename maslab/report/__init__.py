"""One self-contained HTML page over run directories: leaderboard, plots, each run's figures,
triage (:mod:`maslab.report.triage`), failure attribution (:mod:`maslab.report.attribution_html`)
and per-task drill-down.

Styles are inline, and the plots (:mod:`maslab.report.plots`) and topologies are inline SVG drawn
without a plotting library, so the page loads nothing from the network; it holds no script.
Every string that came from a model, a dataset or a manifest is HTML-escaped. A run's traces
are read twice, one at a time: once through for its figures (:mod:`maslab.report.figures`:
running totals, and the signals of records stored without them; the report ``maslab run``
leaves has them added up as the traces were written), then each shown sample's as its
drill-down is written, so no run's traces are held at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from maslab.analysis import trajectory
from maslab.analysis.rescoring import (
    describe_scoring,
    describe_scorings,
    scored_by,
    scorings_by_sample,
)
from maslab.analysis.run_result import RunResult
from maslab.analysis.stats import Summary, summarize
from maslab.core.roles import describe_model_roles
from maslab.report import attribution_html, tools_html
from maslab.report import triage as report_triage
from maslab.report.call_html import call_html
from maslab.report.figures import AgentShare, RoundFigures, TraceFigures, trace_figures
from maslab.report.plots import colour, convergence, cost_accuracy, glyph, pass_at_k
from maslab.report.topology_svg import topology_svg
from maslab.report.triage import Triage
from maslab.secrets import redact
from maslab.store.records import (
    AttributionRecord,
    ChatTurn,
    Key,
    ScoringRecord,
    Trace,
    TraceCall,
    TraceMessage,
    TraceTool,
)
from maslab.store.run_store import Manifest, ResultRecord, RunStore, partial_file

Prices = Mapping[str, tuple[float, float]]
DRILL_DOWN = 200
"""How many tasks a run's per-sample drill-down shows, unless told."""
_SCRIPT_FILES = {".json", ".yaml", ".yml"}  # a scripted model's file, named by its stem

_CSS = """
body { font: 15px/1.5 system-ui, sans-serif; color: #222; max-width: 1200px; margin: 2em auto;
  padding: 0 1.5em; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; width: 100%; }
.leaderboard { font-size: 0.9em; }
th, td { padding: 0.35em 0.7em; border-bottom: 1px solid #e4e4e4; text-align: left; }
th { background: #f3f5f8; } tbody tr:hover { background: #fafbfc; }
.leaderboard td:nth-child(n+5), .numbers td:nth-child(n+2) { text-align: right;
  font-variant-numeric: tabular-nums; }
.numbers { width: auto; min-width: 24em; }
a { color: #2a5db0; text-decoration: none; }
.muted { color: #777; font-size: 0.9em; }
.pictures { display: flex; gap: 1.5em; align-items: flex-start; margin: 1.5em 0; }
.plots { flex: 1 1 auto; min-width: 0; } .plot { text-align: center; margin: 0 0 1em; }
.key { flex: 0 0 auto; width: auto; max-width: 22em; font-size: 0.9em; }
.key td { padding: 0.15em 0.5em; }
.num { font-weight: 600; white-space: nowrap; }
.share { display: flex; height: 1.1em; border-radius: 3px; overflow: hidden; max-width: 40em;
  margin: 0.3em 0 0.6em; }
.swatch { display: inline-block; width: 0.8em; height: 0.8em; border-radius: 2px;
  margin-right: 0.4em; }
.topologies { display: flex; flex-wrap: wrap; gap: 1em; }
figure { margin: 0; } figcaption { text-align: center; color: #777; font-size: 0.9em; }
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
    figures: TraceFigures
    triage: Triage
    attributions: list[AttributionRecord]
    scorings: list[str]
    """What each scoring of the run (``maslab score``) found (:func:`describe_scorings`)."""
    verdicts: dict[Key, list[ScoringRecord]]
    """Each sample's scorings."""
    scoring: str | None = None
    """The scoring whose verdicts ``records`` carry; None: the run's own."""
    number: int = 0
    """Its row in the leaderboard, and its mark in the plots."""
    label: str = ""


def _load(directory: str | Path, anchor: str, scoring: str | None) -> _Run:
    """A run's manifest, records (as the scoring ``scoring`` scored them, if one is named),
    summary, trace figures, triage and scorings; its traces are read one at a time."""
    store = RunStore(directory)
    own, superseded = store.records()
    records = own if scoring is None else scored_by(store, scoring, own)
    summary = summarize(records, superseded=superseded, optimization=store.optimizations())
    return _run(store, anchor, own, records, summary, trace_figures(store, records), scoring)


def _run(
    store: RunStore,
    anchor: str,
    own: list[ResultRecord],
    records: list[ResultRecord],
    summary: Summary,
    figures: TraceFigures,
    scoring: str | None,
) -> _Run:
    """A run's section from its records as read (``own``) and as shown (``records``)."""
    records = sorted(records, key=lambda r: r.key)
    triage = report_triage.triage(records, figures.signals)
    return _Run(
        store, anchor, store.manifest(), records, summary, figures, triage, store.attributions(),
        describe_scorings(store, own), scorings_by_sample(store), scoring,
    )  # fmt: skip


def _short_model(spec: str) -> str:
    """``openai:gpt-4o@http://...`` -> ``gpt-4o``; ``openai:Qwen/Qwen2.5-7B`` -> ``Qwen2.5-7B``;
    ``scripted:/a/b/answers.yaml`` -> ``answers``."""
    name = Path(spec.partition(":")[2].partition("@")[0] or spec)
    return name.stem if name.suffix in _SCRIPT_FILES else name.name


def breakable(text: str) -> str:
    """``text`` escaped, with a place to break the line after each ``/ . : = @ _ ,`` (a long
    model spec or label wraps there rather than widen its table)."""
    return re.sub(r"([/.:=@_,])", r"\1<wbr>", escape(text))


def _endpoint(spec: str) -> str | None:
    """``openai:gpt-4o@http://gpu-2:8000/v1`` -> ``gpu-2:8000``; None without an endpoint."""
    url = spec.partition(":")[2].partition("@")[2]
    return (urlsplit(url).netloc or url) if url else None


def one_line(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


_UNSHOWN = {"dataset_hash", "task_ids"}  # opaque, or long and implied by the others
_WIDTH = 24  # the most characters a setting's value shows in a label
_SETTINGS = tuple(
    name for name in (*Manifest.IDENTITY, "repeats", "limit", "data")
    if name not in ("method", "method_config")
)  # fmt: skip


def _settings(manifest: Manifest) -> dict[str, str]:
    """What set the run up, flat and as text, whole: the method's config keys as they are, then
    the run's other settings (``benchmark``, ``sampling.temperature``, ...), each model's
    endpoint apart from its name (``model=openai:gpt-4o``, ``endpoint=gpu-2:8000``)."""
    flat: dict[str, str] = {}

    def add(key: str, value: Any) -> None:
        head, _, last = key.rpartition(".")
        if isinstance(value, dict):
            for k, v in value.items():
                add(f"{key}.{k}" if key else str(k), v)
        elif last == "model" and isinstance(value, str) and (endpoint := _endpoint(value)):
            add(key, value.partition("@")[0])
            add(f"{head}.endpoint" if head else "endpoint", endpoint)
        elif last not in _UNSHOWN:
            text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
            flat.setdefault(key, text)

    add("", manifest.method_config)
    for name in _SETTINGS:
        add(name, getattr(manifest, name))
    return flat


def run_labels(
    manifests: Sequence[Manifest], directories: Sequence[Path], *, model: bool | None = None
) -> list[str]:
    """Each run's label: its method, its model's short name (``model``: always, never, or
    None: when the runs use several), and, among runs that would share that, the settings in
    which they differ (``llm_debate (agents=3)``, ``vanilla · gpt-4o (endpoint=gpu-2:8000)``);
    runs that differ in none are told apart by their directory's name."""
    if model is None:
        model = len({m.model for m in manifests}) > 1
    bases = [m.method + (f" · {_short_model(m.model)}" if model else "") for m in manifests]
    settings = [_settings(m) for m in manifests]
    labels = []
    for directory, base, own in zip(directories, bases, settings, strict=True):
        group = [other for b, other in zip(bases, settings, strict=True) if b == base]
        if len(group) == 1:
            labels.append(base)
            continue
        keys = dict.fromkeys(key for other in group for key in other)
        differ = [k for k in keys if len({other.get(k, "unset") for other in group}) > 1]
        text = ", ".join(f"{k}={one_line(own.get(k, 'unset'), _WIDTH)}" for k in differ)
        labels.append(f"{base} ({text or directory.name})")
    return labels


def _badge(run: _Run) -> str:
    """The run's number with its plot colour and marker."""
    return (
        f'<span class="num" style="color:{colour(run.number)}">'
        f"{glyph(run.number)} {run.number}</span>"
    )


def _pictures(runs: Sequence[_Run]) -> str:
    """The plots that compare the runs, with the key to their numbers beside them."""
    numbered = [(run.number, run.summary) for run in runs]
    plots = (
        cost_accuracy(numbered),
        pass_at_k(numbered),
        *convergence([(run.number, run.manifest.method, run.figures.rounds) for run in runs]),
    )
    shown = "".join(f'<div class="plot">{plot}</div>' for plot in plots if plot)
    if not shown:
        return ""
    key = "".join(
        _row((_badge(run), f'<a href="#{run.anchor}">{escape(run.label)}</a>')) for run in runs
    )
    return (
        f'<div class="pictures"><div class="plots">{shown}</div><table class="key">'
        f'<thead><tr><th colspan="2">Runs</th></tr></thead><tbody>{key}</tbody></table></div>'
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
    head: tuple[str, ...]
    head = ("#", "Method", "Benchmark", "Model", "n", "Accuracy [95% CI]", "Unparsed", "Errors")
    head += ("Tokens / sample", "Spent / sample", "Calls / sample", "Cost / sample")
    tools = [tools_html.per_sample(run.records) for run in runs]
    if any(tools):
        head += ("Tool calls / sample", "Tool errors / sample")
    rows = []
    for run, tooled in zip(runs, tools, strict=True):
        m, s = run.manifest, run.summary
        per_task = (
            f"{s.mean_tokens:,.0f}", f"{s.mean_spent_tokens:,.0f}", f"{s.mean_calls:,.1f}",
            _cost(s, prices),
        )  # fmt: skip
        cells = (
            _badge(run),
            f'<a href="#{run.anchor}">{breakable(run.label)}</a>',
            breakable(m.benchmark),
            breakable(_models(m)),
            s.n,
            _accuracy(s),
            s.unparsed,
            s.errors,
            *(per_task if s.n else ("—",) * len(per_task)),
            *((tooled or ("—", "—")) if any(tools) else ()),
        )
        rows.append(_row(cells))
    return (
        f'<table class="leaderboard"><thead>{_row(head, "th")}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _agent_shares(agents: Mapping[str, AgentShare]) -> str:
    """Each agent's share of the run's tokens: a stacked bar and its table, largest first."""
    total = sum(share.tokens for share in agents.values())
    if not total:
        return ""
    ordered = sorted(agents.items(), key=lambda item: -item[1].tokens)
    bar, rows = [], []
    for i, (agent, share) in enumerate(ordered, 1):
        part = 100 * share.tokens / total
        swatch = f'<span class="swatch" style="background:{colour(i)}"></span>'
        bar.append(
            f'<span style="width:{part:.2f}%;background:{colour(i)}" '
            f'title="{escape(agent)}: {part:.1f}%"></span>'
        )
        cells = (swatch + escape(agent), f"{share.calls:,}", f"{share.tokens:,}", f"{part:.1f}%")
        rows.append(_row(cells))
    head = _row(("Agent", "Calls", "Tokens", "Share"), "th")
    return (
        f'<h4>Tokens by agent</h4><div class="share">{"".join(bar)}</div>'
        f'<table class="numbers"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _rounds(rounds: Mapping[int, RoundFigures]) -> str:
    """Per round: how many samples, how often their agents agree, how often the majority is
    right; nothing unless the answers span two rounds or more."""
    if len(rounds) < 2:
        return ""
    rows = []
    for number, f in rounds.items():
        agree = f"{100 * f.agree / f.panels:.1f}% of {f.panels:,}" if f.panels else "—"
        rows.append(_row((number, f"{f.samples:,}", agree, f"{100 * f.correct / f.samples:.1f}%")))
    head = _row(("Round", "Samples", "Agents agree", "Majority answer correct"), "th")
    return (
        f'<h4>Rounds</h4><table class="numbers"><thead>{head}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _topologies(run: _Run) -> str:
    """The run's topologies, each drawn once; a sample on another one draws its own."""
    specs = run.figures.topologies
    if len(specs) == 1:
        return f"<h4>Topology</h4>{topology_svg(next(iter(specs)))}"
    drawn = "".join(
        f'<figure id="{run.anchor}-topology-{i}">{topology_svg(spec)}'
        f"<figcaption>topology {i} · {samples:,} samples</figcaption></figure>"
        for i, (spec, samples) in enumerate(specs.items(), 1)
    )
    return f'<h4>Topologies</h4><div class="topologies">{drawn}</div>' if drawn else ""


def describe_votes(record: ResultRecord, trace: Trace) -> str | None:
    """'42 ×2, 41 ×1; 1 agent gave none': the answers of the agents in the last round, and how a
    tie at the top was broken (:func:`_tie`); None when the trace records no answers."""
    if not trajectory.has_answers(trace):
        return None
    rounds = trajectory.round_answers(trace)
    finals = list(rounds[max(rounds)].values()) if rounds else []
    tally = trajectory.vote_tally(finals)
    counted = ", ".join(f"{a} ×{count}" for a, count in tally)
    missing = finals.count(None)
    none = f"{missing} agent{'s' if missing > 1 else ''} gave none" if missing else ""
    return "; ".join(filter(None, (counted, none, _tie(record, trace, tally))))


def _tie(record: ResultRecord, trace: Trace, tally: Sequence[tuple[str, int]]) -> str | None:
    """How the method broke a tie at the top of ``tally``: a majority vote by its earliest
    agent's answer, an aggregator or the method otherwise by its final answer; None without a
    tie."""
    tied = [answer for answer, count in tally if count == tally[0][1]] if tally else []
    if len(tied) < 2:
        return None
    rule = record.metadata.get("aggregate")
    if rule == "majority":
        chosen = trajectory.final_answer(trace, record.answer)
        return f"a tie, broken by the vote's rule, the earliest agent's answer: {chosen}"
    by = "the aggregator" if rule == "llm" else "the method"
    final = record.score.extracted if record.score else None
    if final is None:
        return f"a tie; {by} gave no final answer"
    if final not in tied:
        return f"a tie; {by}'s final answer, {final}, is none of the tied ones"
    return f"a tie, broken by {by}: {final}"


def _messages(
    messages: Sequence[TraceMessage],
    answers: Sequence[str | None] | None,
    tools: Sequence[TraceTool],
) -> str:
    """The messages in order, each followed by the tool calls it made
    (:func:`maslab.report.tools_html.placed`); the calls placed after none come last."""
    after, apart = tools_html.placed(messages, tools)
    items = []
    for i, m in enumerate(messages):
        answer = None if answers is None or i >= len(answers) else answers[i]
        about = [
            None if m.round is None else f"round {m.round}",
            m.kind,
            "→ " + ", ".join(m.recipients) if m.recipients else None,
            None if answers is None else "no answer" if answer is None else f"answer {answer}",
        ]
        items.append(
            f'<div class="msg"><div class="who"><b>{escape(m.sender)}</b> '
            f'<span class="muted">{escape(" · ".join(filter(None, about)))}</span></div>'
            f"<pre>{escape(m.content)}</pre></div>{tools_html.tools_html(after[i])}"
        )
    return "".join(items) + tools_html.tools_html(apart)


def _calls(calls: Sequence[TraceCall]) -> str:
    """Each call's details, a chat that goes on from its agent's previous call and reply
    showing only what is new."""
    history: dict[str, list[ChatTurn]] = {}  # agent -> its last call's messages and reply
    shown = []
    for call in calls:
        agent, chat = str(call.agent), list(call.messages)
        before = history.get(agent, [])
        known = len(before) if before and chat[: len(before)] == before else 0
        shown.append(call_html(call, known))
        reply = call.response
        history[agent] = [*chat, ChatTurn(role="assistant", content=reply)] if reply else chat
    return "".join(shown)


def _record(record: ResultRecord, trace: Trace, run: _Run, target: str) -> str:
    """One sample's drill-down, with the signals that fired on it; its topology only by
    reference when the run's section drew it. A link to ``target`` (an element at the top of
    its content) opens it."""
    score = record.score
    tally = describe_votes(record, trace)
    facts = {
        "Status": record.status + (" (unparsed)" if record.unparsed else ""),
        "Gold": record.gold,
        "Answer": record.answer,
        "Extracted": score.extracted if score else None,
        "Score": f"{score.value:g} {score.explanation}".strip() if score else None,
        **tools_html.episode_facts(score),
        "Error": record.error,
        "Tools": tools_html.tool_counts(record),
        "Votes": tally,
        "Scorings": scoring_verdicts(run.verdicts.get(record.key, [])),
    }
    parts = [
        "<dl>"
        + "".join(f"<dt>{k}</dt><dd>{escape(v)}</dd>" for k, v in facts.items() if v is not None)
        + "</dl>",
        attribution_html.sample_lines([a for a in run.attributions if a.key[:2] == record.key]),
    ]
    if trace.prompt is not None:
        parts.append(f"<h4>Prompt</h4><pre>{escape(trace.prompt)}</pre>")
    if trace.topology is not None:
        spec = trace.topology.as_json()
        drawn = list(run.figures.topologies)
        if spec not in drawn:
            parts.append(f"<h4>Topology</h4>{topology_svg(spec)}")
        elif len(drawn) > 1:
            i = drawn.index(spec) + 1
            parts.append(f'<p>Topology: <a href="#{run.anchor}-topology-{i}">topology {i}</a></p>')
    if trace.messages or trace.tools:
        shown = _messages(trace.messages, trace.answers, trace.tools)
        parts.append(f"<h4>Messages</h4>{shown}")
    if trace.calls:
        parts.append(f"<h4>Calls</h4>{_calls(trace.calls)}")
    extracted = f" → {escape(score.extracted)}" if score and score.extracted is not None else ""
    gold = f" · gold {escape(one_line(record.gold, 60))}" if record.gold is not None else ""
    votes = f" · votes {escape(tally)}" if tally else ""
    tooled = f" · {counted}" if (counted := tools_html.tool_counts(record)) else ""
    fired = run.triage.fired.get(record.key, {})
    return (
        f"<details{report_triage.attributes(record, fired)}><summary>"
        f"{report_triage.tag(record)} <code>{escape(record.task_id)}</code> "
        f'<span class="muted">repeat {record.repeat}{extracted}{gold}{votes}{tooled}</span>'
        f'{report_triage.badges(fired)}</summary><span class="target" id="{target}"></span>'
        f"{''.join(parts)}</details>"
    )


def _verdicts_by(run: _Run) -> str:
    """Whose verdicts the run's section shows: its evaluator's, or a scoring's."""
    if run.scoring is None:
        return f"evaluator {run.manifest.evaluator}"
    return describe_scoring(run.store, run.scoring)


def scoring_verdicts(made: Sequence[ScoringRecord]) -> str | None:
    """A sample's verdict in each scoring of its run: 'exact: wrong · judged: correct'."""
    verdicts = [
        f"{s.label}: "
        + ("failed" if s.score is None else "correct" if s.score.correct else "wrong")
        for s in sorted(made, key=lambda s: s.label)
    ]
    return " · ".join(verdicts) or None


def _models(manifest: Manifest) -> str:
    """The run's model, and its model roles if it has any."""
    roles = describe_model_roles(manifest.model_roles)
    return f"{manifest.model} ({roles})" if roles else manifest.model


def _shown(run: _Run, max_tasks: int) -> tuple[list[ResultRecord], int]:
    """The records the drill-down shows, and the run's number of tasks. It shows every record of
    ``max_tasks`` tasks (the tasks of the ranked samples first, then the others in task order):
    the ranked samples first, the most flagged first, then the rest by task and repeat."""
    ranked = [f.record for f in run.triage.ranked]
    tasks = list(dict.fromkeys(r.task_id for r in (*ranked, *run.records)))
    shown = set(tasks[:max_tasks])
    place = {r.key: i for i, r in enumerate(ranked)}
    records = [r for r in run.records if r.task_id in shown]
    records.sort(key=lambda r: place.get(r.key, len(place)))  # stable: task order otherwise
    return records, len(tasks)


def _section(run: _Run, max_tasks: int, prices: Prices | None) -> Iterator[str]:
    """The run's section piece by piece: its figures (topologies, tokens by agent, rounds), its
    triage, then the drill-down of each shown record (:func:`_shown`) under the signal filter,
    each one's trace read only as it is written."""
    m, s = run.manifest, run.summary
    records, tasks = _shown(run, max_tasks)
    about = [
        s.design if s.n else "no results",
        f"accuracy {_accuracy(s)}",
        *filter(None, (s.describe_strict(), s.describe_truncation())),
        f"{s.budget_stopped} budget-stopped",
        f"{s.describe_model_time()} per sample",
        f"{s.mean_cached_tokens:,.0f} cached tokens per sample",
        f"{s.total_served_tokens:,} tokens served in all (scoring, superseded attempts and "
        f"optimisation included)",
    ]
    if optimization := s.describe_optimization():
        about.append(optimization)
    if attributed := attribution_html.spend(run.attributions):
        about.append(attributed)
    if by_model := s.describe_models(prices):
        about.append(f"per sample by model: {by_model}")
    if repeats := s.describe_repeats():
        about.append(repeats)
    if errors := s.describe_errors():
        about.append(f"errors: {errors}")
    about.extend(m.describe_sandbox())
    about.extend(m.describe_caps())
    about.extend(run.scorings)
    if tasks > max_tasks:
        flagged = ", those of flagged samples first" if run.triage.ranked else ""
        about.append(f"showing {max_tasks} of {tasks} tasks{flagged}")
    yield (
        f'<section id="{run.anchor}"><h2>{_badge(run)} {escape(run.label)} · '
        f"{escape(m.benchmark)} ({escape(m.split)}) · {escape(_models(m))}</h2>"
        f'<p class="muted">{escape(" · ".join(about))}<br>'
        f"<code>{escape(str(run.store.dir))}</code> · {escape(_verdicts_by(run))}</p>"
        f"{_topologies(run)}{_agent_shares(run.figures.agents)}{_rounds(run.figures.rounds)}"
    )
    targets = {r.key: f"{run.anchor}-sample-{i}" for i, r in enumerate(records)}
    if run.records:
        yield report_triage.part(run.triage, targets)
        yield attribution_html.part(run.attributions)
    if records:
        order = "in task order"
        if run.triage.ranked:
            order = f"flagged first, the most signals first; then the others {order}"
        fired = [run.triage.fired.get(r.key, {}) for r in records]
        wrong = sum(report_triage.outcome(r) != "correct" for r in records)
        chooser = report_triage.chooser(run.anchor, fired, wrong)
        yield f'<h4>Samples</h4><p class="muted">{order}</p>{chooser}'
    traces = run.store.traces_of(r.key for r in records)
    for record, (_, trace) in zip(records, traces, strict=True):
        shown = trace or Trace(task_id=record.task_id, repeat=record.repeat)  # none: no parts
        yield _record(record, shown, run, targets[record.key])
    yield "</section>"


def build_report(
    run_dirs: Sequence[str | Path],
    out: str | Path,
    *,
    prices: Prices | None = None,
    max_tasks: int = DRILL_DOWN,
    scoring: str | None = None,
) -> Path:
    """Write one self-contained HTML report over ``run_dirs`` to ``out`` and return its path.

    Args:
        run_dirs: Run directories, one leaderboard row each.
        out: The HTML file to write.
        prices: Model spec -> USD per 1M (prompt, completion) tokens; each model's tokens used
            by the method (spent or replayed) are priced at its own price. None: costs show "—".
        max_tasks: How many tasks the per-sample drill-down shows per run.
        scoring: A label of ``maslab score``: every run's verdicts are its scoring's (a
            one-line :class:`~maslab.errors.ConfigError` for a run without it). None: each
            run's own; its scorings are summed up in its section either way.
    """
    loaded = [_load(directory, f"run-{i}", scoring) for i, directory in enumerate(run_dirs)]
    return _write(loaded, out, max_tasks, prices)


def write_run_report(result: RunResult, figures: TraceFigures, out: str | Path) -> Path:
    """Write the one-run report ``maslab run`` leaves, from the run as read back (``result``)
    and the figures its traces added up to as they were written (``figures``: every sample of
    the run's, :meth:`TraceFigures.add` in the order written), so that no trace is read again
    but the drill-down's."""
    store = RunStore(result.dir)
    run = _run(store, "run-0", result.records, result.records, result.summary, figures, None)
    return _write([run], out, DRILL_DOWN, None)


def _write(runs: list[_Run], out: str | Path, max_tasks: int, prices: Prices | None) -> Path:
    """The page over ``runs`` (ranked by accuracy, numbered and labelled here) written to
    ``out``, atomically."""
    runs = sorted(runs, key=lambda run: -run.summary.accuracy)
    labels = run_labels([run.manifest for run in runs], [run.store.dir for run in runs])
    runs = [
        replace(run, number=number, label=label)
        for number, (run, label) in enumerate(zip(runs, labels, strict=True), 1)
    ]
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with partial_file(path, "w") as f:  # a reader sees the old page or the whole new one
        for piece in _page(runs, max_tasks, prices):
            f.write(redact(piece))
    return path


def _page(runs: Sequence[_Run], max_tasks: int, prices: Prices | None) -> Iterator[str]:
    scoring = next((run.scoring for run in runs if run.scoring), None)
    verdicts = f" · the verdicts of scoring {escape(scoring)}" if scoring else ""
    yield (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>maslab report</title><style>{_CSS}{report_triage.CSS}{tools_html.CSS}</style>"
        "</head><body>"
        f'<h1>maslab report</h1><p class="muted">{len(runs)} runs{verdicts}</p>'
        f"<h2>Leaderboard</h2>{_leaderboard(runs, prices)}{_pictures(runs)}"
    )
    for run in runs:
        yield from _section(run, max_tasks, prices)
    yield "</body></html>"
