"""Where each sample's trace lies in a run's ``traces.jsonl``, so a reader seeks to one trace
instead of parsing them all.

``traces.idx`` holds one JSON line ``[task_id, repeat, offset, length]`` per trace line,
appended right after the trace; the last entry for a (task, repeat) wins, as the last trace
does. An index that is missing (runs older than it) or behind the traces (a writer killed
between the two lines) is completed by one streaming scan that takes each line's key from its
first bytes, holding no trace; one that points past the file or at the wrong line is rebuilt
whole the same way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import orjson

Key = tuple[str, int]
Entry = tuple[int, int]
"""A trace line's byte offset and length (its newline included)."""


def index_path(traces: Path) -> Path:
    """``traces.idx`` beside ``traces.jsonl``."""
    return traces.with_suffix(".idx")


log = logging.getLogger(__name__)

# how maslab writes a trace: its key first (a JSON string cannot hold a raw quote or newline)
_KEY = re.compile(rb'\{"task_id":("(?:[^"\\]|\\.)*"),"repeat":(\d+)[,}]')


def trace_key(line: bytes) -> Key | None:
    """The (task, repeat) of a trace line: read from its first bytes when maslab wrote it,
    else by parsing it; None for a line that is no trace."""
    if match := _KEY.match(line):
        return orjson.loads(match[1]), int(match[2])
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if isinstance(row, dict) and isinstance(row.get("task_id"), str):
        repeat = row.get("repeat")
        if isinstance(repeat, int) and not isinstance(repeat, bool):
            return row["task_id"], repeat
    return None


def index_line(key: Key, offset: int, length: int) -> bytes:
    return orjson.dumps([key[0], key[1], offset, length]) + b"\n"


def _scan(traces: Path, start: int) -> Iterator[tuple[Key, int, int]]:
    """(key, offset, length) of each whole trace line from byte ``start`` on (a line start);
    a line that is no trace is skipped with a warning, a final line without its newline quietly."""
    with traces.open("rb") as f:
        f.seek(start)
        offset = start
        for line in f:
            if not line.endswith(b"\n"):
                return
            if (key := trace_key(line)) is not None:
                yield key, offset, len(line)
            elif line.strip():
                log.warning("warning: %s: the line at byte %d skipped: not a trace", traces, offset)
            offset += len(line)


def _entries(path: Path) -> tuple[dict[Key, Entry], int] | None:
    """The index file's entries and the end of the traces they cover; None if it is unreadable
    (a line cut short at the end is ignored: the scan that follows redoes it)."""
    entries: dict[Key, Entry] = {}
    end = 0
    try:
        with path.open("rb") as f:
            for line in f:
                if not line.endswith(b"\n"):
                    break
                task, repeat, offset, length = orjson.loads(line)
                entries[(task, repeat)] = (offset, length)
                end = max(end, offset + length)
    except FileNotFoundError:
        pass
    except (orjson.JSONDecodeError, TypeError, ValueError):
        return None
    return entries, end


def _at_line_start(traces: Path, offset: int) -> bool:
    if offset == 0:
        return True
    with traces.open("rb") as f:
        f.seek(offset - 1)
        return f.read(1) == b"\n"


def load(traces: Path, *, rebuild: bool = False) -> dict[Key, Entry]:
    """Each key's latest trace line in ``traces``, from its index brought up to date (or, with
    ``rebuild``, from a fresh scan); nothing is written."""
    entries, new = _sync(traces, rebuild=rebuild)
    for key, offset, length in new:
        entries[key] = (offset, length)
    return entries


def _sync(traces: Path, *, rebuild: bool) -> tuple[dict[Key, Entry], list[tuple[Key, int, int]]]:
    """(the index's valid entries, the entries it lacks); empty entries when it must be
    rebuilt whole."""
    size = traces.stat().st_size if traces.exists() else 0
    read = None if rebuild else _entries(index_path(traces))
    if read is None or read[1] > size or not _at_line_start(traces, read[1]):
        read = {}, 0
    entries, end = read
    return entries, list(_scan(traces, end)) if end < size else []


def update(traces: Path) -> None:
    """Make the index on disk cover ``traces`` (before a writer appends to both): append the
    entries it lacks, or write it anew when it is unreadable or stale."""
    entries, new = _sync(traces, rebuild=False)
    path = index_path(traces)
    if not entries and path.exists() and path.stat().st_size:
        path.write_bytes(b"")  # stale: what follows is the whole index
    if new:
        with path.open("ab") as f:
            f.write(b"".join(index_line(*entry) for entry in new))


def read_line(f: IO[bytes], key: Key, index: dict[Key, Entry]) -> bytes | None:
    """``key``'s trace line in the open traces file; None if ``index`` has no entry for it, or
    its entry is not one whole line for ``key`` (the index is stale)."""
    if (entry := index.get(key)) is None:
        return None
    offset, length = entry
    f.seek(offset)
    line = f.read(length)
    if line.find(b"\n") != length - 1 or trace_key(line) != key:
        return None
    return line
