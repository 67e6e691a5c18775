"""Synergy of a team against its members, and what knowing the expert is worth (exact).

After Pappu et al., "Multi-Agent Teams Hold Experts Back" (arXiv:2602.01011). The metric f is
accuracy: a task's score is the mean correctness of its repeats (a sample that errored counts
as wrong, as in the run summary), and f of a run is the mean of its task scores. Every figure
is a :class:`~fractions.Fraction`, so the arithmetic is exact.

Each argument that stands for a run may be a :class:`~maslab.analysis.run_result.RunResult`
(``maslab.load_run(dir)``, ``maslab.evaluate(...)``), its ``records``, or a plain mapping
``task id -> correct`` whose value is a bool or a list of bools (one per repeat). All runs
compared must cover the same tasks.

- :func:`synergy`: the team against each member's individual run: best and average member,
  at-least-one-correct oracle, strong and weak synergy, relative synergy gaps.
- :func:`condition_gaps`: the expert-not-mentioned team, the reveal-expert team and the expert
  alone: identification and leveraging gaps.

Gaps are oriented so that a positive gap is accuracy lost. The paper writes the identification
gap as f(ENM) − f(RE) and the leveraging gap as f(RE) − f(BI) with error metrics (lower is
better) in mind; for accuracy they are f(RE) − f(ENM) and f(BI) − f(RE).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from maslab.analysis.run_result import RunResult
from maslab.analysis.stats import outcomes_by_task
from maslab.errors import ConfigError
from maslab.store.run_store import ResultRecord

Outcomes = RunResult | Iterable[ResultRecord] | Mapping[str, bool | Sequence[bool]]
"""A run's per-task correctness: a run, its records, or ``task id -> bool or list of bools``."""


def task_scores(outcomes: Outcomes) -> dict[str, Fraction]:
    """task id -> the mean correctness of its repeats (see :data:`Outcomes`)."""
    if isinstance(outcomes, RunResult):
        outcomes = outcomes.records
    if isinstance(outcomes, Mapping):
        by_task = {
            task: list(value) if isinstance(value, Sequence) else [value]
            for task, value in outcomes.items()
        }
    else:
        by_task = outcomes_by_task(outcomes)
    if empty := [task for task, values in by_task.items() if not values]:
        raise ConfigError(f"task {empty[0]!r} has no outcome")
    return {task: Fraction(sum(values), len(values)) for task, values in by_task.items()}


def accuracy(scores: Mapping[str, Fraction]) -> Fraction:
    """The mean of the task scores; 0 without tasks."""
    return Fraction(sum(scores.values()), len(scores)) if scores else Fraction(0)


def _same_tasks(runs: Mapping[str, Outcomes]) -> dict[str, dict[str, Fraction]]:
    """Every run's task scores, checked to cover one set of tasks."""
    scores = {name: task_scores(run) for name, run in runs.items()}
    (first, tasks), *rest = ((name, set(s)) for name, s in scores.items())
    for name, other in rest:
        if other != tasks:
            odd = sorted(tasks ^ other)
            raise ConfigError(
                f"'{name}' and '{first}' cover different tasks ({len(odd)} in one only, e.g. "
                f"{odd[0]!r}); compare runs over the same tasks"
            )
    return scores


def relative_gap(reference: Fraction, team: Fraction) -> Fraction | None:
    """(reference − team) / reference; 0 when both are 0, None when only the reference is."""
    if reference == 0:
        return Fraction(0) if team == 0 else None
    return (reference - team) / reference


@dataclass(frozen=True)
class Synergy:
    """A team's accuracy against its members' individual accuracies (all exact)."""

    team: Fraction
    members: dict[str, Fraction]
    oracle: Fraction
    """At least one member correct: the mean over tasks of the best member's task score (on
    single runs, the share of tasks some member solved)."""
    tasks: int

    @property
    def best_member(self) -> str:
        """The member with the highest accuracy (the first listed among equals)."""
        return max(self.members, key=self.members.__getitem__)

    @property
    def best(self) -> Fraction:
        return self.members[self.best_member]

    @property
    def average(self) -> Fraction:
        return Fraction(sum(self.members.values()), len(self.members))

    @property
    def strong_synergy(self) -> bool:
        """The team does at least as well as its best member."""
        return self.team >= self.best

    @property
    def weak_synergy(self) -> bool:
        """The team does at least as well as its average member."""
        return self.team >= self.average

    @property
    def relative_gap(self) -> Fraction | None:
        """(best − team) / best: the share of the best member's accuracy the team loses."""
        return relative_gap(self.best, self.team)

    @property
    def oracle_gap(self) -> Fraction | None:
        """(oracle − team) / oracle: the same against the at-least-one-correct oracle."""
        return relative_gap(self.oracle, self.team)


def synergy(team: Outcomes, members: Mapping[str, Outcomes]) -> Synergy:
    """The team's run against each member's individual run (``{"member_1": run, ...}``)."""
    if not members:
        raise ConfigError("synergy needs at least one member's individual run")
    if "team" in members:
        raise ConfigError("'team' names the team's run; name the members otherwise")
    scores = _same_tasks({"team": team, **members})
    team_scores = scores.pop("team")
    oracle = {task: max(s[task] for s in scores.values()) for task in team_scores}
    return Synergy(
        team=accuracy(team_scores),
        members={name: accuracy(s) for name, s in scores.items()},
        oracle=accuracy(oracle),
        tasks=len(team_scores),
    )


@dataclass(frozen=True)
class ConditionGaps:
    """Accuracy under Expert Not Mentioned, Reveal Expert and Best Individual; positive gaps
    are accuracy lost."""

    expert_not_mentioned: Fraction
    reveal_expert: Fraction
    best_individual: Fraction

    @property
    def identification_gap(self) -> Fraction:
        """f(RE) − f(ENM): lost because the team does not know who its expert is."""
        return self.reveal_expert - self.expert_not_mentioned

    @property
    def leveraging_gap(self) -> Fraction:
        """f(BI) − f(RE): lost although the team knows who its expert is."""
        return self.best_individual - self.reveal_expert


def condition_gaps(
    expert_not_mentioned: Outcomes, reveal_expert: Outcomes, best_individual: Outcomes
) -> ConditionGaps:
    """The identification and leveraging gaps of three runs over the same tasks."""
    scores = _same_tasks(
        {
            "expert_not_mentioned": expert_not_mentioned,
            "reveal_expert": reveal_expert,
            "best_individual": best_individual,
        }
    )
    return ConditionGaps(**{name: accuracy(s) for name, s in scores.items()})
