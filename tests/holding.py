"""A fake server's latency that answers some requests and holds the rest (not tests).

A test that stops a run midway (SIGKILL, Ctrl-C) once it has saved some samples used to rely on
a latency of a fraction of a second per call to keep the run from finishing first; on a busy
machine the stop can come later than that. With :class:`AnswerThenHold` the run gets no further
than the answers the test allows while the stop is on its way.

Ctrl-C lets the calls in flight finish, to record them: where a test sends it, a held call must
end by itself (``hold_s`` of a few seconds), or the run would wait for it.
"""

from __future__ import annotations

import itertools
import signal

HOLD_S = 3600.0  # a held request waits this long, or until the server stops (which wakes it)


class AnswerThenHold:
    """A :class:`~maslab.testing.FakeOpenAIServer` ``latency``: the first ``answered`` requests
    wait ``latency`` seconds, later ones are held ``hold_s`` until :meth:`release`."""

    def __init__(self, answered: int, latency: float = 0.05, hold_s: float = HOLD_S) -> None:
        self.answered = answered
        self.latency = latency
        self.hold_s = hold_s
        self.holding = True
        self._arrivals = itertools.count(1)  # called on the server's thread, one at a time

    def __call__(self) -> float:
        if next(self._arrivals) <= self.answered or not self.holding:
            return self.latency
        return self.hold_s

    def release(self) -> None:
        """Answer every later request after ``latency`` (the held ones wait for the stop)."""
        self.holding = False


def interruptible() -> None:
    """Give a child process Ctrl-C back (its ``preexec_fn``): a test suite started in the
    background (``cmd &``) hands its children SIGINT ignored, and a Python that starts with it
    ignored never raises KeyboardInterrupt, whatever maslab does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
