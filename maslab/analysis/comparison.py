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


def format_p_value(p: float) -> str:
    """A p-value as maslab prints it: ``p = 0.031``, or ``p < 0.001`` below that."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def run_name(run: RunResult) -> str:
    """A run as a comparison names it: method · model · its directory's name, then the scoring
    its records carry, if not the run's own (``maslab score``)."""
    scoring = f" · scoring {run.scoring}" if run.scoring else ""
    return f"{run.manifest.method} · {run.manifest.model} · {run.dir.name}{scoring}"


@dataclass(frozen=True)
class Comparison:
    """Run A against run B, in the order given: the paired figures (whose ``difference`` is
    B − A; :meth:`describe` prints A − B), the runs' names (:func:`run_name`), the data settings
    in which they differ (only when paired by id anyway) and the widest repeat-to-repeat spread
    of either run's single-repeat accuracy (None without repeats)."""

    paired: Paired
    names: tuple[str, str]
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
        """The runs named, the figures in words (A − B), then the noise judgement where it
        applies."""
        p = self.paired
        lo, hi = p.ci
        test = "McNemar" if p.test == "mcnemar" else "paired permutation test"
        unpaired = f" ({p.only_a} tasks only in A, {p.only_b} only in B)"
        lines = [
            f"A: {self.names[0]}",
            f"B: {self.names[1]}",
            f"{p.n} paired tasks ({p.repeats_a} and {p.repeats_b} repeats): A {p.accuracy_a:.1%}, "
            f"B {p.accuracy_b:.1%}, A − B = {_signed(-p.difference)} "
            f"[{_signed(-hi)}, {_signed(-lo)}]; "
            f"A better on {p.a_only_correct} tasks, B better on {p.b_only_correct}; "
            f"{test} {format_p_value(p.p_value)}" + (unpaired if p.only_a or p.only_b else ""),
        ]
        if self.inside_noise:
            lines.append(
                f"the difference lies inside the run-to-run noise: single-repeat pass@1 varies "
                f"by up to {self.noise:.1%} between repeats of one run, so a comparison on one "
                "repeat could not tell a difference this large from chance"
            )
        return lines


def _signed(share: float) -> str:
    """A signed percentage, ``+0.0%`` for either zero."""
    return f"{share + 0.0:+.1%}"


def compare(a: RunResult, b: RunResult, *, pair_by_id: bool = False) -> Comparison:
    """A against B, paired by task. A one-line :class:`ConfigError` when the runs ran on
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
    names = (run_name(a), run_name(b))
    return Comparison(paired_comparison(a.records, b.records), names, differ, noise)
