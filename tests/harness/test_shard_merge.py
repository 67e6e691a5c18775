"""``maslab run --shard i/N`` and ``maslab merge``: the shards of a run, merged, give the same
records and traces as the whole run."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from maslab.cli import main
from maslab.harness import shard
from maslab.harness.shard import shard_tasks
from maslab.store.records import ATTRIBUTIONS, AttributionRecord
from maslab.store.run_store import RunStore

# dylan draws its agents' order from ctx.rng, so its prompts show whether the draws match
RUN = ["run", "--method", "dylan", "--benchmark", "arith", "--limit", "7", "--repeats", "2",
       "--model", "scripted:echo", "--temperature", "0.7", "--no-cache", "--quiet"]  # fmt: skip
VOLATILE = {"elapsed_s", "latency_s", "started", "finished", "created"}


def run(out: Path, *extra: str) -> int:
    return main([*RUN, "--out", str(out), *extra])


def merge(out: Path, *shards: Path | str) -> int:
    return main(["merge", *map(str, shards), "--out", str(out)])


def steady(value: object) -> object:
    """``value`` without its timings."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def records(out: Path) -> dict[tuple[str, int], object]:
    return {r.key: steady(r.model_dump(mode="json")) for r in RunStore(out).results()}


def traces(out: Path) -> dict[tuple[str, int], object]:
    return {t.key: steady(t.line()) for t in RunStore(out).traces()}


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whole") / "run"
    assert run(out) == 0
    return out


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("shards")
    outs = [base / f"s{i}" for i in (1, 2, 3)]
    for i, out in enumerate(outs, 1):
        assert run(out, "--shard", f"{i}/3") == 0
    return outs


def test_tasks_are_dealt_round_robin() -> None:
    assert shard_tasks(list(range(7)), (1, 3)) == [0, 3, 6]
    assert shard_tasks(list(range(7)), (3, 3)) == [2, 5]


@pytest.mark.system
def test_a_shard_runs_its_tasks_only(whole: Path, shards: list[Path]) -> None:
    every = RunStore(whole).manifest().task_ids
    manifest = RunStore(shards[1]).manifest()
    assert manifest.shard == (2, 3) and manifest.task_ids == every[1::3]
    assert {key[0] for key in records(shards[1])} == set(every[1::3])


def test_merged_shards_equal_the_whole_run(whole: Path, shards: list[Path], tmp_path: Path):
    out = tmp_path / "merged"
    assert merge(out, *reversed(shards)) == 0
    assert "tasks" in (out / "report.html").read_text()  # the merged run's report, written
    assert records(out) == records(whole) and len(records(out)) == 14
    assert traces(out) == traces(whole)
    merged, original = RunStore(out).manifest(), RunStore(whole).manifest()
    assert merged.shard is None and merged.task_ids == original.task_ids
    assert merged.identity() == original.identity() and merged.tasks == 7
    assert main(["show", str(out)]) == 0
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0


def test_merging_again_into_the_same_directory_rewrites_it(shards: list[Path], tmp_path: Path):
    out = tmp_path / "merged"
    assert merge(out, *shards) == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    assert merge(out, *shards) == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == first


def test_a_resumed_shard_merges_to_the_same_records(
    whole: Path, shards: list[Path], tmp_path: Path
) -> None:
    killed = tmp_path / "s2"
    assert run(killed, "--shard", "2/3") == 0
    results = killed / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:2]) + lines[2][:10])  # killed mid-line
    assert run(killed, "--shard", "2/3") == 0
    out = tmp_path / "merged"
    assert merge(out, shards[0], killed, shards[2]) == 0
    assert records(out) == records(whole)
    assert traces(out) == traces(whole)


@pytest.mark.parametrize("value", ["0/3", "4/3", "2", "a/b", "1/0"])
def test_a_bad_shard_is_one_line(value: str, tmp_path: Path, capsys) -> None:
    assert run(tmp_path / "o", "--shard", value) == 2
    err = capsys.readouterr().err
    assert "--shard" in err and "1 <= i <= N" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_shards_of_different_runs_are_refused(shards: list[Path], tmp_path: Path, capsys):
    other = tmp_path / "other"
    assert run(other, "--shard", "2/3", "--seed", "5") == 0
    assert merge(tmp_path / "m", shards[0], other, shards[2]) == 2
    err = capsys.readouterr().err
    assert "not shards of one run (seed differ)" in err and err.count("\n") == 1
    assert traces(other) != traces(shards[1])  # the comparisons above can tell draws apart
    assert not (tmp_path / "m").exists()


def test_a_missing_shard_is_refused_unless_partial(
    whole: Path, shards: list[Path], tmp_path: Path, capsys
) -> None:
    assert merge(tmp_path / "m", shards[0], shards[2]) == 2
    assert "shard 2 of 3 missing" in capsys.readouterr().err
    assert main(["merge", str(shards[0]), str(shards[2]), "--out", str(tmp_path / "m"),
                 "--partial"]) == 0  # fmt: skip
    assert "partial: shard 2 missing" in capsys.readouterr().out
    expected = {k: v for k, v in records(whole).items() if k[0] not in shards_tasks(shards[1])}
    assert records(tmp_path / "m") == expected
    assert RunStore(tmp_path / "m").manifest().missing_shards == [2]


def shards_tasks(shard: Path) -> list[str]:
    return RunStore(shard).manifest().task_ids or []


def test_a_directory_that_is_not_a_merge_is_not_overwritten(
    whole: Path, shards: list[Path], capsys
) -> None:
    before = (whole / "results.jsonl").read_bytes()
    assert merge(whole, *shards) == 2
    assert "not empty" in capsys.readouterr().err
    assert (whole / "results.jsonl").read_bytes() == before


def test_a_whole_run_is_not_a_shard(whole: Path, shards: list[Path], tmp_path: Path, capsys):
    assert merge(tmp_path / "m", whole, *shards) == 2
    assert "is not a shard" in capsys.readouterr().err


def test_default_shard_directory_is_beside_the_whole_run() -> None:
    from maslab.api import run_config
    from maslab.harness.runner import Runner

    whole = Path(str(Runner(run_config("dylan", "arith", "scripted:echo")).config.out))
    shard = Path(str(Runner(run_config("dylan", "arith", "scripted:echo", shard="2/4")).config.out))
    assert shard == whole.with_name(f"{whole.name}-shard-2-of-4")


def test_a_merge_cut_short_leaves_no_run_that_reads_as_valid(
    shards: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge is built beside its place and moved there whole: cut short after the first
    shard, it leaves no directory (or the earlier merge, untouched), and no leftovers."""
    copied = 0

    def copy_then_die(*args: object) -> None:
        nonlocal copied
        copied += 1
        if copied > 3:  # the first shard's results, superseded records and traces
            raise OSError(28, "No space left on device")
        original(*args)

    original = shard._copy
    monkeypatch.setattr(shard, "_copy", copy_then_die)
    out = tmp_path / "merged"
    assert merge(out, *shards) == 1
    assert list(tmp_path.iterdir()) == []  # no run that shows a third of the tasks
    monkeypatch.setattr(shard, "_copy", original)
    assert merge(out, *shards) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    copied = 0
    monkeypatch.setattr(shard, "_copy", copy_then_die)
    assert merge(out, *shards) == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["merged"]


@pytest.fixture
def copies(shards: list[Path], tmp_path: Path) -> list[Path]:
    """The shards copied, for a test to score (the module's shards stay as they are)."""
    copied = [tmp_path / s.name for s in shards]
    for source, copy in zip(shards, copied, strict=True):
        shutil.copytree(source, copy)
    return copied


def test_scorings_and_attributions_made_in_shards_are_merged(
    copies: list[Path], tmp_path: Path, capsys
) -> None:
    for copy in copies:
        assert main(["score", str(copy), "--evaluator", "exact"]) == 0
    first = RunStore(copies[0]).results()[0]
    blamed = AttributionRecord(task_id=first.task_id, repeat=first.repeat, strategy="all_at_once",
                               judge="scripted:echo", agent="a", step=0, steps=3)  # fmt: skip
    (copies[0] / ATTRIBUTIONS).write_bytes(orjson.dumps(blamed.model_dump()) + b"\n")
    capsys.readouterr()

    out = tmp_path / "merged"
    assert merge(out, *copies) == 0
    merged = RunStore(out)
    assert {s.key for s in merged.scorings("exact")} == {
        s.key for copy in copies for s in RunStore(copy).scorings("exact")
    }
    assert len(merged.scorings("exact")) == len(merged.results()) == 14
    assert merged.attributions() == [blamed]
    assert main(["show", str(out), "--scoring", "exact"]) == 0
    assert "scoring exact: exact, not the run's numeric" in capsys.readouterr().out


def test_shards_scored_differently_under_one_label_are_refused(
    copies: list[Path], tmp_path: Path, capsys
) -> None:
    assert main(["score", str(copies[0]), "--evaluator", "exact", "--label", "x"]) == 0
    assert main(["score", str(copies[1]), "--evaluator", "numeric", "--label", "x"]) == 0
    capsys.readouterr()
    assert merge(tmp_path / "merged", *copies) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "scoring 'x' is exact with {} in " in err
    assert not (tmp_path / "merged").exists()
