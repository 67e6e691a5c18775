"""Full-text search over a run's transcripts, streaming ``traces.jsonl`` one line at a time.

A trace matches when its prompt, a message, a model call's messages, response or error, or a
tool call holds the query, case-insensitively. Each line is first tested as bytes for the
query as JSON writes it (cheap, and most lines fail it); only the lines that pass are parsed
and checked as traces.
The last trace written for a (task, repeat) decides whether it matches, as it does everywhere,
and gives the snippet shown: the first text that holds the query, cut around its first match.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import orjson
from pydantic import ValidationError

from maslab.store.records import Key, Trace
from maslab.store.trace_index import trace_key


def _texts(trace: Trace) -> Iterator[str]:
    """Every piece of text a transcript shows."""
    yield trace.prompt or ""
    for message in trace.messages:
        yield message.content
    for call in trace.calls:
        for turn in call.messages:
            yield turn.content
        yield call.response or ""
        yield call.error or ""
        for tool in call.tool_calls:
            yield f"{tool.name}({tool.arguments})"


SNIPPET = 60
"""Characters of context a snippet keeps on each side of the match."""

Snippet = tuple[str, str, str]
"""A match in its context: the text before it, the matched text, the text after it."""


def snippet(trace: Trace, query: str) -> Snippet | None:
    """Where ``trace`` shows ``query`` first (case-insensitively), on one line with up to
    :data:`SNIPPET` characters each side; None if it shows it nowhere."""
    needle = query.lower()
    text = next((text for text in _texts(trace) if needle in text.lower()), None)
    if text is None:
        return None
    flat = " ".join(text.split())
    found = re.search(re.escape(" ".join(query.split())), flat, re.IGNORECASE)
    if found is None:  # a case folding that changed the length: the text's start
        return ("", "", flat[: 2 * SNIPPET] + ("…" if len(flat) > 2 * SNIPPET else ""))
    start, end = found.span()
    before = flat[max(0, start - SNIPPET) : start]
    after = flat[end : end + SNIPPET]
    return (
        ("…" if start > SNIPPET else "") + before,
        flat[start:end],
        after + ("…" if end + SNIPPET < len(flat) else ""),
    )


def search(traces: Path, query: str) -> dict[Key, Snippet]:
    """The (task, repeat)s whose latest trace in ``traces`` matches ``query``, each with its
    :func:`snippet`; memory is one line at a time."""
    needle = query.lower()
    # a necessary condition on the raw line, exact for ASCII queries (bytes.lower() lowers
    # only ASCII letters); other queries are checked on every parsed trace
    raw = orjson.dumps(needle)[1:-1] if needle.isascii() else b""
    found: dict[Key, Snippet | None] = {}
    if not traces.exists():
        return {}
    with traces.open("rb") as f:
        for line in f:
            if not line.endswith(b"\n") or (key := trace_key(line)) is None:
                continue
            hit = None
            if raw in line.lower() if raw else True:
                with contextlib.suppress(ValidationError):  # no trace: not shown, so not found
                    hit = snippet(Trace.model_validate_json(line), query)
            found[key] = hit  # a later trace of the key replaces the earlier one's verdict
    return {key: hit for key, hit in found.items() if hit is not None}
