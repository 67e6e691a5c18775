"""Bounded retries of retryable failures (429, 5xx, malformed replies, timeouts, connection
errors)."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel, ConfigDict, Field
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from maslab.errors import LLMError
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Middleware


class RetryPolicy(BaseModel):
    """Exponential backoff with full jitter, never shorter than a server's Retry-After (up to
    ``max_wait``: a server cannot stall a run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attempts: int = Field(6, ge=1)
    initial_wait: float = Field(1.0, ge=0)
    max_wait: float = Field(60.0, ge=0)


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, LLMError) and exc.retryable


class Retrying(Middleware):
    """Retries the inner model per ``policy``; the last failure is raised with ``attempts`` set."""

    def __init__(self, inner: ChatModelBase, policy: RetryPolicy | None = None) -> None:
        super().__init__(inner)
        self.policy = policy or RetryPolicy()
        self._backoff = wait_random_exponential(
            multiplier=self.policy.initial_wait, max=self.policy.max_wait
        )

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = min(getattr(exc, "retry_after", None) or 0.0, self.policy.max_wait)
        return max(self._backoff(state), retry_after)

    async def complete(self, request: ChatRequest) -> Completion:
        try:  # the first attempt goes straight through: most calls need no retry machinery
            return await self.inner.complete(request)
        except LLMError as exc:
            if not _retryable(exc) or self.policy.attempts == 1:
                exc.attempts = 1
                raise
            first = exc
        return await self._retry(request, first)

    async def _retry(self, request: ChatRequest, first: LLMError) -> Completion:
        """The attempts after a retryable ``first`` failure, under tenacity (whose first
        attempt raises ``first`` again, so it waits, counts and stops as for any failure)."""
        pending = [first]

        async def attempt() -> Completion:
            if pending:
                raise pending.pop()
            return await self.inner.complete(request)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.policy.attempts),
            wait=self._wait,
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        try:
            completion: Completion = await retrying(attempt)
        except LLMError as exc:
            exc.attempts = retrying.statistics.get("attempt_number", 1)
            raise
        return replace(completion, attempts=retrying.statistics.get("attempt_number", 1))
