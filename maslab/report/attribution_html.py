"""Failure attribution in the report and the viewer (:mod:`maslab.analysis.attribution`): per
strategy and judge, how many failures each role is held responsible for and what the judge
spent; on a failed sample, the agent and step named, with the judge's reason."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from itertools import groupby

from maslab.analysis.attribution import tally
from maslab.store.records import AttributionRecord


def _by_judge(
    attributions: Sequence[AttributionRecord],
) -> list[tuple[tuple[str, str], list[AttributionRecord]]]:
    ordered = sorted(attributions, key=lambda a: (a.strategy, a.judge, a.task_id, a.repeat))
    return [(key, list(group)) for key, group in groupby(ordered, lambda a: (a.strategy, a.judge))]


def spend(attributions: Sequence[AttributionRecord]) -> str:
    """The judges' spend, apart from the run's: ``""`` without attributions."""
    if not attributions:
        return ""
    calls = sum(a.calls for a in attributions)
    tokens = sum(a.prompt_tokens + a.completion_tokens for a in attributions)
    return (
        f"failure attribution: {len(attributions)} samples, {calls:,} judge calls, {tokens:,} "
        "tokens (analysis spend, not in the run's totals)"
    )


def part(attributions: Sequence[AttributionRecord]) -> str:
    """The run's failures by responsible role, a table per strategy and judge."""
    if not attributions:
        return ""
    tables = []
    for (strategy, judge), group in _by_judge(attributions):
        counts = tally(group, "role")
        total = sum(counts.values())
        rows = "".join(
            f"<tr><td>{escape(role)}</td><td>{n}</td><td>{n / total:.0%}</td></tr>"
            for role, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        )
        tables.append(
            f'<p class="muted">{escape(strategy)} · judge {escape(judge)} · {total} failed '
            f'samples</p><table class="triage"><tr><th>role held responsible</th>'
            f"<th>failures</th><th>share</th></tr>{rows}</table>"
        )
    return f"<h4>Failure attribution</h4>{''.join(tables)}"


def sample_lines(attributions: Sequence[AttributionRecord]) -> str:
    """One sample's attributions: who, at which step, why (by strategy and judge)."""
    lines = []
    for a in sorted(attributions, key=lambda a: (a.strategy, a.judge)):
        named = (
            f"<b>{escape(a.agent)}</b> ({escape(a.role or a.agent)}), step {a.step}"
            if a.agent is not None and a.step is not None
            else "no step named"
        )
        why = f": {escape(a.reason)}" if a.reason else ""
        lines.append(
            f'<p class="attribution">Attributed to {named}{why} '
            f'<span class="muted">({escape(a.strategy)}, judge {escape(a.judge)}, '
            f"{a.calls} calls)</span></p>"
        )
    return "".join(lines)
