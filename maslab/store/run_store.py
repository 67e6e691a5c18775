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

A run with an optimisation step (``--optimize-on``) also holds ``optimize.jsonl`` (one record
per attempt at the step, its spend apart from the samples'), ``optimize_traces.jsonl`` (its
calls) and ``learned_state.json`` (what the method learned, written atomically once the step
has succeeded; a re-run loads it instead of optimising again).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, ClassVar, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from maslab import defaults
from maslab.bench.evaluation import Score
from maslab.config_files import validation_message
from maslab.errors import ConfigError
from maslab.secrets import redact_bytes
from maslab.store import trace_index

Status = Literal["ok", "budget", "error"]
Key = tuple[str, int]
# usage keys: tokens newly spent, and tokens replayed from the response cache
SPENT_KEYS = ("prompt_tokens", "completion_tokens")
CACHED_KEYS = ("cached_prompt_tokens", "cached_completion_tokens")

MANIFEST, RESULTS, TRACES = "manifest.json", "results.jsonl", "traces.jsonl"
LOCK = ".lock"
"""The run directory's lock file: its writer holds it (``flock``) and writes its pid there."""
SUPERSEDED = "superseded.jsonl"
# the optimisation step (``--optimize-on``): one record and one trace per attempt, and what
# the method learned
OPTIMIZATION, OPTIMIZATION_TRACES = "optimize.jsonl", "optimize_traces.jsonl"
LEARNED_STATE = "learned_state.json"

log = logging.getLogger(__name__)


class ResultRecord(BaseModel):
    """One (task, repeat). ``status``: ok, budget (ended by its budget, still scored) or error.

    ``usage`` covers every call the method made for the sample (``UsageTotals`` fields:
    spent and cache-replayed tokens apart), ``usage_by_model`` the same per model, and
    ``scoring_usage`` the evaluator's judge calls, which are not the method's cost.
    ``signals``: its triage signals, name -> value, above 0 when it fired (see
    :mod:`maslab.analysis.triage`); empty in runs recorded before they were stored.
    """

    model_config = ConfigDict(frozen=True)

    task_id: str
    repeat: int = 0
    status: Status
    answer: str | None = None
    gold: str | None = None
    score: Score | None = None
    usage: dict[str, float] = Field(default_factory=dict)
    usage_by_model: dict[str, dict[str, float]] = Field(default_factory=dict)
    scoring_usage: dict[str, float] = Field(default_factory=dict)
    elapsed_s: float = 0.0
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    signals: dict[str, float] = Field(default_factory=dict)

    @property
    def key(self) -> Key:
        return (self.task_id, self.repeat)

    @property
    def correct(self) -> bool:
        return self.score is not None and self.score.correct

    @property
    def tokens_used(self) -> int:
        """Tokens the method's calls used: newly spent plus replayed from the cache."""
        return int(sum(self.usage.get(k, 0) for k in SPENT_KEYS + CACHED_KEYS))

    @property
    def unparsed(self) -> bool:
        return self.status != "error" and (self.score is None or self.score.unparsed)


class Manifest(BaseModel):
    """Everything that defines a run. The ``identity`` fields must match to resume into a dir."""

    model_config = ConfigDict(extra="allow")

    method: str
    method_config: dict[str, Any] = Field(default_factory=dict)
    benchmark: str
    benchmark_options: dict[str, Any] = Field(default_factory=dict)
    split: str = defaults.SPLIT
    limit: int | None = None
    seed: int = defaults.SEED
    data: str | None = None
    dataset_hash: str = ""
    tasks: int = 0
    task_ids: list[str] | None = None
    model: str
    model_roles: dict[str, Any] = Field(default_factory=dict)
    native: bool = True
    sampling: dict[str, Any] = Field(default_factory=dict)
    repeats: int = defaults.REPEATS
    evaluator: str
    evaluator_options: dict[str, Any] = Field(default_factory=dict)
    budget: dict[str, Any] = Field(default_factory=dict)
    optimize: dict[str, Any] = Field(default_factory=dict)
    """The optimisation step's split, limit, dataset hash and task ids; empty without one."""
    shard: tuple[int, int] | None = None
    """(i, N) for shard i of N (``--shard``, see :mod:`maslab.harness.shard`); None for a whole
    run."""
    concurrency: int | None = None
    """Model calls in flight across the run (as last run; None for older manifests)."""
    endpoint_caps: dict[str, int] = Field(default_factory=dict)
    """The models whose endpoints file capped their calls in flight below ``concurrency``."""
    sandbox: dict[str, Any] = Field(default_factory=dict)
    """How model-written code was isolated: :func:`maslab.sandbox.protections`, ``strict``,
    ``unsafe_no_sandbox`` and the ``missing`` essential protections; empty before they were
    recorded."""
    merged_from: list[str] | None = None
    """A merge's shard directories (``maslab merge``); None for a run that ran."""
    missing_shards: list[int] = Field(default_factory=list)
    """The shards a partial merge lacks (their tasks are not in it)."""
    created: str = ""
    maslab_version: str = ""
    git_commit: str | None = None
    python: str = ""

    IDENTITY: ClassVar[tuple[str, ...]] = (
        "method", "method_config", "benchmark", "split", "seed", "dataset_hash", "model",
        "model_roles", "native", "sampling", "evaluator", "evaluator_options", "budget",
        "optimize",
    )  # fmt: skip

    def identity(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.IDENTITY}

    def directory(self) -> Path:
        """The run's default directory, ``runs/<benchmark>/<method>__<model>__<digest>``, the
        digest over its :meth:`identity`: running the same run again resumes it there."""
        digest = hashlib.sha256(
            orjson.dumps(self.identity(), option=orjson.OPT_SORT_KEYS, default=str)
        ).hexdigest()[:8]
        name = f"{_slug(self.method)}__{_slug(self.model)}__{digest}"
        return Path("runs") / _slug(self.benchmark) / name

    def identity_differences(self, other: Manifest) -> list[str]:
        """The identity fields in which ``other`` differs from this manifest."""
        return [k for k in self.IDENTITY if getattr(self, k) != getattr(other, k)]

    def describe_caps(self) -> list[str]:
        """One line per model in ``endpoint_caps``: its cap binds, not ``--concurrency``."""
        return [
            f"{model} caps calls in flight at {cap} (max_concurrency in the endpoints file), "
            f"below --concurrency {self.concurrency}"
            for model, cap in self.endpoint_caps.items()
        ]

    def describe_sandbox(self) -> list[str]:
        """A warning when the run let model-written code run without isolation (its
        ``--unsafe-no-sandbox``, where the sandbox lacked essential protections)."""
        missing = self.sandbox.get("missing") or []
        if not (self.sandbox.get("unsafe_no_sandbox") and missing):
            return []
        return [
            f"--unsafe-no-sandbox: model-written code could run with the user's rights here "
            f"(no {', '.join(map(str, missing))})"
        ]

    def planned(self) -> set[Key] | None:
        """The (task, repeat) keys this run asked for; None for manifests that predate the list."""
        if self.task_ids is None:
            return None
        return {(task, repeat) for task in self.task_ids for repeat in range(self.repeats)}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60]


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


def _trace(path: Path, key: Key, line: bytes) -> dict[str, Any] | None:
    """A trace line parsed; None, with a warning, if it is not a JSON object."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError:
        row = None
    if not isinstance(row, dict):
        log.warning("warning: %s: the trace of %s repeat %d skipped: not valid JSON", path, *key)
        return None
    return row


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


def _line(row: dict[str, Any]) -> bytes:
    """One JSON line, with anything that looks like a credential redacted."""
    return redact_bytes(orjson.dumps(row)) + b"\n"


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

    @property
    def manifest_path(self) -> Path:
        return self.dir / MANIFEST

    def manifest(self) -> Manifest:
        try:
            return Manifest.model_validate_json(self.manifest_path.read_bytes())
        except FileNotFoundError:
            raise ConfigError(f"{self.dir}: not a maslab run (no {MANIFEST})") from None
        except ValidationError as exc:
            raise ConfigError(
                f"{self.manifest_path}: unreadable manifest ({validation_message(exc)})"
            ) from None
        except ValueError as exc:
            raise ConfigError(f"{self.manifest_path}: unreadable manifest ({exc})") from None

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

    def append_optimization(self, record: ResultRecord, trace: dict[str, Any]) -> None:
        """Write one attempt at the optimisation step (its trace first, as for samples)."""
        for name, row in (
            (OPTIMIZATION_TRACES, trace),
            (OPTIMIZATION, record.model_dump(mode="json")),
        ):
            with (self.dir / name).open("ab") as f:
                _append_whole(f, _line(row))

    def learned_state(self) -> tuple[bool, dict[str, Any] | None]:
        """(whether the optimisation step has saved its result, the method's learned state)."""
        path = self.dir / LEARNED_STATE
        if not path.exists():
            return False, None
        try:
            saved = orjson.loads(path.read_bytes())
            return True, saved["state"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise ConfigError(
                f"{path}: unreadable learned state; delete it to optimise again"
            ) from None

    def write_learned_state(self, state: dict[str, Any] | None, **about: Any) -> None:
        """Save the method's learned state (and ``about`` it) at once: never half a file."""
        try:
            data = orjson.dumps(
                {**about, "state": state}, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
            )
        except TypeError as exc:
            raise ConfigError(f"the method's learned state is not JSON: {exc}") from None
        write_atomically(self.dir / LEARNED_STATE, data)

    def traces(self, task_id: str | None = None) -> Iterator[dict[str, Any]]:
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
    ) -> Iterator[tuple[Key, dict[str, Any] | None]]:
        """Each key with its latest trace (None if it has none), read by seeking to it; a stale
        ``index`` (by default :meth:`index`) is rebuilt on the way."""
        path = self.dir / TRACES
        if not path.exists():
            yield from ((key, None) for key in keys)
            return
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
        if self.manifest_path.exists():
            previous = self.manifest()
            if changed := previous.identity_differences(manifest):
                raise ConfigError(
                    f"{self.dir} holds a different run ({', '.join(changed)} differ); "
                    "use another --out or delete it"
                )
        data = orjson.dumps(manifest.model_dump(), option=orjson.OPT_INDENT_2)
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

    def append(self, result: ResultRecord, trace: dict[str, Any]) -> None:
        """Write one finished sample: its trace, where that lies, then its result (so a result
        line always has its trace)."""
        assert self._results and self._traces and self._index, "call open() first"
        line, offset = _line(trace), self._traces.tell()
        _append_whole(self._traces, line)
        if (key := trace_index.trace_key(line)) is not None:
            _append_whole(self._index, trace_index.index_line(key, offset, len(line)))
        _append_whole(self._results, _line(result.model_dump(mode="json")))

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
