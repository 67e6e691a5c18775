"""The triage part of a run's section in the report: how many samples each signal of
:data:`maslab.analysis.triage.SIGNALS` fired on, the samples ranked as ``maslab triage`` ranks them
(linking to their transcripts, each with its outcome), each transcript's signals as badges, and
filters that show only the shown samples on which a chosen signal fired, or only those not
scored correct.

The filters are a ``<select>``, a checkbox and CSS alone (each signal's rule hides, in the
section whose chosen ``<option>`` it is, the samples whose ``data-signals`` lack it; the
checked box hides the section's ``correct`` samples), so the page still holds no script.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from maslab.analysis.triage import SIGNALS, Flagged, assess, order
from maslab.store.run_store import Key, ResultRecord

TOP = 10
"""How many of the ranked samples the triage part lists."""

OUTCOMES = ("correct", "wrong", "unparsed", "error")

_TAGS = {
    "correct": ("ok", "✓ correct"),
    "wrong": ("bad", "✗ wrong"),
    "unparsed": ("bad", "∅ unparsed"),
    "error": ("error", "error"),
}  # outcome -> (its tag's CSS class, its mark)

CSS = (
    "".join(
        f'section:has(.filter option[value="{name}"]:checked) '
        f'.sample:not([data-signals~="{name}"]) {{ display: none; }}\n'
        for name in SIGNALS
    )
    + "section:has(.wrong-only:checked) .sample.correct { display: none; }\n"
    + """.signal { display: inline-block; font-size: 0.8em; padding: 0 0.45em; margin-left: 0.3em;
  border-radius: 4px; background: #ece6fb; color: #4b2a9b; }
.triage { width: auto; } .triage td:nth-child(2) { text-align: right;
  font-variant-numeric: tabular-nums; }
.ranked li { margin: 0.15em 0; } .filter { margin: 0.8em 0 0.4em; }
.target { display: block; scroll-margin-top: 3em; }
"""
)


def outcome(record: ResultRecord) -> str:
    """One of :data:`OUTCOMES`: errored, answered with nothing to score, right or wrong."""
    if record.status == "error":
        return "error"
    if record.unparsed:
        return "unparsed"
    return "correct" if record.correct else "wrong"


def tag(record: ResultRecord) -> str:
    """The record's outcome as a coloured tag: '✓ correct', '✗ wrong', '∅ unparsed', 'error'."""
    css, mark = _TAGS[outcome(record)]
    return f'<span class="tag {css}">{mark}</span>'


@dataclass(frozen=True)
class Triage:
    """A run's samples by their triage signals (``token_outlier`` over the run's samples)."""

    counts: dict[str, int]
    """Every signal -> how many samples it fired on."""
    missing: dict[str, int]
    """A signal -> how many samples it could not be computed on (traces from before maslab
    stored what it needs); the signals computable on every sample are absent."""
    ranked: list[Flagged]
    """The samples on which any signal fired, the most flagged first."""
    fired: dict[Key, dict[str, float]]
    """A ranked sample's key -> the signals that fired on it."""


def triage(records: Sequence[ResultRecord], computed: Mapping[Key, dict[str, float]]) -> Triage:
    """The triage of ``records``: their stored signals, or for those stored without them, their
    signals in ``computed``."""
    flagged = assess(
        (r.model_copy(update={"signals": computed[r.key]}) if r.key in computed else r, None)
        for r in records
    )
    fired = Counter(name for f in flagged for name in f.fired)
    counts = {name: fired[name] for name in SIGNALS}
    missing = dict(Counter(name for f in flagged for name in f.not_computable))
    ranked = order(flagged)
    return Triage(counts, missing, ranked, {f.record.key: f.fired for f in ranked})


def badges(fired: Mapping[str, float]) -> str:
    """The signals that fired, each with its value, described on hover."""
    return "".join(
        f'<span class="signal" title="{escape(SIGNALS.get(name, name))}">{escape(name)} '
        f"{value:g}</span>"
        for name, value in fired.items()
    )


def part(found: Triage, targets: Mapping[Key, str]) -> str:
    """The triage part: each signal's count, then the first :data:`TOP` ranked samples, each
    with its outcome, linking to its transcript where the section shows it (``targets``: key
    -> element id)."""
    rows = "".join(
        f"<tr><td>{name}</td><td>{found.counts[name]:,}"
        + (f" (not computable on {found.missing[name]:,})" if name in found.missing else "")
        + f"</td><td>{escape(about)}</td></tr>"
        for name, about in SIGNALS.items()
    )
    table = (
        '<h4>Triage</h4><table class="triage"><thead><tr><th>Signal</th><th>Samples</th>'
        f"<th>Fires when</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    if not found.ranked:
        return table + '<p class="muted">no signal fired on any sample</p>'
    items = []
    for f in found.ranked[:TOP]:
        r = f.record
        name = f"<code>{escape(r.task_id)}</code> repeat {r.repeat}"
        if r.key in targets:
            name = f'<a href="#{targets[r.key]}">{name}</a>'
        items.append(f"<li>{tag(r)} {name} {badges(f.fired)}</li>")
    flagged = f"{len(found.ranked):,} flagged samples"
    which = (
        f"the first {len(items)} of the {flagged}" if len(found.ranked) > TOP else f"the {flagged}"
    )
    return (
        f'{table}<h4>Read first</h4><p class="muted">{which}, the most signals first (ties by '
        f'task and repeat), as <code>maslab triage</code> ranks them</p><ol class="ranked">'
        f"{''.join(items)}</ol>"
    )


def chooser(anchor: str, fired: Sequence[Mapping[str, float]], wrong: int) -> str:
    """The filters over the shown samples (``fired``: the signals that fired on each; ``wrong``:
    how many are not scored correct): every sample or those on which one signal fired, where
    any fired; and a box for the samples not correct alone, where some are and some are not."""
    counts = {name: sum(name in signals for signals in fired) for name in SIGNALS}
    options = "".join(
        f'<option value="{name}">{name} ({n:,})</option>' for name, n in counts.items() if n
    )
    parts = []
    if options:
        parts.append(
            f'<label>Show <select id="{anchor}-filter">'
            f'<option value="" selected>every sample shown ({len(fired):,})</option>{options}'
            "</select></label>"
        )
    if 0 < wrong < len(fired):
        parts.append(
            f'<label><input type="checkbox" class="wrong-only" id="{anchor}-wrong-only"> '
            f"wrong only (not scored correct: {wrong:,})</label>"
        )
    return f'<p class="filter">{" ".join(parts)}</p>' if parts else ""


def attributes(record: ResultRecord, fired: Mapping[str, float]) -> str:
    """A sample's ``<details>`` attributes: its class (``correct`` too when it is), and the
    signals the filter reads."""
    names = escape(" ".join(fired))
    kind = " correct" if outcome(record) == "correct" else ""
    return f' class="sample{kind}"' + (f' data-signals="{names}"' if names else "")
