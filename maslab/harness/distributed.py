"""Splitting a run over workers, whatever runs them: its samples into shards, and its limits
into fixed shares, one per worker slot, that add up to the whole.

A worker in slot ``s`` of ``S`` gets ``share(C, s, S)`` of the run's ``concurrency`` C (its
calls in flight and its open samples) and the same share of every endpoint's
``max_concurrency``, and ``rpm / S`` of every endpoint's ``rpm``. The shares of the S slots
add up to exactly the whole, so however many workers run, a server never sees more than its
endpoint's limits. A worker's shares hold across every shard it runs, one after another or
overlapping. ``perf/ray_sweep.py`` measures this fixed split against a limiter that every
worker asks per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from maslab.llm.endpoints import EndpointsFile

T = TypeVar("T")

SHARD_SAMPLES = 128  # a shard's samples at most, unless --shards says otherwise


def share(total: int, slot: int, slots: int) -> int:
    """Slot ``slot``'s (0-based) part of ``total`` split over ``slots``: the first
    ``total mod slots`` slots take one more, so the parts add up to ``total``."""
    return total // slots + (slot < total % slots)


def usable_slots(workers: int, concurrency: int, table: EndpointsFile | None) -> int:
    """How many worker slots can each have a share of at least one of the run's
    ``concurrency`` and of every endpoint's ``max_concurrency``: at most ``workers``."""
    caps = [e.max_concurrency for group in (table or {}).values() for e in group]
    return max(1, min(workers, concurrency, *(c for c in caps if c is not None)))


def split_endpoints(table: EndpointsFile | None, slot: int, slots: int) -> EndpointsFile | None:
    """The endpoints table a worker in ``slot`` of ``slots`` uses: every endpoint's
    ``max_concurrency`` and ``rpm`` its share (see the module)."""
    if table is None:
        return None
    return {
        alias: [
            endpoint.model_copy(
                update={
                    "max_concurrency": None
                    if endpoint.max_concurrency is None
                    else share(endpoint.max_concurrency, slot, slots),
                    "rpm": None if endpoint.rpm is None else endpoint.rpm / slots,
                }
            )
            for endpoint in endpoints
        ]
        for alias, endpoints in table.items()
    }


def plan_shards(samples: Sequence[T], shards: int | None, workers: int) -> list[list[T]]:
    """``samples`` dealt round-robin into ``shards`` shards (none empty); by default as many
    as ``workers``, or more, so that none holds more than :data:`SHARD_SAMPLES`."""
    if not samples:
        return []
    count = shards or max(workers, math.ceil(len(samples) / SHARD_SAMPLES))
    count = min(count, len(samples))
    return [list(samples[i::count]) for i in range(count)]
