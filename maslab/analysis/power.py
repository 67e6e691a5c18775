"""How many tasks and repeats a claimed difference between two methods needs (``maslab
plan-power``), from a baseline accuracy or from a pilot run's variance.

A task's outcome varies for two reasons: tasks differ in difficulty (between tasks, σ²_b, the
variance of the tasks' success rates) and a task's attempts differ (within a task, σ²_w, the
mean of p_t (1 − p_t)). Repeats shrink only the second. Two methods compared on the same
tasks (paired by task) see a per-task difference whose variance is

    V(K) = 2 c σ²_b + 2 σ²_w / K

with K repeats, where c = 0 when the two methods find the same tasks hard (the difficulty
cancels in the pair: the optimistic bound) and c = 1 when their difficulties are unrelated
(the pessimistic bound). The tasks needed to detect a difference D with a two-sided test at
level α and power 1 − β are T = ⌈(z_{1−α/2} + z_{1−β})² V(K) / D²⌉ (normal approximation).

Without a pilot, every task is taken to have the baseline's success rate (σ²_b = 0,
σ²_w = p (1 − p) at the mean of the two methods' rates): repeats then count as much as tasks.
A pilot run with two or more repeats splits the variance as the data do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from maslab.analysis.stats import outcomes_by_task
from maslab.store.records import ResultRecord


@dataclass(frozen=True)
class Variance:
    """A method's outcome variance split between tasks (``between``) and within a task
    (``within``), with the ``accuracy`` it was measured at and the ``tasks`` it came from (0:
    assumed, not measured)."""

    accuracy: float
    between: float
    within: float
    tasks: int = 0

    @classmethod
    def assumed(cls, baseline: float, effect: float) -> Variance:
        """No pilot: one difficulty for every task, at the mean of the two methods' rates."""
        p = min(max(baseline + effect / 2, 0.0), 1.0)
        return cls(baseline, 0.0, p * (1 - p))

    @classmethod
    def of(cls, records: Sequence[ResultRecord]) -> Variance:
        """Measured on a pilot run's records (errors count as failures, as the accuracy
        does); a ValueError unless some task has two or more attempts."""
        by_task = outcomes_by_task(records)
        if not by_task or max(map(len, by_task.values())) < 2:
            raise ValueError("a pilot needs two or more repeats of its tasks to split the variance")
        rates = [sum(v) / len(v) for v in by_task.values()]
        mean = sum(rates) / len(rates)
        between = sum((r - mean) ** 2 for r in rates) / max(len(rates) - 1, 1)
        # p(1-p) of a task is biased low by its own sampling: correct by k/(k-1) per task
        within = sum(
            r * (1 - r) * len(v) / (len(v) - 1) if len(v) > 1 else r * (1 - r)
            for r, v in zip(rates, by_task.values(), strict=True)
        ) / len(rates)
        # the between-task variance of the observed rates includes within-task noise
        attempts = sum(map(len, by_task.values())) / len(by_task)
        between = max(0.0, between - within / attempts)
        if between == within == 0:
            raise ValueError(
                f"its outcomes do not vary (accuracy {mean:.0%}): it cannot say how they vary; "
                "plan from --baseline instead"
            )
        return cls(mean, between, within, len(rates))


@dataclass(frozen=True)
class Requirement:
    """Tasks needed at ``repeats`` repeats for the two bounds of the pairing."""

    repeats: int
    tasks_shared: int
    """If both methods find the same tasks hard (the difficulty cancels)."""
    tasks_unrelated: int
    """If their difficulties are unrelated."""


def tasks_needed(
    variance: Variance, effect: float, repeats: int, *, alpha: float = 0.05, power: float = 0.8
) -> Requirement:
    """The tasks a paired comparison needs to detect ``effect`` (a difference in accuracy)."""
    if not 0 < abs(effect) <= 1:
        raise ValueError("the effect is a difference in accuracy: between 0 and 1 in size")
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)

    def tasks(shared: float) -> int:
        v = 2 * shared * variance.between + 2 * variance.within / repeats
        return max(1, math.ceil(z * z * v / effect**2))

    return Requirement(repeats, tasks(0.0), tasks(1.0))
