"""The collaboration-gap study: its grid with and without a partner model, end to end on two
scripted maze players (cells, tables, verdicts, the page), and the weighted outcome and gap it
rests on, computed on records scored by the collab_maze evaluator on a hand-made maze."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from maslab.benchmarks.collab_maze import CollabMaze, Maze
from maslab.cli import main
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.evaluators.collab_maze import CollabMazeEvaluator
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.store.records import ResultRecord
from maslab.studies.base import StudyOptions, get_study
from maslab.studies.catalogue.collaboration_gap import (
    K_VALUES,
    difference,
    gap,
    outcome,
    partner_of,
    task_outcomes,
    weighted_outcome,
)
from maslab.studies.running import collect

# --- the weighted outcome and the gap on known records ------------------------------------------

# start (0, 0), goal (2, 3); shortest route down, down, right, right, right: a = 5
GRID = ["@.#.", ".#..", "...*", "#.#."]


def hand_task(task_id: str) -> Task:
    maze = Maze.from_record({"grid": GRID, "start": [0, 0], "goal": [2, 3]})
    record = {"id": task_id, "grid": GRID, "maps": [maze.render(), maze.render()],
              "start": [0, 0], "goal": [2, 3]}  # fmt: skip
    return CollabMaze().to_task(record, 0, "test")


def scored(task_id: str, answer: str, repeat: int = 0) -> ResultRecord:
    """A record of ``answer`` on the hand maze, scored by the benchmark's own evaluator."""
    score = asyncio.run(CollabMazeEvaluator().score(hand_task(task_id), answer))
    return ResultRecord(task_id=task_id, repeat=repeat, status="ok", answer=answer, score=score)


GOAL = "Route: down, down, right, right, right"  # outcome 1
HALF = "Route: down, down"  # ends 3 from the goal: (5 - 3) / 5 = 0.4
AWAY = "Route: right"  # ends 6 from the goal: (5 - 6) / 5 = -0.2
STUCK = "Route: up"  # a wall at once: no progress, 0


def test_the_weighted_outcome_is_the_papers_unclamped():
    assert [weighted_outcome(scored("t", a)) for a in (GOAL, HALF, AWAY, STUCK)] == pytest.approx(
        [1.0, 0.4, -0.2, 0.0]
    )
    assert scored("t", AWAY).score.value == 0  # the evaluator's score is clamped; ours is not
    assert weighted_outcome(scored("t", "no idea")) == 0  # no route: no progress
    assert weighted_outcome(ResultRecord(task_id="t", status="error", error="boom")) == 0


def test_repeats_are_averaged_within_their_task():
    records = [scored("t1", GOAL), scored("t1", AWAY, 1), scored("t2", HALF)]
    assert task_outcomes(records) == pytest.approx({"t1": 0.4, "t2": 0.4})
    mean = outcome(records)
    assert mean is not None and mean.value == pytest.approx(0.4) and mean.n == 2


def test_the_gap_is_the_members_alone_minus_the_pair_paired_by_task():
    solo = [scored("t1", GOAL), scored("t2", HALF)]
    pair = [scored("t1", HALF), scored("t2", AWAY), scored("t3", GOAL)]  # t3: the pair's only
    same = gap([solo], pair)
    assert same is not None and same.n == 2
    assert (same.value, same.low, same.high) == pytest.approx((0.6, 0.6, 0.6))  # 0.6 on both

    other = [scored("t1", GOAL), scored("t2", STUCK)]
    mixed_pair = [scored("t1", HALF), scored("t2", HALF)]
    mixed = gap([solo, other], mixed_pair)  # t1: 1 − 0.4; t2: (0.4 + 0) / 2 − 0.4
    assert mixed is not None and mixed.value == pytest.approx((0.6 - 0.2) / 2)
    assert mixed.low <= mixed.value <= mixed.high and mixed.low < mixed.high
    better = gap([pair], solo)  # a pair above its member alone: a negative gap
    assert better is not None and better.value == pytest.approx(-0.6)

    swapped = difference(mixed_pair, solo)
    assert swapped is not None and swapped.value == pytest.approx((-0.6 + 0) / 2)
    assert gap([solo], [scored("t9", GOAL)]) is None  # no task in common


def test_the_partner_is_one_role_and_says_which_model_is_strong():
    assert partner_of(()) is None
    weak, strong = partner_of(["weak=p:x"]), partner_of(["strong=p:x", "strong.temperature=0"])
    assert weak is not None and weak.model_is_strong and weak.spec == "p:x"
    assert strong is not None and not strong.model_is_strong
    assert strong.entry == {"model": "p:x", "temperature": 0}
    assert partner_of(["agent_2=p:x"]).model_is_strong  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="judge is not one it takes"):
        partner_of(["judge=p:x"])
    with pytest.raises(ConfigError, match="one partner model"):
        partner_of(["weak=p:x", "strong=p:y"])


def test_the_grid_puts_the_partner_on_the_right_side():
    study = get_study("collaboration-gap")()
    alone = study.sweep(StudyOptions(models=("m:a",)), Path("out"))
    assert [m["label"] for m in alone["methods"]] == ["solo_full", "solo_distributed", "pair"]
    assert "model_roles" not in alone and alone["benchmarks"] == ["collab_maze"]

    sweep = study.sweep(StudyOptions(models=("m:a",), model_roles=("strong=m:s",)), Path("out"))
    by_label = {m["label"]: m for m in sweep["methods"]}
    assert len(by_label) == 3 + 5 + 2 * len(K_VALUES) and "model_roles" not in sweep
    strong = {"model": "m:s"}
    assert by_label["pair_strong_first"]["model_roles"] == {"agent_1": strong}
    assert by_label["pair_weak_first"]["model_roles"] == {"agent_2": strong}
    assert by_label["partner_solo_full"]["model_roles"] == {"agent": strong}
    assert by_label["relay_recovery_k6"] == {
        "name": "relay", "label": "relay_recovery_k6", "model_roles": {"strong": strong},
        "config": {"variant": "strong_recovery", "swap_after": 6},
    }  # fmt: skip
    weak = study.sweep(StudyOptions(models=("m:a",), model_roles=("weak=m:w",)), Path("out"))
    by_label = {m["label"]: m for m in weak["methods"]}
    assert by_label["pair_strong_first"]["model_roles"] == {"agent_2": {"model": "m:w"}}
    assert by_label["relay_primer_k2"]["model_roles"] == {"weak": {"model": "m:w"}}


# --- end to end on scripted players ---------------------------------------------------------

_PROPOSAL = re.compile(r"\[other agent\]:\s*MOVE:\s*(\w+)\s*$")


class Player:
    """A scripted maze player: agrees with the move the other agent just proposed, else
    proposes its own (alone, it answers that move as its route); it counts its calls."""

    def __init__(self, move: str) -> None:
        self.move, self.calls = move, 0

    def __call__(self, request: object) -> str:
        self.calls += 1
        last = last_user_message(request)  # type: ignore[arg-type]
        proposed = _PROPOSAL.search(last.split("\n\n[user]:")[0])
        return f"MOVE: {proposed[1] if proposed else self.move}"


@pytest.fixture
def players(monkeypatch, tmp_path) -> dict[str, Player]:
    """``maze:right`` and ``maze:down``, and a scratch cache."""
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    scripts = {"right": Player("right"), "down": Player("down")}
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("maze")(
        lambda name, settings: ScriptedModel(scripts[name], name=f"maze:{name}")
    )
    return scripts


def run_study(out: Path, *extra: str) -> int:
    return main(["study", "run", "collaboration-gap", "--model", "maze:right", "--limit", "2",
                 "--out", str(out), "--quiet", "--max-cells", "16", *extra])  # fmt: skip


def test_with_a_partner_every_cell_runs_and_every_table_reports(players, tmp_path, capsys):
    out = tmp_path / "study"
    assert run_study(out, "--model-role", "weak=maze:down") == 0
    printed = capsys.readouterr().out
    cells = 3 + 5 + 2 * len(K_VALUES)
    assert f"study collaboration-gap: {cells} of {cells} runs finished" in printed
    assert players["right"].calls > 0 and players["down"].calls > 0

    study, _, runs = collect(out)
    assert not runs.missing and len(runs.runs) == cells
    analysis = study.analyse(runs, study.paper_figures())
    tables = {t.title: t for t in analysis.tables}
    assert list(tables) == [
        "Alone and in pairs: maze:right", "Collaboration gap: maze:right",
        "Who speaks first: maze:right", "Relay inference: maze:right",
    ]  # fmt: skip
    alone = {row.label: row.cells for row in tables["Alone and in pairs: maze:right"].rows}
    assert list(alone) == [
        "maze:right solo-full", "maze:right solo-distributed", "maze:right with itself",
        "maze:down solo-full", "maze:down solo-distributed", "maze:down with itself",
        "maze:right + maze:down (maze:right first)", "maze:down + maze:right (maze:down first)",
    ]  # fmt: skip
    assert all(cell.ours is not None for cells_ in alone.values() for cell in cells_)
    assert alone["maze:right with itself"][0].paper == pytest.approx(0.39)  # gpt-4.1-mini
    assert alone["maze:right with itself"][0].verdict is not None

    gaps = {row.label: row.cells for row in tables["Collaboration gap: maze:right"].rows}
    assert len(gaps) == 4
    for label, row in gaps.items():
        assert all(cell.ours is not None for cell in row)
        assert all((cell.verdict is not None) == label.endswith("with itself") for cell in row)

    order = tables["Who speaks first: maze:right"].rows[0].cells
    assert order[2].ours is not None and order[2].paper == pytest.approx(0.15)
    assert order[2].verdict in ("sign holds", "sign reversed", "not detected")
    assert order[0].verdict is None  # not the paper's two models: set beside, not judged

    relay = {row.label: row.cells for row in tables["Relay inference: maze:right"].rows}
    assert len(relay) == 2 * len(K_VALUES)
    assert relay["strong primer, K=2"][1].verdict is not None
    assert (
        relay["strong recovery, K=2"][1].verdict is None and relay["strong recovery, K=8"][2].ours
    )

    page = (out / "study.html").read_text()
    assert "The Collaboration Gap on your model" in page and "Who speaks first" in page
    assert "Collaboration gap: maze:right: " in printed and "paper 15.0" in printed


def test_alone_the_study_runs_three_cells_and_says_how_to_add_a_partner(players, tmp_path, capsys):
    out = tmp_path / "alone"
    assert run_study(out) == 0
    printed = capsys.readouterr().out
    assert "study collaboration-gap: 3 of 3 runs finished" in printed
    assert players["down"].calls == 0
    assert "no partner model" in printed and "--model-role weak=SPEC" in printed
    assert "Who speaks first" not in printed and "Relay inference" not in printed
    assert re.search(r"maze:right with itself +vs solo-full .*· (sign|not detected)", printed)
    assert (out / "study.html").is_file()


def test_a_stronger_partner_takes_the_strong_side_and_a_reversed_order_is_noted(
    players, tmp_path, capsys
):
    out = tmp_path / "stronger"
    assert run_study(out, "--model-role", "strong=maze:down") == 0
    printed = capsys.readouterr().out
    study, _, runs = collect(out)
    relay = runs.get("collab_maze", "relay_primer_k2", "maze:right")
    assert relay is not None and relay.manifest.model_roles == {"strong": {"model": "maze:down"}}
    tables = {t.title: t for t in study.analyse(runs, study.paper_figures()).tables}
    assert tables["Who speaks first: maze:right"].rows[0].label == "maze:down + maze:right"
    assert "strong maze:down, weak maze:right" in tables["Relay inference: maze:right"].what
    # the scripted players make moving right worth more than moving down on these mazes
    solo = {r.label: r.cells[0].ours for r in tables["Alone and in pairs: maze:right"].rows}
    right, down = solo["maze:right solo-full"], solo["maze:down solo-full"]
    assert right is not None and down is not None and right.value > down.value
    assert "the study took maze:down as the strong model, but maze:right scores higher" in printed
