"""A run on disk: ``manifest.json``, ``results.jsonl`` and ``traces.jsonl`` in one directory.

``results.jsonl`` has one line per finished attempt at a (task, repeat), appended and flushed
as each finishes; ``traces.jsonl`` has the matching line with every model call and message,
and ``traces.idx`` where that line lies (see :mod:`maslab.store.trace_index`). Nothing is ever
rewritten: the last line for a (task, repeat) wins, and the earlier ones (errored attempts a
resume retried) are its superseded attempts, whose spend stays in the run's totals. A line cut
short by a killed process is cut off when the run is next opened for writing (readers ignore
it), and a corrupted one is skipped with a warning naming its file and line (a resume re-runs
its sample). Runs written before this moved superseded attempts to ``superseded.jsonl``; they
count the same. The manifest is replaced atomically (a temporary file, then a rename).

The manifest names the run's planned samples (``task_ids`` × ``repeats``); reading a run
reports exactly those, so a re-run with a smaller ``--limit`` or ``--repeats`` reports the
subset it asked for while the older records stay on disk.

``maslab attribute`` appends ``attributions.jsonl`` (:mod:`maslab.analysis.attribution`) and
``maslab score`` ``scorings.jsonl`` (:mod:`maslab.analysis.rescoring`), each holding the run's
lock while it does: analysis beside the run, whose own files stay as they are.

A run with an optimisation step (``--optimize-on``) also holds ``optimize.jsonl`` (one record
per attempt at the step, its spend apart from the samples'), ``optimize_traces.jsonl`` (its
calls) and ``learned_state.json`` (what the method learned, written atomically once the step
has succeeded; a re-run loads it instead of optimising again).

What each file holds is defined in :mod:`maslab.store.records`, the run format's one definition:
this module writes those records and reads them back as those types (:class:`ResultRecord`,
:class:`Trace`, :class:`Manifest`), checking each as it is read; a run written by a newer
maslab, in a format this one does not know, is refused in one line (:class:`FormatTooNew`).
"""

from __future__ import annotations

import fcntl
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import IO, Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from maslab.errors import ConfigError
from maslab.secrets import redact_bytes
from maslab.store import trace_index
from maslab.store.records import (
    ATTRIBUTIONS,
    CACHED_KEYS,
    FILES,
    FORMAT_VERSION,
    LEARNED_STATE,
    LOCK,
    MANIFEST,
    OPTIMIZATION,
    OPTIMIZATION_TRACES,
    RESULTS,
    SCORINGS,
    SPENT_KEYS,
    SUPERSEDED,
    TRACES,
    AttributionRecord,
    FormatTooNew,
    Key,
    LearnedStateFile,
    Manifest,
    ResultRecord,
    ScoringRecord,
    Status,
    Trace,
    read_manifest,
)

__all__ = [  # the run format's names, defined in maslab.store.records, are read from here too
    "ATTRIBUTIONS", "CACHED_KEYS", "FORMAT_VERSION", "LEARNED_STATE", "LOCK", "MANIFEST",
    "OPTIMIZATION", "OPTIMIZATION_TRACES", "RESULTS", "SCORINGS", "SPENT_KEYS", "SUPERSEDED",
    "TRACES", "AttributionRecord", "FormatTooNew", "Key", "Manifest", "ResultRecord", "RunLocked",
    "RunStore", "ScoringRecord", "Status", "Trace", "existing_run", "partial_file",
    "write_atomically",
]  # fmt: skip

log = logging.getLogger(__name__)

Beside = TypeVar("Beside", AttributionRecord, ScoringRecord)
"""A record of analysis kept beside the run (appended under its lock, the latest per key)."""


_SKIPPED: set[tuple[Path, int, str]] = set()
"""Lines already warned about: a run's files are read several times (open, progress, report)."""


def _skip(path: Path, number: int, why: str) -> None:
    """Warn, once per process, that a line of ``path`` is skipped."""
    if (path, number, why) not in _SKIPPED:
        _SKIPPED.add((path, number, why))
        log.warning("warning: %s line %d skipped: %s", path, number, why)


def _read_lines(path: Path, required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, parsed JSON object) per line, each object holding the ``required`` keys.

    A final line without its newline (a killed writer) is dropped quietly; any other line that
    is not such an object is skipped with a warning naming the file and line.
    """
    if not path.exists():
        return
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                return
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                _skip(path, number, "not valid JSON")
                continue
            if not isinstance(row, dict) or any(k not in row for k in required):
                _skip(path, number, f"not a record with {', '.join(required) or 'fields'}")
                continue
            yield number, row


def _records(path: Path) -> Iterator[ResultRecord]:
    """The valid result records of a JSONL file (others skipped with a warning)."""
    for number, row in _read_lines(path):
        try:
            yield ResultRecord.model_validate(row)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "record"
            _skip(path, number, f"not a result record ({where}: {first['msg']})")


def _trace(path: Path, key: Key, line: bytes) -> Trace | None:
    """A trace line read and checked; None, with a warning, if it is not a trace."""
    try:
        return Trace.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "line"
        log.warning(
            "warning: %s: the trace of %s repeat %d skipped: not a trace (%s: %s)",
            path, *key, where, first["msg"],
        )  # fmt: skip
        return None


def _in_plan(records: Iterable[ResultRecord], planned: set[Key] | None) -> list[ResultRecord]:
    return [r for r in records if planned is None or r.key in planned]


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` all at once: readers see the old file or the new one.
    The data goes first to a temporary file of a name no other writer uses."""
    with partial_file(path) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


@contextmanager
def partial_file(path: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """A new file beside ``path``, under a name no other writer uses, that replaces ``path``
    when the block ends; removed instead if the block fails."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    partial = Path(name)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)  # left only by a block that failed


def _line(data: bytes) -> bytes:
    """One JSON line, with anything that looks like a credential redacted."""
    return redact_bytes(data) + b"\n"


def _record_line(record: BaseModel) -> bytes:
    """A record (not a trace: :meth:`Trace.json_line`) as its JSON line."""
    return _line(record.model_dump_json().encode())


def _append_whole(file: IO[bytes], line: bytes) -> None:
    """Append and flush ``line``; a write that fails part-way (a full disk) is cut back off, so
    a later line is never glued onto half of it."""
    end = file.tell()
    try:
        file.write(line)
        file.flush()
    except OSError:
        with suppress(OSError):
            file.truncate(end)
            file.seek(end)
        raise


def _cut_torn_tail(path: Path) -> None:
    """Cut off a final line without its newline (a writer killed mid-line), so the next
    append starts a line of its own."""
    if not path.exists():
        return
    with path.open("r+b") as f:
        end = f.seek(0, os.SEEK_END)
        position = end
        while position > 0:
            start = max(0, position - 65536)
            f.seek(start)
            newline = f.read(position - start).rfind(b"\n")
            if newline >= 0:
                position = start + newline + 1
                break
            position = start
        if position < end:
            f.truncate(position)


class RunStore:
    """Reads and appends one run directory."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self._results: IO[bytes] | None = None
        self._traces: IO[bytes] | None = None
        self._index: IO[bytes] | None = None
        self._lock: int | None = None
        self._format_checked = False
        self._request: Manifest | None = None  # what open() was asked for

    @property
    def manifest_path(self) -> Path:
        return self.dir / MANIFEST

    def written_since(self, when: float) -> bool:
        """Whether a file of the run's records (each of :data:`FILES` but the manifest, which
        every opening rewrites) was modified at or after ``when``, a modification time (at: a
        file system with coarse times cannot tell which came first)."""
        for name in FILES:
            with suppress(FileNotFoundError):
                if name != MANIFEST and (self.dir / name).stat().st_mtime >= when:
                    return True
        return False

    def manifest(self) -> Manifest:
        """The run's manifest (once :meth:`open` has run, the one it was asked for, whose plan
        may be a part of the directory's: the store then reads that part); a one-line
        :class:`ConfigError` when there is none, it is unreadable, or a newer maslab wrote it
        (:class:`FormatTooNew`)."""
        if self._request is not None:
            return self._request
        try:
            data = self.manifest_path.read_bytes()
        except FileNotFoundError:
            raise ConfigError(f"{self.dir}: not a maslab run (no {MANIFEST})") from None
        manifest = read_manifest(data, self.manifest_path)
        self._format_checked = True
        return manifest

    def results(self, *, every: bool = False) -> list[ResultRecord]:
        """One record per planned (task, repeat), the last line written for it winning;
        ``every=True`` includes records outside the plan (left by a larger earlier run)."""
        latest, _ = self._read_results()
        return list(latest.values()) if every else _in_plan(latest.values(), self._planned())

    def superseded(self) -> list[ResultRecord]:
        """Attempts at planned samples that a later line replaced (errored ones a resume
        retried), kept for their spend."""
        return self.records()[1]

    def records(self) -> tuple[list[ResultRecord], list[ResultRecord]]:
        """(:meth:`results`, :meth:`superseded`) from one read of the results."""
        latest, replaced = self._read_results()
        earlier = [r for rs in replaced.values() for r in rs]
        legacy = [  # moved there by older versions; an interrupted move left copies behind
            r
            for r in _records(self.dir / SUPERSEDED)
            if r != latest.get(r.key) and r not in replaced.get(r.key, ())
        ]
        planned = self._planned()
        return _in_plan(latest.values(), planned), _in_plan(earlier + legacy, planned)

    def _read_results(self) -> tuple[dict[Key, ResultRecord], dict[Key, list[ResultRecord]]]:
        """(each key's last record, the earlier records it replaced) in ``results.jsonl``."""
        latest: dict[Key, ResultRecord] = {}
        replaced: dict[Key, list[ResultRecord]] = {}
        for record in _records(self.dir / RESULTS):
            if (earlier := latest.get(record.key)) is not None:
                replaced.setdefault(record.key, []).append(earlier)
            latest[record.key] = record
        return latest, replaced

    def optimizations(self) -> list[ResultRecord]:
        """The attempts at the optimisation step (``task_id`` "optimize"), failed ones too."""
        return list(_records(self.dir / OPTIMIZATION))

    def append_optimization(self, record: ResultRecord, trace: Trace) -> None:
        """Write one attempt at the optimisation step (its trace first, as for samples)."""
        for name, line in (
            (OPTIMIZATION_TRACES, _line(trace.json_line())),
            (OPTIMIZATION, _record_line(record)),
        ):
            with (self.dir / name).open("ab") as f:
                _append_whole(f, line)

    def learned_state(self) -> tuple[bool, dict[str, Any] | None]:
        """(whether the optimisation step has saved its result, the method's learned state)."""
        path = self.dir / LEARNED_STATE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return False, None
        try:
            return True, LearnedStateFile.model_validate_json(data).state
        except ValidationError:
            raise ConfigError(
                f"{path}: unreadable learned state; delete it to optimise again"
            ) from None

    def write_learned_state(
        self, state: dict[str, Any] | None, *, method: str, split: str | None, tasks: int
    ) -> None:
        """Save the method's learned state, with the method, split and number of tasks that it
        was learned by and on, at once: never half a file."""
        saved = LearnedStateFile(method=method, split=split, tasks=tasks, state=state)
        try:
            data = orjson.dumps(
                saved.model_dump(), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
            )
        except TypeError as exc:
            raise ConfigError(f"the method's learned state is not JSON: {exc}") from None
        write_atomically(self.dir / LEARNED_STATE, data)

    def attributions(self) -> list[AttributionRecord]:
        """The latest attribution of each sample by each strategy and judge
        (``attributions.jsonl``; none before ``maslab attribute`` ran)."""
        return self._beside(ATTRIBUTIONS, AttributionRecord)

    def attributing(self) -> AbstractContextManager[Callable[[AttributionRecord], None]]:
        """An appender of attributions, each line written whole, while this store holds the
        run's lock (a run cannot write the directory meanwhile, nor another attribution)."""
        return self._appending(ATTRIBUTIONS, AttributionRecord)

    def scorings(self, label: str | None = None) -> list[ScoringRecord]:
        """The latest scoring of each sample by each label, or by ``label`` only
        (``scorings.jsonl``; none before ``maslab score`` ran)."""
        return [s for s in self._beside(SCORINGS, ScoringRecord) if label in (None, s.label)]

    def scoring(self) -> AbstractContextManager[Callable[[ScoringRecord], None]]:
        """An appender of scorings, as :meth:`attributing` appends attributions."""
        return self._appending(SCORINGS, ScoringRecord)

    def _beside(self, name: str, kind: type[Beside]) -> list[Beside]:
        """The latest record of each key in the file ``name`` (others skipped with a warning)."""
        path, latest = self.dir / name, {}
        for number, row in _read_lines(path):
            try:
                record = kind.model_validate(row)
            except ValidationError:
                _skip(path, number, f"no {kind.__name__}")
                continue
            latest[record.key] = record
        return list(latest.values())

    @contextmanager
    def _appending(self, name: str, kind: type[Beside]) -> Iterator[Callable[[Beside], None]]:
        """An appender of ``kind`` records to the file ``name``, each line written whole, while
        this store holds the run's lock."""
        self._take_lock()
        try:
            path = self.dir / name
            _cut_torn_tail(path)
            with path.open("ab") as f:
                yield lambda record: _append_whole(f, _record_line(record))
        finally:
            self.close()

    def traces(self, task_id: str | None = None) -> Iterator[Trace]:
        """The latest trace of each (task, repeat), or of ``task_id``'s only, in the order
        written; each is read through the index, one at a time."""
        index = self.index()
        keys = sorted((k for k in index if task_id in (None, k[0])), key=index.__getitem__)
        for _, trace in self.traces_of(keys, index):
            if trace is not None:
                yield trace

    def index(self) -> dict[Key, trace_index.Entry]:
        """Where each (task, repeat)'s latest trace lies (no trace is parsed)."""
        return trace_index.load(self.dir / TRACES)

    def traces_of(
        self, keys: Iterable[Key], index: dict[Key, trace_index.Entry] | None = None
    ) -> Iterator[tuple[Key, Trace | None]]:
        """Each key with its latest trace (None if it has none, or its line is no trace), read
        by seeking to it and checked as it is read; a stale ``index`` (by default
        :meth:`index`) is rebuilt on the way."""
        path = self.dir / TRACES
        if not path.exists():
            yield from ((key, None) for key in keys)
            return
        if not self._format_checked and self.manifest_path.exists():
            self.manifest()  # a newer format: refused before a trace is read
        index = self.index() if index is None else index
        rebuilt = False
        with path.open("rb") as f:
            for key in keys:
                line = trace_index.read_line(f, key, index)
                if line is None and key in index and not rebuilt:  # stale: rebuild it once
                    index, rebuilt = trace_index.load(path, rebuild=True), True
                    line = trace_index.read_line(f, key, index)
                yield key, None if line is None else _trace(path, key, line)

    def _planned(self) -> set[Key] | None:
        return self.manifest().planned() if self.manifest_path.exists() else None

    def open(self, manifest: Manifest) -> set[Key]:
        """Start or resume a run; returns the keys already finished (not errored). Only
        appends: no trace is read, and the index is brought up to date if it lags.

        Raises :class:`ConfigError` if the directory holds a different run or is not writable,
        :class:`RunLocked` if another process writes it. The directory stays locked until
        :meth:`close`.
        """
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._take_lock()
        except OSError as exc:
            raise ConfigError(
                f"{self.dir}: output directory is not writable ({exc.strerror})"
            ) from None
        self._request, written = None, manifest
        if self.manifest_path.exists():
            previous = self.manifest()
            if changed := previous.identity_differences(manifest):
                raise ConfigError(
                    f"{self.dir} holds a different run ({', '.join(changed)} differ); "
                    "use another --out or delete it"
                )
            written = manifest.planning_too(previous)  # a smaller request narrows no plan
        self._request = manifest
        data = orjson.dumps(written.model_dump(), option=orjson.OPT_INDENT_2)
        write_atomically(self.manifest_path, redact_bytes(data))
        traces = self.dir / TRACES
        for path in (self.dir / RESULTS, traces, trace_index.index_path(traces)):
            _cut_torn_tail(path)
        for name in (OPTIMIZATION, OPTIMIZATION_TRACES):
            _cut_torn_tail(self.dir / name)
        trace_index.update(traces)
        finished = {r.key for r in self.results(every=True) if r.status != "error"}
        self._results = (self.dir / RESULTS).open("ab")
        self._traces = traces.open("ab")
        self._index = trace_index.index_path(traces).open("ab")
        return finished

    def append(self, result: ResultRecord, trace: Trace) -> None:
        """Write one finished sample: its trace, where that lies, then its result (so a result
        line always has its trace)."""
        assert self._results and self._traces and self._index, "call open() first"
        line, offset = _line(trace.json_line()), self._traces.tell()
        _append_whole(self._traces, line)
        if (key := trace_index.trace_key(line)) is not None:
            _append_whole(self._index, trace_index.index_line(key, offset, len(line)))
        _append_whole(self._results, _record_line(result))

    def close(self) -> None:
        """Close the run's files and let another writer in."""
        for f in (self._results, self._traces, self._index):
            if f is not None:
                f.close()
        self._results = self._traces = self._index = None
        if self._lock is not None:
            os.close(self._lock)  # the lock goes with the descriptor
            self._lock = None

    def _take_lock(self) -> None:
        """Lock the directory for this store (the kernel lets go if the process dies)."""
        if self._lock is not None:
            return
        fd = os.open(self.dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunLocked(
                f"{self.dir} is being written by another maslab process (pid {holder}); "
                "wait for it to end, or use another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock = fd


class RunLocked(ConfigError):
    """Another process is writing the run directory."""


def existing_run(path: str | Path) -> RunStore:
    """The run in ``path``, or a one-line :class:`ConfigError` saying why it is not one."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such run directory")
    if not path.is_dir():
        raise ConfigError(f"{path}: not a run directory (it is a file)")
    store = RunStore(path)
    store.manifest()  # no manifest, or an unreadable one: a one-line error now
    return store
