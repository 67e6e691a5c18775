"""Which waiting model call goes next when a run's calls in flight are at their cap.

Every model call of a run passes one :class:`CallGate` (``--concurrency`` slots). While a slot
is free a call takes it at once, so the policy matters only when the cap binds; it then picks
the waiting call that takes the next free slot:

- ``fcfs``: the call that has waited longest (what an :class:`asyncio.Semaphore` does).
- ``progress``: the call whose sample has had the most calls answered, so the samples closest
  to completion finish first (as an LLM agent OS schedules its agents' requests); ties go to
  the call that has waited longest.

Nothing starves: a waiting call that has seen ``patience`` slots go to other calls (16 per
slot of the gate by default: about 16 model latencies) is served before every call that came
after it, oldest first. The policy changes the order in which calls are sent, never what is
sent: no prompt depends on completion order. It orders the run's gate only: where an endpoint's
own, lower ``max_concurrency`` binds instead, calls wait there first come first served.

``progress`` is the default, from ``perf/scheduler.py`` (LLM Debate 3x2 and Self-Refine on 256
tasks, 16 calls in flight, 150 ms). A run opens as many samples as calls in flight, so under
either policy as many samples are open: wall time, mean per-sample latency (open samples over
throughput) and memory come out the same, and ``progress`` finishes its first sample sooner
(a debate's after its two rounds, not after every open sample's first round too). Where more
samples are open than slots (runs sharing one gate), ``fcfs`` advances them all in step, so
they all finish near the end; ``progress`` finishes them about in the order they opened: the
first several times sooner, lower mean latency, and less memory as finished samples let go,
though a sample that opened late may take longer than under ``fcfs`` (the p95 latency).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections import deque
from collections.abc import AsyncIterator
from typing import Literal

from maslab import defaults

Policy = Literal["fcfs", "progress"]
POLICIES: tuple[Policy, ...] = ("fcfs", "progress")
PATIENCE_PER_SLOT = 16  # a waiting call's patience, in slots granted, per slot of the gate


class CallGate:
    """At most ``capacity`` holders at once; waiting calls are served by ``policy``.

    Acquire and release are O(log n) in the number of waiting calls. A waiter that is cancelled
    never holds a slot: one granted a slot as it was cancelled hands it on.

    Args:
        capacity: Slots (model calls in flight).
        policy: ``"fcfs"`` or ``"progress"`` (see the module).
        patience: Slots granted to other calls after which a waiting call goes before every
            later one; None is ``PATIENCE_PER_SLOT x capacity``.
    """

    def __init__(
        self, capacity: int, policy: Policy = defaults.SCHEDULER, *, patience: int | None = None
    ) -> None:
        if capacity < 1:
            raise ValueError(f"a call gate needs at least one slot, got {capacity}")
        if policy not in POLICIES:
            raise ValueError(f"unknown scheduling policy {policy!r}: one of {', '.join(POLICIES)}")
        self.capacity = capacity
        self.policy = policy
        self.patience = PATIENCE_PER_SLOT * capacity if patience is None else patience
        self._free = capacity
        self._tickets = itertools.count()
        self._grants = 0  # slots handed to waiting calls so far
        # (priority, ticket, future): the best waiting call on top; done futures are skipped
        self._queue: list[tuple[int, int, asyncio.Future[None]]] = []
        # (grants when it came, future), oldest first: whose patience runs out first
        self._arrivals: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def in_use(self) -> int:
        """Slots held."""
        return self.capacity - self._free

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return sum(not future.done() for _, future in self._arrivals)

    @contextlib.asynccontextmanager
    async def slot(self, progress: int = 0) -> AsyncIterator[None]:
        """Hold a slot for the ``async with`` block; ``progress`` is the calls of the caller's
        sample answered so far."""
        await self.acquire(progress)
        try:
            yield
        finally:
            self.release()

    async def acquire(self, progress: int = 0) -> None:
        """Wait for a slot (see :meth:`slot`)."""
        if self._free:  # a free slot means nobody waits: release hands slots to waiters
            self._free -= 1
            return
        future = asyncio.get_running_loop().create_future()
        priority = -progress if self.policy == "progress" else 0
        heapq.heappush(self._queue, (priority, next(self._tickets), future))
        self._arrivals.append((self._grants, future))
        try:
            await future
        except asyncio.CancelledError:
            if not future.cancelled():  # granted a slot as it was cancelled: hand it on
                self.release()
            raise

    def release(self) -> None:
        """Give a slot back: to the next waiting call, if there is one."""
        future = self._next()
        if future is not None:
            self._grants += 1
            future.set_result(None)
        elif self._free == self.capacity:
            raise RuntimeError("CallGate released more often than acquired")
        else:
            self._free += 1

    def _next(self) -> asyncio.Future[None] | None:
        """The waiting call to serve next (taken off the queue), or None."""
        arrivals = self._arrivals
        while arrivals and arrivals[0][1].done():
            arrivals.popleft()
        if not arrivals:
            self._queue.clear()  # only served or cancelled calls are left in it
            return None
        came, oldest = arrivals[0]
        if self._grants - came >= self.patience:
            arrivals.popleft()
            return oldest
        while True:  # a waiting call is in the queue, so this ends
            future = heapq.heappop(self._queue)[2]
            if not future.done():
                return future
