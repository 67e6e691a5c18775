"""``maslab show``: a run's results as a table, or one task's transcript, in the terminal.

The transcript is printed with ``soft_wrap=False``: long lines wrap at the terminal's width
inside their panels instead of being cut there. The results are plain aligned columns, one line
per sample, left whole for the terminal to wrap (and for grep).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from maslab.analysis.rescoring import describe_scoring, describe_scorings, scored_by
from maslab.analysis.stats import summarize
from maslab.core.roles import describe_model_roles
from maslab.errors import ConfigError, one_line
from maslab.report.tools_html import call_text
from maslab.secrets import redact
from maslab.store.records import TraceTool
from maslab.store.run_store import Key, ResultRecord, RunStore

_RESULT_CHARS = 160  # of a tool call's result, on its line


def show_run(
    store: RunStore,
    console: Console,
    prices: Mapping[str, tuple[float, float]] | None = None,
    *,
    scoring: str | None = None,
) -> None:
    """The run's summary and one row per sample; ``prices`` (model -> USD per 1M prompt and
    completion tokens) adds the cost per sample, each model at its own price; ``scoring`` (a
    label of ``maslab score``) shows that scoring's verdicts instead of the run's own. Each
    scoring of the run is summed up in a line (:func:`describe_scorings`)."""
    manifest = store.manifest()
    own, superseded = store.records()
    records = sorted(_scored(store, scoring, own), key=lambda r: r.key)
    s = summarize(records, superseded=superseded, optimization=store.optimizations())
    console.print(
        f"[bold]{manifest.method}[/] on [bold]{manifest.benchmark}[/] with {manifest.model}: "
        f"{s.describe_accuracy()} over {s.design} · "
        f"{s.mean_tokens:,.0f} tokens per sample ({s.mean_spent_tokens:,.0f} newly "
        f"spent) · {s.total_served_tokens:,} served in all"
    )
    if scoring is not None:
        console.print(escape(describe_scoring(store, scoring)))
    for line in describe_scorings(store, own):
        console.print(escape(line))
    if strict := s.describe_strict():
        console.print(strict)
    if truncation := s.describe_truncation():
        console.print(truncation)
    if manifest.model_roles:
        console.print(f"model roles: {escape(describe_model_roles(manifest.model_roles))}")
    if by_model := s.describe_models(prices):
        console.print(f"per sample by model: {escape(by_model)}")
    if prices:
        cost = s.cost(prices)
        console.print(
            "cost: a model used has no price" if cost is None else f"cost ${cost:.4f} per sample"
        )
    if repeats := s.describe_repeats():
        console.print(repeats)
    if errors := s.describe_errors():
        console.print(f"errors: {escape(errors)}")
    if optimization := s.describe_optimization():
        console.print(escape(optimization))
    for cap in manifest.describe_caps():
        console.print(escape(cap))
    rows = _rows(records, strict=s.strict_accuracy is not None, cut=s.truncated_calls > 0)
    if console.color_system is None:  # no terminal: the text as it is, without rich's layout
        console.file.write(rows.plain)
    else:
        console.print(rows, soft_wrap=True, end="")


_HEADERS = ("task", "rep", "status", "extracted", "gold", "ok", "tokens", "calls")
_RIGHT = {"rep", "tokens", "calls", "cut"}


def _cells(r: ResultRecord) -> dict[str, str]:
    """A sample's row; the texts a model or a dataset wrote redacted here, as the rows are
    written as a :class:`Text`, which the console does not redact."""
    extracted = r.score.extracted if r.score and r.score.extracted is not None else "—"
    strict = r.score.strict if r.score else None
    calls = int(r.usage.get("calls", 0))
    return {
        "task": redact(one_line(r.task_id)), "rep": str(r.repeat), "status": r.status,
        "extracted": redact(one_line(extracted))[:40], "gold": redact(one_line(str(r.gold)))[:40],
        "ok": "✓" if r.correct else "✗",
        "strict": "—" if strict is None or strict.extracted is None else "✓✗"[not strict.correct],
        "tokens": f"{r.tokens_used:,}", "calls": str(calls), "cut": str(r.truncated_calls),
    }  # fmt: skip


def _rows(records: Sequence[ResultRecord], strict: bool = False, cut: bool = False) -> Text:
    """One aligned line per sample under a header; with ``strict``, the strict verdict after the
    score's ("—": no answer in the instructed form), with ``cut``, the replies cut at
    ``max_tokens``. Plain columns, not a rich ``Table``: a table measures every cell, which
    takes seconds at thousands of rows."""
    ok = _HEADERS.index("ok")
    headers = (*_HEADERS[: ok + 1], *("strict",) * strict, *_HEADERS[ok + 1 :], *("cut",) * cut)
    rows = [[cells[h] for h in headers] for cells in map(_cells, records)]
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]

    def cells(values: Sequence[str], columns: slice) -> str:
        pairs = zip(headers[columns], values[columns], widths[columns], strict=True)
        return "  ".join(v.rjust(w) if h in _RIGHT else v.ljust(w) for h, v, w in pairs)

    text = Text(cells(headers, slice(None)).rstrip() + "\n", style="bold")
    for row in rows:
        text.append(cells(row, slice(ok)) + "  ")
        text.append(row[ok].ljust(widths[ok]), style="green" if row[ok] == "✓" else "red")
        text.append("  " + cells(row, slice(ok + 1, None)) + "\n")
    return text


def show_task(
    store: RunStore, task_id: str, repeat: int, console: Console, *, scoring: str | None = None
) -> None:
    """The transcript of (``task_id``, ``repeat``) and its verdict, or the verdict of the
    scoring ``scoring`` (a label of ``maslab score``); only its trace is read."""
    index = store.index()
    [(_, trace)] = store.traces_of([(task_id, repeat)], index)
    if trace is None:
        raise ConfigError(_missing(store, task_id, repeat, index))
    records = _scored(store, scoring, store.results())
    result = next((r for r in records if r.key == (task_id, repeat)), None)
    prompt = Panel(escape(trace.prompt or ""), title=f"task {escape(task_id)}", expand=False)
    console.print(prompt, soft_wrap=False)
    for m in trace.messages:
        to = f" → {', '.join(m.recipients)}" if m.recipients else ""
        title = f"{escape(m.sender)}{escape(to)} · round {m.round} · {escape(m.kind)}"
        console.print(Panel(escape(m.content), title=title, title_align="left"), soft_wrap=False)
    if trace.tools:
        tools = Panel(_tool_lines(trace.tools), title="tool calls", title_align="left")
        console.print(tools, soft_wrap=False)
    if result is not None:
        verdict = "[green]correct[/]" if result.correct else "[red]wrong[/]"
        extracted = result.score.extracted if result.score else None
        console.print(
            f"{verdict}: extracted {escape(str(extracted))}, gold {escape(str(result.gold))} · "
            f"{int(result.usage.get('calls', 0))} calls, status {result.status}"
            + (f" · {escape(result.error)}" if result.error else ""),
            soft_wrap=False,
        )
        if result.score and (strict := result.score.strict):
            form = (
                "no answer in the instructed form"
                if strict.extracted is None
                else f"in the instructed form: {escape(strict.extracted)}"
            )
            verdict = "correct" if strict.correct else "wrong"
            console.print(f"strict: {verdict} ({form})", soft_wrap=False)
        if result.truncated_calls:
            console.print(f"replies cut at max_tokens: {result.truncated_calls}", soft_wrap=False)
        details = result.score.details if result.score else {}
        if "first_failed_turn" in details:
            console.print(escape(_first_failure(details)), soft_wrap=False)


def _scored(
    store: RunStore, scoring: str | None, records: list[ResultRecord]
) -> list[ResultRecord]:
    """``records``, as the scoring ``scoring`` scored them if one is named."""
    return records if scoring is None else scored_by(store, scoring, records)


def _tool_lines(tools: Sequence[TraceTool]) -> Text:
    """One line per call on the environment: its turn, agent, call and result (errors in red)."""
    text = Text()
    for call in tools:
        result = one_line(call.result)
        text.append(f"turn {call.turn} · {call.agent or '?'}: {call_text(call)} → ")
        text.append(result[:_RESULT_CHARS], style="red" if call.error else "")
        text.append("\n" if call is not tools[-1] else "")
    return text


def _first_failure(details: Mapping[str, Any]) -> str:
    """The first failing turn of an episode and, where the states differ, how."""
    line = f"first failed turn: {details['first_failed_turn']} ({details.get('reason', '')})"
    if isinstance(diff := details.get("difference"), Mapping):
        where = f"{diff.get('class')}.{diff.get('attribute')}"
        line += (
            f"\n  {where}: model {diff.get('model')}\n  {where}: expected {diff.get('expected')}"
        )
    return line


def _missing(store: RunStore, task_id: str, repeat: int, index: Collection[Key]) -> str:
    """Why there is no transcript for (``task_id``, ``repeat``), and what there is instead
    (``index``: the keys that have one)."""
    if repeats := sorted(r for t, r in index if t == task_id):
        have = ", ".join(map(str, repeats))
        return f"{store.dir}: task '{task_id}' has no repeat {repeat}; it has {have}"
    ids = sorted({t for t, _ in index})
    if not ids:
        return f"{store.dir}: no transcripts yet (no sample has finished)"
    close = difflib.get_close_matches(task_id, ids, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return (
        f"{store.dir}: no task '{task_id}'; {hint}{len(ids)} tasks, "
        f"from {ids[0]} to {ids[-1]} (`maslab show {store.dir}` lists them)"
    )
