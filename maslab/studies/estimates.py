"""Our figures with their 95% intervals, and the verdict of each against the paper's.

Accuracies come from a run's summary (an interval over tasks, repeats clustered within their
task). A mean over benchmarks (MASLab's Avg-V) treats the benchmarks as independent: its
interval is the normal one from each benchmark's half-width. A difference between two methods
on one benchmark is paired by task (:func:`maslab.analysis.stats.paired_comparison`).

A value's verdict says whether the paper's value lies inside our interval (``inside``) or which
side of it ours lies (``higher``, ``lower``); a difference's says whether the paper's sign holds
(our interval excludes zero on the paper's side), is reversed (it excludes zero on the other),
or was not detected (it holds zero).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from maslab.analysis.run_result import RunResult

Z95 = 1.959964
Verdict = Literal["inside", "higher", "lower", "sign holds", "sign reversed", "not detected"]


@dataclass(frozen=True)
class Estimate:
    """A figure of ours: ``value`` and its 95% interval [``low``, ``high``], over ``n`` tasks."""

    value: float
    low: float
    high: float
    n: int

    @classmethod
    def accuracy(cls, run: RunResult) -> Estimate:
        """The run's accuracy and its interval."""
        s = run.summary
        return cls(s.accuracy, s.ci[0], s.ci[1], len(s.per_task))

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def describe(self, percent: bool = True) -> str:
        """'54.0 [50.1, 57.9]' (percent points), or '0.54 [0.50, 0.58]'."""
        value, low, high = (figure(x, percent) for x in (self.value, self.low, self.high))
        return f"{value} [{low}, {high}]"


def figure(value: float, percent: bool) -> str:
    """A figure as the studies show it: percent points to one decimal, else three digits."""
    return f"{100 * value:.1f}" if percent else f"{value:.3g}"


def mean_of(estimates: Sequence[Estimate], bounds: tuple[float, float] = (0.0, 1.0)) -> Estimate:
    """The mean of independent estimates, its interval the normal one from their half-widths,
    kept within ``bounds`` (those of an accuracy; (-1, 1) for a difference of two)."""
    k = len(estimates)
    value = sum(e.value for e in estimates) / k
    half = Z95 * math.sqrt(sum((e.half_width / Z95) ** 2 for e in estimates)) / k
    low, high = max(bounds[0], value - half), min(bounds[1], value + half)
    return Estimate(value, low, high, sum(e.n for e in estimates))


def difference(a: RunResult, b: RunResult) -> Estimate:
    """``a`` − ``b`` on the tasks both ran, paired by task, with its interval."""
    from maslab.analysis.stats import paired_comparison

    paired = paired_comparison(b.records, a.records)  # its difference is the second − the first
    low, high = paired.ci
    return Estimate(paired.difference, low, high, paired.n)


def value_verdict(ours: Estimate, paper: float) -> Verdict:
    """Whether the paper's value lies inside our interval, or ours is higher or lower."""
    if ours.low <= paper <= ours.high:
        return "inside"
    return "higher" if ours.value > paper else "lower"


def sign_verdict(ours: Estimate, paper: float) -> Verdict:
    """Whether our difference has the paper's sign with an interval that excludes zero."""
    if ours.low <= 0 <= ours.high or paper == 0:
        return "not detected"
    return "sign holds" if (ours.value > 0) == (paper > 0) else "sign reversed"
