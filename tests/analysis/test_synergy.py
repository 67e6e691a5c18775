"""The synergy arithmetic of maslab.analysis.synergy, exact: plain mappings, run records,
repeats."""

from __future__ import annotations

from fractions import Fraction

import pytest

from maslab.analysis.synergy import Synergy, condition_gaps, relative_gap, synergy, task_scores
from maslab.bench.evaluation import Score
from maslab.errors import ConfigError
from maslab.store.run_store import ResultRecord


def record(task: str, correct: bool | None, repeat: int = 0) -> ResultRecord:
    """A finished sample (``correct=None``: one that errored)."""
    if correct is None:
        return ResultRecord(task_id=task, repeat=repeat, status="error", error="boom")
    score = Score(value=float(correct), correct=correct, extracted="x")
    return ResultRecord(task_id=task, repeat=repeat, status="ok", answer="x", score=score)


def test_task_scores_average_repeats_first_and_count_errors_as_wrong():
    records = [record("a", True), record("a", False, 1), record("a", True, 2),
               record("b", None), record("b", True, 1)]  # fmt: skip
    assert task_scores(records) == {"a": Fraction(2, 3), "b": Fraction(1, 2)}
    assert task_scores({"a": [True, False, True], "b": True, "c": False}) == {
        "a": Fraction(2, 3), "b": Fraction(1), "c": Fraction(0)
    }  # fmt: skip
    with pytest.raises(ConfigError, match="task 'a' has no outcome"):
        task_scores({"a": []})


def test_the_team_against_its_members_exactly():
    # four tasks; each member alone; the oracle solves a task when any member does
    members = {
        "m1": {"t1": True, "t2": False, "t3": False, "t4": False},
        "m2": {"t1": True, "t2": True, "t3": False, "t4": False},
        "m3": {"t1": False, "t2": False, "t3": True, "t4": False},
    }
    team = {"t1": True, "t2": False, "t3": True, "t4": False}
    result = synergy(team, members)
    assert result.team == Fraction(1, 2) and result.tasks == 4
    assert result.members == {"m1": Fraction(1, 4), "m2": Fraction(1, 2), "m3": Fraction(1, 4)}
    assert (result.best_member, result.best) == ("m2", Fraction(1, 2))
    assert result.average == Fraction(1, 3)
    assert result.oracle == Fraction(3, 4)
    assert result.strong_synergy and result.weak_synergy  # team = best member
    assert result.relative_gap == 0
    assert result.oracle_gap == Fraction(1, 3)  # (3/4 - 1/2) / (3/4)
    worse = synergy({**team, "t3": False}, members)
    assert worse.team == Fraction(1, 4)
    assert not worse.strong_synergy and not worse.weak_synergy  # 1/4 < 1/3
    assert worse.relative_gap == Fraction(1, 2) and worse.oracle_gap == Fraction(2, 3)


def test_repeats_are_averaged_per_task_before_the_oracle_and_the_means():
    team = [record("a", True), record("a", False, 1), record("b", True), record("b", True, 1)]
    members = {
        "x": [record("a", True), record("a", True, 1), record("b", False), record("b", False, 1)],
        "y": [record("a", False), record("a", True, 1), record("b", True), record("b", False, 1)],
    }
    result = synergy(team, members)
    assert result.team == Fraction(3, 4)  # (1/2 + 1) / 2
    assert result.members == {"x": Fraction(1, 2), "y": Fraction(1, 2)}
    assert result.best_member == "x"  # the first among equals
    assert result.oracle == Fraction(3, 4)  # per task the best member's rate: (1 + 1/2) / 2
    assert result.strong_synergy and result.relative_gap == Fraction(-1, 2)


def test_a_best_member_at_zero_has_no_relative_gap_unless_the_team_is_at_zero_too():
    nobody = {"m1": {"a": False}, "m2": {"a": False}}
    assert synergy({"a": False}, nobody).relative_gap == 0
    assert synergy({"a": True}, nobody).relative_gap is None
    assert synergy({"a": True}, nobody).oracle_gap is None
    assert relative_gap(Fraction(0), Fraction(0)) == 0
    assert relative_gap(Fraction(2, 5), Fraction(1, 5)) == Fraction(1, 2)
    assert Synergy(Fraction(1), {"m": Fraction(1)}, Fraction(1), 1).relative_gap == 0


def test_runs_over_different_tasks_or_without_members_are_refused():
    with pytest.raises(ConfigError, match=r"'m1' and 'team' cover different tasks .* 'b'"):
        synergy({"a": True}, {"m1": {"a": True, "b": False}})
    with pytest.raises(ConfigError, match="at least one member"):
        synergy({"a": True}, {})
    with pytest.raises(ConfigError, match="'team' names the team's run"):
        synergy({"a": True}, {"team": {"a": True}})
    with pytest.raises(ConfigError, match="'reveal_expert' and 'expert_not_mentioned'"):
        condition_gaps({"a": True}, {"b": True}, {"a": True})


def test_condition_gaps_are_positive_when_accuracy_is_lost():
    enm = {"a": False, "b": False, "c": False}
    revealed = {"a": True, "b": False, "c": True}
    alone = {"a": True, "b": True, "c": True}
    gaps = condition_gaps(enm, revealed, alone)
    assert (gaps.expert_not_mentioned, gaps.reveal_expert, gaps.best_individual) == (
        Fraction(0), Fraction(2, 3), Fraction(1)
    )  # fmt: skip
    assert gaps.identification_gap == Fraction(2, 3)  # f(RE) - f(ENM)
    assert gaps.leveraging_gap == Fraction(1, 3)  # f(BI) - f(RE)
    helped = condition_gaps(revealed, enm, {"a": False, "b": False, "c": True})
    assert helped.identification_gap == Fraction(-2, 3)  # revealing the expert cost accuracy
    assert helped.leveraging_gap == Fraction(1, 3)
