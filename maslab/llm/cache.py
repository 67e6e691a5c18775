"""SQLite response cache.

The key covers the model's identity, the messages, the sampling parameters, the tools and
response format, and the request's draw index, so k identical requests of one sample are k
entries (independent samples stay independent) while re-running the sample replays each of
them exactly.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

import orjson

from maslab.errors import ConfigError
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Middleware

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    completion BLOB NOT NULL,
    created REAL NOT NULL
)
"""


class ResponseCache:
    """A thread-safe key -> completion store in one SQLite file (WAL mode)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"{self.path}: cannot open the response cache ({exc})") from None
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute(
                "SELECT completion FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        return Completion.from_record(orjson.loads(row[0]), cached=True)

    def put(self, key: str, completion: Completion) -> None:
        record = completion.to_record()
        record.pop("cached")
        blob = orjson.dumps(record)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                (key, completion.model, blob, time.time()),
            )

    def stats(self) -> dict[str, int]:
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM responses").fetchone()
        return {"entries": count, "bytes": self.path.stat().st_size if self.path.exists() else 0}

    def clear(self) -> int:
        """Delete every entry; returns how many there were."""
        with self._lock:
            return self._db.execute("DELETE FROM responses").rowcount

    def close(self) -> None:
        with self._lock:
            self._db.close()


class Cached(Middleware):
    """Answers from the cache when it can; stores every fresh completion."""

    def __init__(self, inner: ChatModelBase, cache: ResponseCache, namespace: str) -> None:
        super().__init__(inner)
        self.cache = cache
        self.namespace = namespace

    async def complete(self, request: ChatRequest) -> Completion:
        key = request.fingerprint(self.namespace)
        hit = self.cache.get(key)
        if hit is not None:
            return replace(hit, latency_s=0.0)
        completion = await self.inner.complete(request)
        self.cache.put(key, completion)
        return completion
