"""Full-text search over a run's transcripts, streaming ``traces.jsonl`` one line at a time.

A trace matches when its prompt, a message, a model call's messages, response or error, or a
tool call holds the query, case-insensitively. Each line is first tested as bytes for the
query as JSON writes it (cheap, and most lines fail it); only the lines that pass are parsed
and checked as traces.
The last trace written for a (task, repeat) decides whether it matches, as it does everywhere.
"""

from __future__ import annotations

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


def matches(trace: Trace, query: str) -> bool:
    """Whether ``trace`` shows ``query`` anywhere, case-insensitively."""
    needle = query.lower()
    return any(needle in text.lower() for text in _texts(trace))


def search(traces: Path, query: str) -> set[Key]:
    """The (task, repeat)s whose latest trace in ``traces`` matches ``query``; memory is one
    line at a time."""
    needle = query.lower()
    # a necessary condition on the raw line, exact for ASCII queries (bytes.lower() lowers
    # only ASCII letters); other queries are checked on every parsed trace
    raw = orjson.dumps(needle)[1:-1] if needle.isascii() else b""
    found: dict[Key, bool] = {}
    if not traces.exists():
        return set()
    with traces.open("rb") as f:
        for line in f:
            if not line.endswith(b"\n") or (key := trace_key(line)) is None:
                continue
            hit = raw in line.lower() if raw else True
            if hit:
                try:
                    hit = matches(Trace.model_validate_json(line), query)
                except ValidationError:  # no trace: not shown, so not found
                    hit = False
            found[key] = hit  # a later trace of the key replaces the earlier one's verdict
    return {key for key, hit in found.items() if hit}
