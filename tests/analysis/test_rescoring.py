"""Re-scoring a finished run (``maslab score``): a scripted run of arith, scored by ``numeric``,
scored again by ``exact`` and by an ``llm_judge`` whose judge is scripted; the scorings are kept
beside the run, whose files stay as they were, and a second invocation scores nothing again;
``show``, ``compare`` and ``load_run`` read a scoring instead of the run's own verdicts."""

from __future__ import annotations

import csv
import io
import re
from html import unescape

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from helpers import lines

import maslab
from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.errors import ConfigError, RequestRejected
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.store.records import MANIFEST, RESULTS, SCORINGS, TRACES
from maslab.store.run_store import RunStore
from maslab.viewer.app import make_app
from maslab.viewer.runs import Run

TASKS = get_benchmark("arith")().load(limit=4)
GOLD = {task.id: int(task.gold or 0) for task in TASKS}
ORIGINAL = ("manifest.json", RESULTS, TRACES)


def answer(request: ChatRequest) -> str:
    """Task 0 boxed right, task 1 right as 13.0 (numeric: right; exact: wrong), task 2 wrong;
    task 3 errors (a refused request: the sample has no answer)."""
    text = last_user_message(request)
    i = next(i for i, task in enumerate(TASKS) if task.question in text)
    gold = GOLD[TASKS[i].id]
    if i == 3:
        raise RequestRejected("refused", model="forms", status=400)
    return ["\\boxed{%d}", "\\boxed{%d.0}", "\\boxed{%d}"][i] % (gold + (i == 2))


class Judge:
    """A judge that extracts the boxed answer and compares it with the reference by value;
    ``failing`` names a candidate answer whose comparison it refuses once."""

    def __init__(self) -> None:
        self.failing: str | None = None

    def __call__(self, request: ChatRequest) -> str:
        prompt = last_user_message(request)
        if "What final answer does the response give?" in prompt:
            return re.search(r"\\boxed\{([^}]*)\}", prompt).group(1)
        gold = re.search(r"Reference answer: (.*)", prompt).group(1)
        candidate = re.search(r"Candidate answer: (.*)", prompt).group(1)
        if candidate == self.failing:
            self.failing = None
            raise RequestRejected("the judge is busy", model="judge", status=400)
        return "CORRECT" if float(candidate) == float(gold) else "INCORRECT"


@pytest.fixture
def judge(monkeypatch) -> Judge:
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("forms")(lambda name, settings: ScriptedModel(answer, name="forms"))
    scripted = Judge()
    register_provider("judge")(lambda name, settings: ScriptedModel(scripted, name="judge"))
    return scripted


def scripted_run(tmp_path, name: str = "run") -> maslab.RunResult:
    return maslab.evaluate("vanilla", "arith", "forms:x", limit=4, cache=False,
                           out=tmp_path / name, progress=False)  # fmt: skip


def files(run: maslab.RunResult) -> dict[str, bytes]:
    return {name: (run.dir / name).read_bytes() for name in ORIGINAL}


def verdicts(run: maslab.RunResult, label: str) -> dict[str, bool | None]:
    return {
        s.task_id: None if s.score is None else s.score.correct
        for s in RunStore(run.dir).scorings(label)
    }


def test_exact_scores_a_numeric_run_again_beside_its_scores(judge, tmp_path, capsys):
    run = scripted_run(tmp_path)
    assert [r.correct for r in run.records] == [True, True, False, False]
    assert run.records[3].status == "error" and run.manifest.evaluator == "numeric"
    before = files(run)

    assert main(["score", str(run.dir), "--evaluator", "exact"]) == 0
    out = capsys.readouterr().out
    assert "scoring exact (exact): 3 answered samples, 3 scored now; 1 errored, skipped " in out
    assert "accuracy: numeric 50.0% [" in out and ", exact 25.0% [" in out
    assert "1 of 3 verdicts changed" in out and "0 judge calls, 0 tokens" in out
    assert verdicts(run, "exact") == {t.id: i == 0 for i, t in enumerate(TASKS[:3])}
    [wrong] = [s for s in RunStore(run.dir).scorings("exact") if s.task_id == TASKS[1].id]
    assert wrong.score.extracted == f"{GOLD[TASKS[1].id]}.0" and wrong.evaluator == "exact"
    assert files(run) == before  # the run's own files, scores included, as they were

    assert main(["score", str(run.dir), "--evaluator", "exact"]) == 0  # nothing left to score
    assert "3 answered samples, 0 scored now" in capsys.readouterr().out
    assert len(lines(run.dir / SCORINGS)) == 3

    rescored = maslab.load_run(run.dir, scoring="exact")
    assert [r.correct for r in rescored.records] == [True, False, False, False]
    assert rescored.accuracy == 0.25 and rescored.records[3].status == "error"
    assert rescored.scoring == "exact" and "scoring exact" in repr(rescored)
    assert maslab.load_run(run.dir).accuracy == 0.5


def test_options_other_than_the_defaults_name_a_scoring_of_their_own(judge, tmp_path, capsys):
    run = scripted_run(tmp_path)
    score = ["score", str(run.dir), "--evaluator", "numeric"]
    assert main([*score, "--evaluator-option", "rel_tol=0.5"]) == 0
    [label] = {s.label for s in RunStore(run.dir).scorings()}
    assert re.fullmatch(r"numeric-[0-9a-f]{6}", label)
    assert verdicts(run, label) == {t.id: True for t in TASKS[:3]}  # 14 is within half of 13
    assert main([*score, "--label", label]) == 2  # the label holds other options
    assert "holds scores by numeric with {'rel_tol': 0.5}" in capsys.readouterr().err
    assert main([*score, "--label", "two words"]) == 2
    assert "give a name without spaces" in capsys.readouterr().err


def test_an_llm_judge_scores_again_its_calls_counted_as_scoring_spend(judge, tmp_path, capsys):
    run = scripted_run(tmp_path)
    before = files(run)
    judge.failing = str(GOLD[TASKS[2].id] + 1)  # the judge fails on task 2's answer, once
    score = ["score", str(run.dir), "--evaluator", "llm_judge", "--judge-model", "judge:x"]
    assert main([*score, "--label", "judged"]) == 0
    out = capsys.readouterr().out
    assert "2 scored now" not in out and "the evaluator failed on 1 (scored again next time)" in out
    first = {s.task_id: s for s in RunStore(run.dir).scorings("judged")}
    assert first[TASKS[2].id].score is None and "the judge is busy" in first[TASKS[2].id].error
    assert maslab.load_run(run.dir, "judged").records[2].status == "error"

    assert main([*score, "--label", "judged"]) == 0  # only the failed sample again
    assert "3 answered samples, 1 scored now" in capsys.readouterr().out
    scorings = {s.task_id: s for s in RunStore(run.dir).scorings("judged")}
    assert verdicts(run, "judged") == {t.id: i < 2 for i, t in enumerate(TASKS[:3])}
    for s in scorings.values():
        assert s.scoring_usage["calls"] == 2 and s.scoring_usage["prompt_tokens"] > 0
        assert s.evaluator_options == {"judge": "judge:x", "mode": "default"}
    assert files(run) == before

    rescored = maslab.load_run(run.dir, "judged")
    assert rescored.accuracy == 0.5 and rescored.records[0].scoring_usage["calls"] == 2
    assert main(["score", str(run.dir), "--evaluator", "exact", "--judge-model", "judge:x"]) == 2
    assert "only for an evaluator that asks a judge model" in capsys.readouterr().err


def test_show_and_compare_read_a_scoring(judge, tmp_path, capsys):
    a, b = scripted_run(tmp_path, "a"), scripted_run(tmp_path, "b")
    assert main(["score", str(a.dir), "--evaluator", "exact"]) == 0
    capsys.readouterr()

    assert main(["show", str(a.dir), "--scoring", "exact"]) == 0
    out = capsys.readouterr().out
    assert " 25.0% [" in out and "scoring exact: exact, not the run's numeric" in out
    row = next(line for line in out.splitlines() if line.startswith(TASKS[1].id))
    assert f"{GOLD[TASKS[1].id]}.0" in row and "✗" in row
    assert main(["show", str(a.dir), TASKS[1].id, "--scoring", "exact"]) == 0
    assert "wrong: extracted" in capsys.readouterr().out
    assert main(["show", str(a.dir), TASKS[1].id]) == 0
    assert "correct: extracted" in capsys.readouterr().out

    assert main(["compare", str(a.dir), str(b.dir), "--scoring", "exact"]) == 2  # b has none
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{b.dir} has no scoring 'exact' (none yet" in err
    assert main(["score", str(b.dir), "--evaluator", "exact"]) == 0
    capsys.readouterr()
    assert main(["compare", str(a.dir), str(b.dir), "--scoring", "exact"]) == 0
    out = capsys.readouterr().out
    assert "A: vanilla · forms:x · a · scoring exact" in out and "A 25.0%, B 25.0%" in out

    # a scoring cut short is refused until it is finished
    first = (a.dir / SCORINGS).read_bytes().splitlines(keepends=True)[0]
    (a.dir / SCORINGS).write_bytes(first)
    assert main(["show", str(a.dir), "--scoring", "exact"]) == 2
    assert "scoring 'exact' has not scored 2 of the run's answered samples" in (
        capsys.readouterr().err
    )


def test_a_run_being_written_is_not_scored(judge, tmp_path, capsys):
    run = scripted_run(tmp_path)
    writer = RunStore(run.dir)
    writer.open(writer.manifest())
    try:
        assert main(["score", str(run.dir), "--evaluator", "exact"]) == 2
        assert "being written by another maslab process" in capsys.readouterr().err
    finally:
        writer.close()
    assert not (run.dir / SCORINGS).exists()


def test_data_changed_since_the_run_is_refused(judge, tmp_path, capsys):
    run = scripted_run(tmp_path)
    manifest = orjson.loads((run.dir / MANIFEST).read_bytes())
    (run.dir / MANIFEST).write_bytes(orjson.dumps({**manifest, "dataset_hash": "0123abcd"}))
    assert main(["score", str(run.dir), "--evaluator", "exact"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the data of arith test changed since the run" in err
    assert not (run.dir / SCORINGS).exists()


def test_report_frames_export_and_the_viewer_read_a_scoring(judge, tmp_path, capsys):
    run = scripted_run(tmp_path)
    assert main(["score", str(run.dir), "--evaluator", "exact"]) == 0
    capsys.readouterr()

    assert main(["show", str(run.dir)]) == 0  # the run's own verdicts, its scorings summed up
    out = capsys.readouterr().out
    assert "scoring exact (exact): 25.0% [" in out and "1 of 3 verdicts changed" in out

    own = tmp_path / "own.html"
    assert main(["report", str(run.dir), "-o", str(own)]) == 0
    html = unescape(own.read_text())
    assert "scoring exact (exact): 25.0% [" in html and "evaluator numeric" in html
    assert "<dt>Scorings</dt><dd>exact: wrong</dd>" in html  # task 1: 13.0, right by value
    rescored = tmp_path / "rescored.html"
    assert main(["report", str(run.dir), "--scoring", "exact", "-o", str(rescored)]) == 0
    html = unescape(rescored.read_text())
    assert "the verdicts of scoring exact" in html
    assert "scoring exact: exact, not the run's numeric" in html and "accuracy 25.0% [" in html
    capsys.readouterr()
    assert main(["report", str(run.dir), "--scoring", "judged", "-o", str(rescored)]) == 2
    assert "has no scoring 'judged' (its scorings: exact)" in capsys.readouterr().err

    frames = maslab.load_runs([run.dir], scoring="exact")
    assert frames.runs_df()["accuracy"].tolist() == [0.25]
    samples = frames.samples_df()
    assert samples["score_correct"].tolist() == [True, False, False, None]
    assert set(samples["scoring"]) == {"exact"}
    assert set(maslab.load_runs([run.dir]).samples_df()["scoring"].isna()) == {True}

    assert main(["export", str(run.dir), "--scoring", "exact", "-o", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["correct"] for row in rows] == ["True", "False", "False", "False"]
    assert {row["scoring"] for row in rows} == {"exact"}


@pytest.fixture
def scored(judge, tmp_path) -> maslab.RunResult:
    """The scripted run, scored again by ``exact``."""
    run = scripted_run(tmp_path)
    assert main(["score", str(run.dir), "--evaluator", "exact"]) == 0
    return run


async def test_the_viewer_shows_a_scorings_verdicts(scored):
    run = scored
    with pytest.raises(ConfigError, match="has no scoring 'judged'"):
        Run.open(0, run.dir, "judged")
    runs = [Run.open(0, run.dir, "exact")]
    async with TestClient(TestServer(make_app(runs))) as client:
        index = unescape(await (await client.get("/")).text())
        task = TASKS[1].id
        sample = unescape(await (await client.get(f"/sample?run=0&task={task}&repeat=0")).text())
    assert "the verdicts of scoring exact" in index and "25.0% [" in index
    assert '<span class="tag wrong">wrong</span>' in sample
    assert "<dt>Scorings</dt><dd>exact: wrong</dd>" in sample


def test_a_judge_on_another_port_of_this_machine_is_the_same_label():
    from maslab.analysis.rescoring import default_label
    from maslab.bench.evaluation import get_evaluator

    judge = get_evaluator("llm_judge")
    here, restarted = (
        judge(judge=f"openai:j@http://{at}/v1") for at in ("127.0.0.1:8001", "localhost:9000")
    )
    elsewhere = judge(judge="openai:j@http://gpu1:8001/v1")
    assert default_label(here) == default_label(restarted) != default_label(elsewhere)
