"""Two runs compared task by task, with the rules that make the comparison mean something: the
runs must have run on the same data (or the caller says to pair task ids anyway), and a
difference no larger than one run's repeat-to-repeat spread is called inside the noise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from maslab.analysis.stats import Paired, paired_comparison
from maslab.errors import ConfigError

if TYPE_CHECKING:
    from maslab.analysis.run_result import RunResult

SAME_DATA = ("benchmark", "split", "dataset_hash", "benchmark_options")
"""What must match for two runs' task ids to name the same questions."""


@dataclass(frozen=True)
class Comparison:
    """B against A: the paired figures, the data settings in which the runs differ (only
    when paired by id anyway) and the widest repeat-to-repeat spread of either run's
    single-repeat accuracy (None without repeats)."""

    paired: Paired
    data_differs: tuple[str, ...] = ()
    noise: float | None = None

    @property
    def inside_noise(self) -> bool:
        """Whether the difference is no larger than :attr:`noise`: one repeat could not tell
        it from chance."""
        return self.noise is not None and abs(self.paired.difference) <= self.noise

    @property
    def warning(self) -> str | None:
        """What to keep in mind when the runs were paired by task id on differing data."""
        if not self.data_differs:
            return None
        return f"paired by task id although {', '.join(self.data_differs)} differ"

    def describe(self) -> list[str]:
        """The figures in words, then the noise judgement where it applies."""
        p = self.paired
        lo, hi = p.ci
        test = "McNemar" if p.test == "mcnemar" else "paired permutation test"
        unpaired = f" ({p.only_a} tasks only in A, {p.only_b} only in B)"
        lines = [
            f"{p.n} paired tasks ({p.repeats_a} and {p.repeats_b} repeats): A {p.accuracy_a:.1%}, "
            f"B {p.accuracy_b:.1%}, B − A = {p.difference:+.1%} [{lo:+.1%}, {hi:+.1%}]; "
            f"A better on {p.a_only_correct} tasks, B better on {p.b_only_correct}; "
            f"{test} p = {p.p_value:.4g}" + (unpaired if p.only_a or p.only_b else "")
        ]
        if self.inside_noise:
            lines.append(
                f"the difference lies inside the run-to-run noise: single-repeat pass@1 varies "
                f"by up to {self.noise:.1%} between repeats of one run, so a comparison on one "
                "repeat could not tell a difference this large from chance"
            )
        return lines


def compare(a: RunResult, b: RunResult, *, pair_by_id: bool = False) -> Comparison:
    """B against A, paired by task. A one-line :class:`ConfigError` when the runs ran on
    different data (unless ``pair_by_id``), either has no results, or they share no task."""
    differ = tuple(k for k in SAME_DATA if getattr(a.manifest, k) != getattr(b.manifest, k))
    if differ and not pair_by_id:
        raise ConfigError(
            f"{a.dir} and {b.dir} ran on different data ({', '.join(differ)} differ), so a task "
            "id need not name the same question in both; pass --pair-by-id to pair them anyway"
        )
    for run in (a, b):
        if not run.records:
            raise ConfigError(f"{run.dir} has no results yet: nothing to compare")
    if not {r.task_id for r in a.records} & {r.task_id for r in b.records}:
        raise ConfigError(
            f"{a.dir} and {b.dir} share no task: the comparison pairs each task's results"
        )
    spreads = [run.summary.repeat_spread for run in (a, b)]
    noise = max((high - low for low, high, _ in filter(None, spreads)), default=None)
    return Comparison(paired_comparison(a.records, b.records), differ, noise)
