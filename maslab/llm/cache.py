"""SQLite response cache.

The key covers the model's identity, the messages, the sampling parameters, the tools and
response format, and the request's draw index, so k identical requests of one sample are k
entries (independent samples stay independent) while re-running the sample replays each of
them exactly.

Writes are batched: a stored completion waits in memory (where ``get`` finds it) until
:data:`BATCH_SIZE` wait or the oldest has waited :data:`BATCH_SECONDS`, and is then written
with the others in one transaction; ``flush``, ``close`` and closing the model write the rest
(so does the interpreter's exit). A killed process loses only entries not yet written: calls a
re-run makes again, never results.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import orjson

from maslab.errors import ConfigError
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Middleware

BATCH_SIZE = 64
BATCH_SECONDS = 1.0
_INSERT = "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    completion BLOB NOT NULL,
    created REAL NOT NULL
)
"""


class ResponseCache:
    """A thread-safe key -> completion store in one SQLite file (WAL mode), written in batches.
    ``create=False`` opens an existing cache only: a path with no file is a one-line
    :class:`ConfigError` (a typo must not make a new, empty cache)."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path).expanduser()
        if not create and not self.path.is_file():
            raise ConfigError(
                f"{self.path}: no response cache there (a run with the cache on makes one)"
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"{self.path}: cannot open the response cache ({exc})") from None
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[str, bytes, float]] = {}  # key -> row, not yet written
        self._oldest = 0.0  # when the oldest pending entry was stored (monotonic)
        weakref.finalize(self, _write, self._db, self._lock, self._pending)

    def get(self, key: str) -> Completion | None:
        with self._lock:
            pending = self._pending.get(key)
            if pending is not None:
                blob = pending[1]
            else:
                row = self._db.execute(
                    "SELECT completion FROM responses WHERE key = ?", (key,)
                ).fetchone()
                if row is None:
                    return None
                blob = row[0]
        return Completion.from_record(orjson.loads(blob), cached=True)

    def put(self, key: str, completion: Completion) -> None:
        record = completion.to_record()
        record.pop("cached")
        record.pop("attempts")  # a replay sends no request
        blob = orjson.dumps(record)
        now = time.monotonic()
        with self._lock:
            if not self._pending:
                self._oldest = now
            self._pending[key] = (completion.model, blob, time.time())
            if len(self._pending) >= BATCH_SIZE or now - self._oldest >= BATCH_SECONDS:
                _write(self._db, None, self._pending)

    def flush(self) -> None:
        """Write every entry still waiting in memory."""
        _write(self._db, self._lock, self._pending)

    async def aget(self, key: str) -> Completion | None:
        """:meth:`get`, as :class:`Cached` asks it (a cache on another machine answers later)."""
        return self.get(key)

    async def aflush(self) -> None:
        """:meth:`flush`, as :class:`Cached` asks it."""
        self.flush()

    def stats(self) -> dict[str, int]:
        """How many entries the cache holds, and its bytes on disk (the file and its WAL)."""
        self.flush()
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM responses").fetchone()
        files = (self.path, self.path.with_name(self.path.name + "-wal"))
        return {"entries": count, "bytes": sum(f.stat().st_size for f in files if f.exists())}

    def clear(self) -> int:
        """Delete every entry and give their space back to the file system (the file shrinks);
        returns how many there were."""
        self.flush()
        with self._lock:
            removed = self._db.execute("DELETE FROM responses").rowcount
            self._db.execute("VACUUM")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL holds the vacuumed pages
            return removed

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._db.close()


def _write(
    db: sqlite3.Connection,
    lock: threading.Lock | None,
    pending: dict[str, tuple[str, bytes, float]],
) -> None:
    """Write ``pending`` to ``db`` in one transaction and empty it (taking ``lock`` unless
    the caller holds it); a closed database is left alone."""
    if lock is not None:
        with lock:
            _write(db, None, pending)
        return
    if not pending:
        return
    rows = [(key, *row) for key, row in pending.items()]
    pending.clear()
    try:
        db.execute("BEGIN")
        db.executemany(_INSERT, rows)
        db.execute("COMMIT")
    except sqlite3.ProgrammingError:  # closed: nothing can be written any more
        return
    except sqlite3.Error:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


class CacheStore(Protocol):
    """What :class:`Cached` needs of a cache: a :class:`ResponseCache`, or a stand-in for one
    that lives elsewhere (a cluster's cache actor)."""

    async def aget(self, key: str) -> Completion | None: ...

    def put(self, key: str, completion: Completion) -> None: ...

    async def aflush(self) -> None: ...


class Cached(Middleware):
    """Answers from the cache when it can; stores every fresh completion."""

    def __init__(self, inner: ChatModelBase, cache: CacheStore, namespace: str) -> None:
        super().__init__(inner)
        self.cache = cache
        self.namespace = namespace

    async def complete(self, request: ChatRequest) -> Completion:
        key = request.fingerprint(self.namespace)
        hit = await self.cache.aget(key)
        if hit is not None:
            return replace(hit, latency_s=0.0, queued_s=0.0)
        completion = await self.inner.complete(request)
        self.cache.put(key, completion)
        return completion

    async def aclose(self) -> None:
        await self.cache.aflush()
        await self.inner.aclose()
