"""``maslab plan-power``: tasks a paired comparison needs, from a baseline or a pilot run."""

from __future__ import annotations

import pytest
from helpers import coin_flip_solver

from maslab.analysis.power import Variance, tasks_needed
from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import Score
from maslab.cli import main
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel
from maslab.store.records import ResultRecord


def records(outcomes: dict[str, list[bool]]) -> list[ResultRecord]:
    return [
        ResultRecord(task_id=task, repeat=k, status="ok",
                     score=Score(value=float(right), correct=right, extracted="x"))
        for task, results in outcomes.items()
        for k, right in enumerate(results)
    ]  # fmt: skip


def test_without_a_pilot_repeats_count_as_much_as_tasks():
    variance = Variance.assumed(0.6, 0.05)
    one = tasks_needed(variance, 0.05, 1)
    assert one.tasks_shared == one.tasks_unrelated == 1472  # (1.96 + 0.84)² · 2 · p(1 − p) / D²
    assert tasks_needed(variance, 0.05, 2).tasks_shared == 736


def test_a_pilot_splits_what_repeats_can_shrink_from_what_they_cannot():
    hard_or_easy = Variance.of(records({"a": [True] * 4, "b": [True] * 4, "c": [False] * 4,
                                        "d": [False] * 4}))  # fmt: skip
    assert hard_or_easy.within == 0 and hard_or_easy.between == pytest.approx(1 / 3)
    many = tasks_needed(hard_or_easy, 0.1, 10)
    assert (
        many.tasks_shared == 1
        and many.tasks_unrelated == tasks_needed(hard_or_easy, 0.1, 1).tasks_unrelated
    )  # repeats do nothing for a split that lies between tasks
    coin_flips = Variance.of(records({t: [True, False] * 2 for t in "abcd"}))
    assert coin_flips.between == 0 and coin_flips.within == pytest.approx(0.25 * 4 / 3)
    assert tasks_needed(coin_flips, 0.1, 4).tasks_shared * 4 == pytest.approx(
        tasks_needed(coin_flips, 0.1, 1).tasks_shared, rel=0.01
    )


def test_a_pilot_needs_repeats_and_an_effect_needs_a_size():
    with pytest.raises(ValueError, match="two or more repeats"):
        Variance.of(records({"a": [True], "b": [False]}))
    with pytest.raises(ValueError, match="between 0 and 1"):
        tasks_needed(Variance.assumed(0.5, 0.1), 0.0, 1)


def test_plan_power_prints_the_tasks_for_each_repeat_count(tmp_path, capsys, monkeypatch):
    assert main(["plan-power", "--baseline", "0.6", "--effect", "0.05"]) == 0
    printed = capsys.readouterr().out
    assert "to detect a difference of +5.0% with power 80%" in printed
    assert [line.split() for line in printed.splitlines()[2:4]] == [["1", "1,472"], ["2", "736"]]

    run = tmp_path / "pilot"
    assert main(["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "4",
                 "--repeats", "2", "--model", "scripted:echo", "--out", str(run),
                 "--quiet", "--no-cache"]) in (0, 1)  # fmt: skip
    capsys.readouterr()
    assert main(["plan-power", "--pilot", str(run), "--effect", "0.1"]) == 2
    assert "its outcomes do not vary (accuracy 0%)" in capsys.readouterr().err  # echo: all wrong
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    solver = coin_flip_solver(get_benchmark("arith")().load(limit=8))
    register_provider("coin")(lambda name, settings: ScriptedModel(solver, name="coin:x"))
    noisy = tmp_path / "noisy"
    assert main(["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "8",
                 "--repeats", "3", "--model", "coin:x", "--out", str(noisy), "--quiet",
                 "--no-cache"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["plan-power", "--pilot", str(noisy), "--effect", "0.1", "--repeats", "3"]) == 0
    printed = capsys.readouterr().out
    assert f"the pilot {noisy} (8 tasks, accuracy " in printed
    assert "tasks if the methods find the same tasks hard" in printed
    [row] = [line.split() for line in printed.splitlines()[2:]]
    assert row[0] == "3" and int(row[1].replace(",", "")) <= int(row[2].replace(",", ""))

    assert main(["plan-power", "--effect", "0.1"]) == 2
    assert "give --baseline P" in capsys.readouterr().err
    assert main(["plan-power", "--baseline", "0.5", "--effect", "2"]) == 2
    assert "--effect 2.0: the effect is a difference in accuracy" in capsys.readouterr().err
