"""The viewer's HTML: the leaderboard and sample list, and one sample's transcript.

Pages are rendered on the server and hold no script; every string from a run (model text,
task ids, manifests, query strings) is HTML-escaped, and the server's Content-Security-Policy
forbids scripts besides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from itertools import groupby
from urllib.parse import urlencode

from maslab.analysis.stats import Summary
from maslab.analysis.trajectory import has_answers, round_answers
from maslab.core.roles import describe_model_roles
from maslab.report import (
    attribution_html,
    breakable,
    describe_votes,
    one_line,
    scoring_verdicts,
    tools_html,
)
from maslab.report.call_html import call_html
from maslab.report.triage import OUTCOMES, outcome
from maslab.store.records import Key, ResultRecord, Trace, TraceMessage, TraceTool
from maslab.viewer.filters import PAGE_SIZE, Filters
from maslab.viewer.runs import Run, signals_of
from maslab.viewer.search import Snippet

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #222; max-width: 1300px; margin: 1.5em auto;
  padding: 0 1.5em; }
h1 { margin: 0 0 0.2em; font-size: 1.5em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 0.3em 0.6em; border-bottom: 1px solid #e4e4e4; text-align: left;
  vertical-align: top; }
th { background: #f3f5f8; } tbody tr:hover { background: #fafbfc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#leaderboard { font-size: 0.92em; }
mark { background: #fff0a8; padding: 0 0.1em; } .nav { display: flex; gap: 1.5em; }
a { color: #2a5db0; text-decoration: none; } a:hover { text-decoration: underline; }
.muted { color: #777; font-size: 0.9em; }
form.filters { display: flex; flex-wrap: wrap; gap: 0.6em; align-items: end; margin: 1em 0; }
form.filters label { display: flex; flex-direction: column; font-size: 0.85em; color: #555; }
form.filters input[type=search] { min-width: 18em; }
.tag { display: inline-block; min-width: 5em; font-size: 0.85em; font-weight: 600;
  padding: 0 0.5em; border-radius: 4px; text-align: center; }
.correct { background: #dff3e3; color: #1a6b2e; } .wrong { background: #fbe1e1; color: #9b1c1c; }
.error { background: #fff1cc; color: #7a5500; } .unparsed { background: #ece8f6; color: #4b3a80; }
.signal { display: inline-block; font-size: 0.8em; background: #eef2f8; border-radius: 4px;
  padding: 0 0.4em; margin: 0 0.2em 0.2em 0; }
.answer { font-size: 0.85em; background: #e8f1fb; border-radius: 4px; padding: 0 0.4em; }
.pager { margin: 0.8em 0; display: flex; gap: 1.2em; }
pre, code, dd { font: 12.5px/1.45 ui-monospace, Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; padding: 0.6em;
  border-radius: 4px; max-height: 28em; overflow: auto; margin: 0.3em 0 0.8em; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2em 1em; }
dt { font-weight: 600; } dd { margin: 0; white-space: pre-wrap; word-break: break-word; }
details { border: 1px solid #e1e4e8; border-radius: 6px; margin: 0.4em 0; padding: 0.3em 0.8em; }
summary { cursor: pointer; }
"""


def page(title: str, body: str) -> str:
    """A whole HTML page (``title`` is escaped here, ``body`` must be already)."""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}{tools_html.CSS}</style></head>"
        f"<body>{body}</body></html>"
    )


def _row(cells: Iterable[object], tag: str = "td", numeric: Sequence[int] = ()) -> str:
    return (
        "<tr>"
        + "".join(
            f'<{tag} class="num">{cell}</{tag}>' if i in numeric else f"<{tag}>{cell}</{tag}>"
            for i, cell in enumerate(cells)
        )
        + "</tr>"
    )


def _table(name: str, head: Sequence[str], rows: Iterable[str]) -> str:
    return (
        f'<table id="{name}"><thead>{_row(map(escape, head), "th")}</thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _accuracy(s: Summary) -> str:
    if not s.n:
        return "—"
    return s.describe_accuracy() if s.graded else "not graded"


def _model(run: Run) -> str:
    roles = describe_model_roles(run.manifest.model_roles)
    return f"{run.manifest.model} ({roles})" if roles else run.manifest.model


def leaderboard(runs: Sequence[Run]) -> str:
    """One row per run, most accurate first, with its rank; a run's name selects its samples
    below. Strict accuracy and format compliance, replies cut at ``max_tokens`` and tool calls
    have columns where some run has them."""
    ranked = sorted(runs, key=lambda run: -run.summary.accuracy)
    strict = any(run.summary.describe_strict() for run in ranked)
    cut = any(run.summary.truncated_calls for run in ranked)
    tools = [tools_html.per_sample(run.records) for run in ranked]
    head = ["Rank", "#", "Run", "Benchmark", "Model", "n", "Accuracy [95% CI]"]
    head += ["Strict [95% CI]", "In form"] if strict else []
    head += ["Unparsed", "Errors", "Tokens / sample", "Calls / sample"]
    head += ["Cut replies / sample"] if cut else []
    head += ["Tool calls / sample", "Tool errors / sample"] if any(tools) else []
    rows = []
    for rank, (run, tooled) in enumerate(zip(ranked, tools, strict=True), 1):
        m, s = run.manifest, run.summary
        link = escape(list_url(Filters(run=run.number).query()))
        cells: list[tuple[object, bool]] = [  # (content, whether it is a number)
            (rank, True),
            (run.number, True),
            (f'<a href="{link}" title="{escape(run.path)}">{breakable(run.label)}</a>', False),
            (breakable(m.benchmark), False),
            (breakable(_model(run)), False),
            (s.n, True),
            (_accuracy(s), False),
        ]
        if strict:
            cells += [(_strict(s), False), (_share(s.compliance), True)]
        cells += [
            (s.unparsed, True),
            (s.errors, True),
            (f"{s.mean_tokens:,.0f}" if s.n else "—", True),
            (f"{s.mean_calls:,.1f}" if s.n else "—", True),
        ]
        if cut:
            cells.append((f"{s.truncated_calls / s.n:.2f}" if s.n else "—", True))
        if any(tools):
            cells += [(cell, True) for cell in tooled or ("—", "—")]
        numeric = [i for i, (_, number) in enumerate(cells) if number]
        rows.append(_row((cell for cell, _ in cells), numeric=numeric))
    return _table("leaderboard", head, rows)


def _strict(s: Summary) -> str:
    """The strict accuracy and its interval, '—' for a run without strict verdicts."""
    if s.strict_accuracy is None or s.strict_ci is None:
        return "—"
    lo, hi = s.strict_ci
    return f"{s.strict_accuracy:.1%} [{lo:.1%}, {hi:.1%}]"


def _share(share: float | None) -> str:
    return "—" if share is None else f"{share:.1%}"


def list_url(query: str) -> str:
    """The sample list's address for a query string (escape it to put it in an attribute)."""
    return f"/?{query}" if query else "/"


def _select(name: str, label: str, options: Iterable[tuple[str, str]], chosen: object) -> str:
    picked = "" if chosen is None else str(chosen)
    items = "".join(
        f'<option value="{escape(value)}"{" selected" if value == picked else ""}>'
        f"{escape(text)}</option>"
        for value, text in [("", "any"), *options]
    )
    return f'<label>{escape(label)}<select name="{name}">{items}</select></label>'


def filter_form(runs: Sequence[Run], filters: Filters, signals: Mapping[str, str]) -> str:
    """The filters as a GET form (``signals``: name -> description)."""
    methods = sorted({run.manifest.method for run in runs})
    parts = [
        _select(
            "run", "run", ((str(r.number), f"{r.number}: {r.label}") for r in runs), filters.run
        ),
        _select("method", "method", ((m, m) for m in methods), filters.method),
        _select("outcome", "outcome", ((o, o) for o in OUTCOMES), filters.outcome),
        _select("signal", "signal", ((s, s) for s in signals), filters.signal),
        f'<label>search transcripts<input type="search" name="q" value="{escape(filters.q)}" '
        'placeholder="text in a prompt, message or call"></label>',
        '<button type="submit" id="apply">Filter</button>',
    ]
    return f'<form class="filters" method="get" action="/">{"".join(parts)}</form>'


def _signals(record: ResultRecord, descriptions: Mapping[str, str]) -> str:
    return "".join(
        f'<span class="signal" title="{escape(descriptions.get(name, ""))}">'
        f"{escape(name)} {value:g}</span>"
        for name, value in signals_of(record).items()
    )


def _extracted(record: ResultRecord) -> str | None:
    return record.score.extracted if record.score else None


def _short(text: object, width: int = 40) -> str:
    return escape(one_line(str(text), width))


def _tool_calls(record: ResultRecord) -> str:
    """'8 (1 errored)': the sample's calls on its environment."""
    errored = f" ({record.tool_errors} errored)" if record.tool_errors else ""
    return f"{record.tool_calls}{errored}"


def sample_link(run: Run, record: ResultRecord, filters: Filters) -> str:
    """The address of ``record``'s transcript, carrying the list's filters back."""
    return "/sample?" + urlencode({
        "run": run.number, "task": record.task_id, "repeat": record.repeat,
        "back": filters.query(),
    })  # fmt: skip


def _snippet(found: Snippet) -> str:
    before, match, after = found
    return f"{escape(before)}<mark>{escape(match)}</mark>{escape(after)}"


def sample_list(
    rows: Sequence[tuple[Run, ResultRecord]],
    filters: Filters,
    descriptions: Mapping[str, str],
    found: Mapping[int, Mapping[Key, Snippet]] | None = None,
) -> str:
    """The page of ``rows`` that ``filters.page`` asks for, with links to the other pages;
    with a search (``found``: run number -> key -> where its transcript matched), each
    sample's match in its context."""
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    number = min(filters.page, pages)
    start = (number - 1) * PAGE_SIZE
    shown = rows[start : start + PAGE_SIZE]
    tooled = any(r.tool_calls for _, r in rows)
    body = []
    for run, r in shown:
        kind = outcome(r)
        cells = (
            f'<span title="{escape(run.label)} · {escape(run.path)}">{run.number}</span>',
            f'<a class="sample" href="{escape(sample_link(run, r, filters))}">'
            f"{escape(r.task_id)}</a>",
            r.repeat,
            f'<span class="tag {kind}">{kind}</span>',
            _short(_extracted(r) or "—"),
            _short(r.gold if r.gold is not None else "—"),
            f"{r.tokens_used:,}",
            int(r.usage.get("calls", 0)),
            *((_tool_calls(r),) if tooled else ()),
            _signals(r, descriptions),
            *((_snippet(found[run.number][r.key]),) if found else ()),
        )
        body.append(_row(cells, numeric=(0, 2, 6, 7, 8) if tooled else (0, 2, 6, 7)))
    head: tuple[str, ...] = (
        "Run",
        "Task",
        "Rep",
        "Outcome",
        "Extracted",
        "Gold",
        "Tokens",
        "Calls",
    )
    head += ("Tool calls", "Signals") if tooled else ("Signals",)
    head += ("Match",) if found else ()
    counted = (
        f"{start + 1:,}–{start + len(shown):,} of {len(rows):,} samples"
        if rows
        else "no sample matches these filters"
    )
    links = [
        f'<a href="{escape(list_url(filters.query(page=number - 1)))}" id="previous">← previous</a>'
        if number > 1
        else "",
        f"page {number:,} of {pages:,}",
        f'<a href="{escape(list_url(filters.query(page=number + 1)))}" id="next">next →</a>'
        if number < pages
        else "",
    ]
    pager = f'<div class="pager">{"".join(f"<span>{link}</span>" for link in links)}</div>'
    return f'<p class="muted" id="count">{counted}</p>{_table("samples", head, body)}{pager}'


def _messages(
    messages: Sequence[TraceMessage], answers: Sequence[str | None], tools: Sequence[TraceTool]
) -> str:
    """The messages in order, under a heading per round; each with its extracted answer and
    followed by the tool calls it made (:func:`maslab.report.tools_html.placed`; the calls
    placed after none come last)."""
    parts = []
    after, apart = tools_html.placed(messages, tools)
    numbered = [
        (m, answers[i] if i < len(answers) else None, after[i]) for i, m in enumerate(messages)
    ]
    for round_, group in groupby(numbered, key=lambda shown: shown[0].round):
        if round_ is not None:
            parts.append(f"<h3>Round {escape(str(round_))}</h3>")
        for m, answer, made in group:
            about = [m.kind, "→ " + ", ".join(m.recipients) if m.recipients else None]
            badge = f' <span class="answer">answer: {escape(answer)}</span>' if answer else ""
            parts.append(
                f'<div class="msg"><b>{escape(m.sender)}</b> '
                f'<span class="muted">{escape(" · ".join(filter(None, about)))}</span>{badge}'
                f"<pre>{escape(m.content)}</pre></div>{tools_html.tools_html(made)}"
            )
    return "".join(parts) + tools_html.tools_html(apart)


def _agent_answers(record: ResultRecord, trace: Trace) -> str:
    """Each agent's answer per round, and the last round's vote tally (with how a tie was
    broken: :func:`maslab.report.describe_votes`)."""
    if not has_answers(trace):
        return ""
    rounds = round_answers(trace)
    if not rounds:
        return ""
    agents = list(dict.fromkeys(agent for by_agent in rounds.values() for agent in by_agent))
    rows = [
        _row([escape(str(r)), *(escape(str(rounds[r].get(a) or "—")) for a in agents)])
        for r in sorted(rounds)
    ]
    tally = describe_votes(record, trace)
    return (
        f"<h2>Answers by agent</h2>{_table('answers', ['round', *agents], rows)}"
        f'<p id="tally">last round\'s votes: {escape(tally or "none")}</p>'
    )


def _nav(back: str, neighbours: tuple[str | None, str | None]) -> str:
    """The way back to the sample list, and to the samples before and after in it."""
    previous, following = neighbours
    links = [f'<a href="{escape(list_url(back))}" id="back">← samples</a>']
    if previous:
        links.append(f'<a href="{escape(previous)}" id="previous-sample">← previous sample</a>')
    if following:
        links.append(f'<a href="{escape(following)}" id="next-sample">next sample →</a>')
    return f'<p class="nav">{"".join(links)}</p>'


def transcript(
    run: Run,
    record: ResultRecord,
    trace: Trace | None,
    back: str,
    descriptions: Mapping[str, str],
    neighbours: tuple[str | None, str | None] = (None, None),
) -> str:
    """One sample: its verdict and figures, who its failure is attributed to, prompt, messages by
    round, answers and calls; ``back`` is the sample list's query string, ``neighbours`` the
    addresses of the previous and the next sample in that list (None: none)."""
    kind = outcome(record)
    facts = {
        "Run": f"{run.number}: {run.label} · {_model(run)} · {run.path}",
        "Status": record.status,
        "Gold": record.gold,
        "Answer": record.answer,
        "Extracted": _extracted(record),
        "Score": (
            f"{record.score.value:g} {record.score.explanation}".strip() if record.score else None
        ),
        **tools_html.episode_facts(record.score),
        "Error": record.error,
        "Usage": f"{record.tokens_used:,} tokens in {int(record.usage.get('calls', 0))} calls, "
        f"{record.elapsed_s:.1f} s",
        "Tools": tools_html.tool_counts(record),
        "Scorings": scoring_verdicts(run.verdicts.get(record.key, [])),
    }
    parts = [
        _nav(back, neighbours),
        f'<h1><span class="tag {kind}">{kind}</span> <code>{escape(record.task_id)}</code> '
        f'<span class="muted">repeat {record.repeat}</span></h1>',
        "<dl>"
        + "".join(f"<dt>{k}</dt><dd>{escape(v)}</dd>" for k, v in facts.items() if v is not None)
        + (
            f"<dt>Signals</dt><dd>{signals}</dd>"
            if (signals := _signals(record, descriptions))
            else ""
        )
        + "</dl>",
        attribution_html.sample_lines(
            [a for a in run.store.attributions() if a.key[:2] == record.key]
        ),
    ]
    if trace is None:
        parts.append('<p class="muted">This sample has no transcript.</p>')
        return "".join(parts)
    if trace.prompt is not None:
        parts.append(f"<h2>Prompt</h2><pre>{escape(trace.prompt)}</pre>")
    parts.append(_agent_answers(record, trace))
    if trace.messages or trace.tools:
        shown = _messages(trace.messages, trace.answers or (), trace.tools)
        parts.append(f'<h2>Messages</h2><div id="messages">{shown}</div>')
    if calls := trace.calls:
        parts.append(f"<h2>Calls ({len(calls)})</h2>{''.join(map(call_html, calls))}")
    return "".join(parts)
