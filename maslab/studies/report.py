"""A study's findings as text (the terminal) and as one self-contained HTML page.

Each table shows our figure with its 95% interval beside the paper's and the verdict between
them; the page adds the study's question and source, the models run, what the runs cost, the
cells not run yet, and the notes. Every string from a run or a file is HTML-escaped; the page
loads nothing from the network.
"""

from __future__ import annotations

from collections.abc import Iterator
from html import escape
from pathlib import Path

from maslab.store.run_store import partial_file
from maslab.studies.base import Analysis, Cell, Study, Table
from maslab.studies.estimates import figure
from maslab.studies.running import StudyRecord

VERDICT_CLASS = {
    "inside": "ok", "sign holds": "ok", "higher": "off", "lower": "off", "sign reversed": "bad",
    "not detected": "off",
}  # fmt: skip


def _paper(cell: Cell, percent: bool) -> str:
    return "—" if cell.paper is None else figure(cell.paper, percent)


def cell_text(cell: Cell, percent: bool = True) -> str:
    """'54.0 [50.1, 57.9] · paper 56.0 · inside', or what is missing."""
    ours = cell.ours.describe(percent) if cell.ours else cell.note or "—"
    paper = f" · paper {_paper(cell, percent)}" if cell.paper is not None else ""
    verdict = f" · {cell.verdict}" if cell.verdict else ""
    return f"{ours}{paper}{verdict}"


def describe_cost(analysis: Analysis) -> str:
    per = analysis.calls / analysis.samples if analysis.samples else 0
    tokens = analysis.tokens / analysis.samples if analysis.samples else 0
    return (
        f"{analysis.samples:,} samples, {analysis.calls:,} calls, {analysis.tokens:,} tokens "
        f"({per:.1f} calls and {tokens:,.0f} tokens per sample)"
    )


_CSS = """
body { font: 15px/1.5 system-ui, sans-serif; color: #222; max-width: 1400px; margin: 2em auto;
  padding: 0 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { padding: 0.3em 0.6em; border-bottom: 1px solid #e4e4e4; text-align: right;
  font-variant-numeric: tabular-nums; vertical-align: top; }
th:first-child, td:first-child { text-align: left; } th { background: #f3f5f8; }
.muted { color: #777; font-size: 0.9em; } .ci { color: #555; font-size: 0.85em; }
.v { display: inline-block; font-size: 0.8em; padding: 0 0.4em; border-radius: 3px; }
.ok { background: #dff3e3; color: #1a6b2e; } .off { background: #fff1cc; color: #7a5500; }
.bad { background: #fbe1e1; color: #9b1c1c; }
"""


def _cell_html(cell: Cell, percent: bool) -> str:
    if cell.ours is None:
        ours = f'<span class="muted">{escape(cell.note or "—")}</span>'
    else:
        e = cell.ours
        low, high = figure(e.low, percent), figure(e.high, percent)
        ours = f'<b>{figure(e.value, percent)}</b> <span class="ci">[{low}, {high}]</span>'
    paper = (
        f'<br><span class="muted">paper {_paper(cell, percent)}</span>'
        if cell.paper is not None
        else ""
    )
    verdict = (
        f' <span class="v {VERDICT_CLASS[cell.verdict]}">{escape(cell.verdict)}</span>'
        if cell.verdict
        else ""
    )
    return f"<td>{ours}{paper}{verdict}</td>"


def _table_html(table: Table) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in ("", *table.columns))
    rows = "".join(
        f"<tr><td>{escape(row.label)}</td>"
        + "".join(_cell_html(cell, table.percent) for cell in row.cells)
        + "</tr>"
        for row in table.rows
    )
    against = f" · against {escape(table.against)}" if table.against else ""
    notes = "".join(f'<p class="muted">{escape(n)}</p>' for n in table.notes)
    return (
        f'<h2>{escape(table.title)}</h2><p class="muted">{escape(table.what)}{against}</p>'
        f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{notes}"
    )


def _page(
    study: Study, record: StudyRecord, analysis: Analysis, missing: tuple[str, ...]
) -> Iterator[str]:
    figures = study.paper_figures()
    source = f"{figures.paper}, {figures.where}" if figures else study.source
    yield (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(study.name)} · maslab study</title><style>{_CSS}</style></head><body>"
        f"<h1>{escape(study.title)}</h1><p>{escape(study.question)}</p>"
        f'<p class="muted">source: {escape(source)}<br>models: '
        f"{escape(', '.join(record.models))} · limit {record.limit or 'none'} · repeats "
        f"{record.repeats} · seed {record.seed}<br>cost: {escape(describe_cost(analysis))}</p>"
    )
    for table in analysis.tables:
        yield _table_html(table)
    for note in (*analysis.notes, *(figures.notes if figures else ())):
        yield f'<p class="muted">{escape(note)}</p>'
    if missing:
        shown = ", ".join(missing[:20]) + (
            f" and {len(missing) - 20} more" if len(missing) > 20 else ""
        )
        yield f'<p class="muted">not run yet: {escape(shown)}</p>'
    yield "</body></html>"


def write_page(
    out: Path, study: Study, record: StudyRecord, analysis: Analysis, missing: tuple[str, ...]
) -> Path:
    """Write the study's page to ``out/study.html`` (replaced whole) and return its path."""
    path = out / "study.html"
    with partial_file(path, "w") as f:
        for piece in _page(study, record, analysis, missing):
            f.write(piece)
    return path
