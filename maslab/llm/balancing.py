"""Per-endpoint limits, and load balancing with sample affinity across the endpoints of one
model alias."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence

from asyncio_throttle import Throttler

from maslab.errors import RateLimited, RequestRejected
from maslab.llm.retry import RetryPolicy
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Feature, Middleware

REFUSED = (401, 403)  # the endpoint refuses the credentials it was given


class Limited(Middleware):
    """At most ``max_concurrency`` requests in flight and ``rpm`` per minute to one endpoint.

    A 429 with Retry-After pauses every request to this endpoint until the server's time is up;
    a 401 or 403 marks it ``refused`` (its credentials will not change in this process).
    """

    def __init__(
        self, inner: ChatModelBase, max_concurrency: int, rpm: float | None = None
    ) -> None:
        super().__init__(inner)
        self.max_concurrency = max_concurrency
        self._throttler = _throttler(rpm) if rpm else None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.in_flight = 0  # admitted or waiting: what the balancer compares
        self.paused_until = 0.0
        self.refused = False

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore, self._loop = asyncio.Semaphore(self.max_concurrency), loop
        return self._semaphore

    async def complete(self, request: ChatRequest) -> Completion:
        self.in_flight += 1
        try:
            async with self._gate():
                if self._throttler is not None:
                    await self._throttler.acquire()
                pause = self.paused_until - time.monotonic()
                if pause > 0:
                    await asyncio.sleep(pause)
                try:
                    return await self.inner.complete(request)
                except RateLimited as exc:
                    if exc.retry_after:
                        self.paused_until = max(
                            self.paused_until, time.monotonic() + exc.retry_after
                        )
                    raise
                except RequestRejected as exc:
                    self.refused = self.refused or exc.status in REFUSED
                    raise
        finally:
            self.in_flight -= 1


def _throttler(rpm: float) -> Throttler:
    """``rpm`` requests a minute, exactly, as whole requests per period: 0.5 is one in 120 s."""
    per_period = max(1, int(rpm))
    return Throttler(rate_limit=per_period, period=60.0 * per_period / rpm)


class Balanced(ChatModelBase):
    """Spreads requests over the endpoints of one alias, keeping each sample on one endpoint.

    A request with an ``affinity`` (every request of one sample has the same) goes to the
    endpoint a stable hash of it picks, so the sample's prompts meet the prefix cache of the
    server that saw the earlier ones; only while that endpoint is paused (429 Retry-After) or
    full (``max_concurrency`` requests in flight) does the request go to the least-loaded one.
    A request without an affinity goes to the least-loaded endpoint: the one not paused with
    the smallest share of its ``max_concurrency`` in flight, the first on ties. An endpoint that
    refused its credentials (401, 403) is nobody's home and the last choice; the request it
    refused goes once to the best of the others, so a sample pinned to a misconfigured replica
    (on a resume, every one of its errored samples) is not lost with it.

    ``retry`` is the retry policy the endpoints ask for, applied by the layer above.
    """

    def __init__(
        self, name: str, endpoints: Sequence[Limited], *, retry: RetryPolicy | None = None
    ) -> None:
        if not endpoints:
            raise ValueError("Balanced needs at least one endpoint")
        self.name = name
        self.endpoints = list(endpoints)
        self.retry = retry

    @property
    def max_concurrency(self) -> int:
        """Requests in flight its endpoints take together."""
        return sum(e.max_concurrency for e in self.endpoints)

    def pick(self, request: ChatRequest) -> Limited:
        """The endpoint ``request`` goes to (see the class docstring)."""
        now = time.monotonic()
        if request.affinity:
            digest = hashlib.blake2b(request.affinity.encode(), digest_size=8).digest()
            home = self.endpoints[int.from_bytes(digest, "big") % len(self.endpoints)]
            usable = not home.refused and home.paused_until <= now
            if usable and home.in_flight < home.max_concurrency:
                return home
        return min(
            self.endpoints,
            key=lambda e: (e.refused, e.paused_until > now, e.in_flight / e.max_concurrency),
        )

    async def complete(self, request: ChatRequest) -> Completion:
        target = self.pick(request)
        try:
            return await target.complete(request)
        except RequestRejected:
            if not target.refused or all(e.refused for e in self.endpoints):
                raise
        return await self.pick(request).complete(request)  # once, to an endpoint not refused

    def supports(self, feature: Feature) -> bool:
        """True when every endpoint does ``feature`` natively (any of them may get a request)."""
        return all(e.supports(feature) for e in self.endpoints)

    async def aclose(self) -> None:
        await asyncio.gather(*(e.aclose() for e in self.endpoints))
