"""Typed errors. Every message is one line that names the problem and, where it helps, the fix."""

from __future__ import annotations

from maslab.secrets import redact


class MaslabError(Exception):
    """Base of every error maslab raises on purpose."""


class ConfigError(MaslabError, ValueError):
    """A user mistake: an unknown name, a malformed file, a missing environment variable."""


class RunFailed(MaslabError):
    """A run that started, wrote what it finished, then stopped: re-running it resumes."""


class BudgetExceeded(MaslabError):
    """A sample used up its call, token or wall-time budget.

    Methods may catch it and answer with what they have; the runner scores the sample either way.
    """

    def __init__(self, kind: str, limit: float, used: float) -> None:
        self.kind, self.limit, self.used = kind, limit, used
        super().__init__(f"budget exceeded: {kind} limit {limit:g}, used {used:g}")


class ContextWindowFull(BudgetExceeded):
    """A call of the sample's method did not fit its model's context window
    (:class:`ContextTooLong`): the sample ends there, as a budget ends it, and is scored on what
    it did (a long episode outgrows a small model's window; another attempt would too)."""

    def __init__(self, cause: ContextTooLong) -> None:
        MaslabError.__init__(self, f"context window full: {cause}")
        self.kind, self.limit, self.used = "context", 0.0, 0.0


class SampleEnded(MaslabError):
    """A model call was asked for after the sample ended (its siblings had stopped it)."""


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) as one space."""
    return " ".join(text.split())


class LLMError(MaslabError):
    """A model call failed for good (after any retries). Never returned as ``None``.

    The message is redacted (:func:`maslab.secrets.redact`): servers echo credentials in errors.
    It is one line, however many lines the server or client library wrote.
    """

    retryable = False

    def __init__(self, message: str, *, model: str = "", status: int | None = None) -> None:
        self.model, self.status = model, status
        self.attempts = 1
        prefix = f"{model}: " if model else ""
        super().__init__(one_line(redact(prefix + message)))

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} (after {self.attempts} attempts)" if self.attempts > 1 else text


class RateLimited(LLMError):
    """HTTP 429. ``retry_after`` is the server's Retry-After in seconds, when it sent one."""

    retryable = True

    def __init__(self, message: str, *, model: str = "", retry_after: float | None = None) -> None:
        super().__init__(message, model=model, status=429)
        self.retry_after = retry_after


class ServerError(LLMError):
    """HTTP 5xx."""

    retryable = True


class LLMTimeout(LLMError):
    """The request did not complete within its timeout."""

    retryable = True


class LLMConnectionError(LLMError):
    """The endpoint could not be reached, or dropped the connection."""

    retryable = True


class ConnectionRefused(LLMConnectionError):
    """A server on this machine refused the connection: nothing listens at its address, and
    nothing will before the user starts it, so it is not retried."""

    retryable = False


class RequestRejected(LLMError):
    """HTTP 4xx other than 429 (bad request, context too long, auth, unknown model)."""


class ContextTooLong(RequestRejected):
    """The request's prompt (with the completion it asks for) does not fit the model's context
    window, as the server or the local engine said."""


class MalformedResponse(LLMError):
    """The endpoint answered 200 with a body that is not a usable chat completion (broken JSON,
    no choices): retried like a server error, since the next answer is usually whole."""

    retryable = True
