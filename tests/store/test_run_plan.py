"""A run directory's plan is the largest it ever held: a smaller request into it reports its own
samples without narrowing what the directory says it holds."""

from __future__ import annotations

from pathlib import Path

import orjson

import maslab
from maslab.analysis.run_result import load_run
from maslab.store.run_store import MANIFEST, Manifest

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cli"
GSM8K = FIXTURES / "gsm8k_small.jsonl"
MODEL = f"scripted:{FIXTURES / 'answers.yaml'}"
TASKS = [f"test-{i}" for i in range(5)]


def evaluate(out: Path, **options: object) -> maslab.RunResult:
    return maslab.evaluate(
        "vanilla", "gsm8k", MODEL, data=str(GSM8K), out=str(out), cache=False, progress=False,
        **options,
    )  # fmt: skip


def test_a_smaller_request_reports_its_samples_and_leaves_the_plan_whole(tmp_path):
    out = tmp_path / "run"
    assert len(evaluate(out, repeats=2).records) == 10

    part = evaluate(out, limit=2)
    assert sorted(r.key for r in part.records) == [("test-0", 0), ("test-1", 0)]
    assert part.planned == 2 and part.summary.design == "2 tasks × 1 repeat"
    manifest = orjson.loads((out / MANIFEST).read_bytes())
    assert (manifest["task_ids"], manifest["tasks"]) == (TASKS, 5)
    assert (manifest["repeats"], manifest["limit"]) == (2, None)
    whole = load_run(out)  # what `maslab show` reads
    assert whole.planned == 10 and len(whole.records) == 10
    assert whole.summary.design == "5 tasks × 2 repeats"


def test_the_plan_is_the_union_of_every_request():
    def manifest(ids: list[str] | None, repeats: int, limit: int | None) -> Manifest:
        return Manifest(
            method="vanilla", benchmark="gsm8k", model=MODEL, evaluator="numeric",
            task_ids=ids, tasks=len(ids or TASKS), repeats=repeats, limit=limit,
        )  # fmt: skip

    shuffled = manifest(["test-3", "test-1"], 1, 2).planning_too(manifest(TASKS[:2], 3, 2))
    assert shuffled.task_ids == ["test-0", "test-1", "test-3"] and shuffled.tasks == 3
    assert (shuffled.repeats, shuffled.limit) == (3, 2)
    older = manifest(TASKS[:2], 1, 2).planning_too(manifest(None, 1, None))  # no list: all
    assert (older.task_ids, older.tasks, older.limit) == (None, 5, None)
