"""The HTML report: leaderboard, embedded plot, escaped drill-down, no external resources."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from test_report_pictures import make_run as debate_run

from maslab.bench.evaluation import Score
from maslab.core.topology import Topology
from maslab.report import build_report
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace

USAGE = {"calls": 2, "prompt_tokens": 300, "completion_tokens": 50, "cached_prompt_tokens": 0}
# a mixed team: one call on each model
BY_MODEL = {
    "gpt-x": {"calls": 1, "prompt_tokens": 200, "completion_tokens": 30},
    "gpt-y": {"calls": 1, "prompt_tokens": 100, "completion_tokens": 20},
}


def make_run(directory: Path, method: str, outcomes: list[bool]) -> Path:
    store = RunStore(directory)
    store.open(Manifest(method=method, benchmark="gsm8k", model="gpt-x", evaluator="math"))
    for i, correct in enumerate(outcomes):
        score = Score(value=float(correct), correct=correct, extracted=str(i), explanation="")
        result = ResultRecord(
            task_id=f"t{i}", status="ok", answer=str(i), gold="1", score=score, usage=USAGE,
            usage_by_model=BY_MODEL,
        )  # fmt: skip
        messages = [
            {"sender": "a", "content": "<script>alert(1)</script>", "round": 0, "kind": "message"},
            {"sender": "b", "content": "I agree & so on", "round": 1, "recipients": ["c"]},
        ]
        calls = [
            {
                "sample_id": f"t{i}",
                "agent": "a",
                "round": 0,
                "model": "gpt-x",
                "prompt_tokens": 300,
                "completion_tokens": 50,
                "latency_s": 0.4,
                "cached": False,
                "error": None,
                "draw": 0,
                "messages": [{"role": "user", "content": "What is 1? <b>bold</b>"}],
                "response": "<script>1</script>",
            }
        ]
        trace = Trace.model_validate({
            "task_id": f"t{i}",
            "repeat": 0,
            "prompt": "What is 1?",
            "calls": calls,
            "messages": messages,
            "topology": Topology.complete(["a", "b", "c"]).to_dict() if i == 0 else None,
        })  # fmt: skip
        store.append(result, trace)
    store.close()
    return directory


def leaderboard_rows(page: str) -> list[str]:
    body = page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr>.*?</tr>", body)


def test_report_is_self_contained_and_escaped(tmp_path):
    run = make_run(tmp_path / "run", "debate", [True, True, False])
    prices = {"gpt-x": (1.0, 2.0), "gpt-y": (10.0, 20.0)}
    out = build_report([run], tmp_path / "out" / "report.html", prices=prices)
    assert out.exists()
    page = out.read_text()
    [row] = leaderboard_rows(page)
    assert "debate" in row and "66.7% [20.8, 93.9]" in row
    assert "$0.0017" in row  # each model at its own price: (200·1 + 30·2 + 100·10 + 20·20) / 1e6
    assert '<svg class="chart"' not in page  # one run: no plot (one point compares nothing)
    assert page.count("<svg") == 1 and page.count("<circle") == 3  # one topology, three agents
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "I agree &amp; so on" in page
    assert "<script" not in page.lower()
    assert not re.search(r"https?://", page)


def test_two_runs_are_sorted_by_accuracy(tmp_path):
    weak = make_run(tmp_path / "weak", "vanilla", [True, False, False, False])
    strong = make_run(tmp_path / "strong", "debate", [True, True, True, False])
    page = build_report([weak, strong], tmp_path / "report.html").read_text()
    rows = leaderboard_rows(page)
    assert len(rows) == 2
    assert "debate" in rows[0] and "75.0%" in rows[0]
    assert "vanilla" in rows[1] and "25.0%" in rows[1]
    assert page.count('<svg class="chart"') == 1  # two runs: the plot
    assert "—" in rows[0]  # no prices: no cost


def test_report_renders_empty_runs_and_runs_without_traces(tmp_path):
    empty = make_run(tmp_path / "empty", "empty", [])
    bare = make_run(tmp_path / "bare", "bare", [True, False])
    (bare / "traces.jsonl").unlink()
    page = build_report([empty, bare], tmp_path / "report.html", max_tasks=1).read_text()
    rows = leaderboard_rows(page)
    assert "bare" in rows[0] and "50.0%" in rows[0]
    assert "empty" in rows[1] and "—" in rows[1]
    assert "showing 1 of 2 tasks" in page
    assert page.count('<details class="sample') == 1


def test_the_report_parses_each_trace_once_for_its_figures_and_the_shown_ones_again(
    tmp_path, monkeypatch
):
    run = make_run(tmp_path / "run", "debate", [True, False, True, True, False])
    parsed: list[bytes] = []
    loads = orjson.loads

    def spy(data: bytes | str) -> object:
        parsed.append(data.encode() if isinstance(data, str) else bytes(data))
        return loads(data)

    validate = Trace.model_validate_json
    monkeypatch.setattr(Trace, "model_validate_json", lambda data: spy(data) and validate(data))
    page = build_report([run], tmp_path / "report.html", max_tasks=2).read_text()
    assert page.count("<code>t") == 2 and "showing 2 of 5 tasks" in page
    traces = [data for data in parsed if b'"prompt":"What is 1?"' in data]
    # the figures' pass, then the drill-down of the shown tasks only
    assert [orjson.loads(data)["task_id"] for data in traces] == [
        "t0",
        "t1",
        "t2",
        "t3",
        "t4",
        "t0",
        "t1",
    ]


@pytest.mark.system
def test_importing_the_report_draws_in_no_plotting_library():
    code = "import sys, maslab.report; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    assert result.stdout.strip() == b"False"


def _libraries_after_report(runs: list[Path], out: Path) -> list[str]:
    """Which of matplotlib and networkx a fresh interpreter holds after reporting ``runs``."""
    code = (
        "import sys\nfrom maslab.report import build_report\n"
        f"build_report({[str(run) for run in runs]!r}, {str(out)!r})\n"
        "print(*sorted({'matplotlib', 'networkx'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return result.stdout.split()


@pytest.mark.system
def test_a_one_run_report_with_a_topology_loads_no_plotting_library(tmp_path):
    run = make_run(tmp_path / "run", "debate", [True, False])
    libraries = _libraries_after_report([run], tmp_path / "report.html")
    assert "<svg" in (tmp_path / "report.html").read_text()
    assert libraries == ["networkx"]  # topologies are networkx graphs; no matplotlib


@pytest.mark.system
def test_a_debate_report_with_every_plot_loads_no_plotting_library(tmp_path):
    # rounds and repeats: the cost, pass@k and per-round plots, all three drawn
    runs = [
        debate_run(tmp_path / "two", config={"agents": 2, "rounds": 2}, repeats=3),
        debate_run(tmp_path / "three", config={"agents": 3, "rounds": 2}, repeats=2),
    ]
    libraries = _libraries_after_report(runs, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    labels = re.findall(r'<svg class="chart"[^>]* aria-label="([^"]*)"', page)
    assert [label.split(",")[0] for label in labels] == [
        "accuracy against tokens per sample",
        "pass@k against k",
        "llm_debate",
    ]
    assert "matplotlib" not in libraries


def test_a_report_that_fails_part_way_leaves_the_old_page(tmp_path, monkeypatch):
    run = make_run(tmp_path / "run", "debate", [True, False])
    out = build_report([run], tmp_path / "report.html")
    page = out.read_bytes()

    def broken(*args: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("maslab.report._record", broken)
    with pytest.raises(OSError):
        build_report([run], out)
    assert out.read_bytes() == page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "run"]


def test_the_run_section_gives_strict_accuracy_compliance_and_cut_replies(tmp_path):
    store = RunStore(tmp_path / "run")
    store.open(Manifest(method="cot", benchmark="gsm8k", model="gpt-x", evaluator="numeric"))
    # t0 right in the asked form; t1 right only by the flexible reading; t2 wrong, a reply cut
    for task, correct, strict, cut in (
        ("t0", True, "4", 0),
        ("t1", True, None, 0),
        ("t2", False, "5", 2),
    ):
        score = Score(value=float(correct), correct=correct, extracted="4" if correct else "5")
        score = score.with_strict(strict, strict == "4")
        store.append(
            ResultRecord(task_id=task, status="ok", answer="x", gold="4", score=score,
                         truncated_calls=cut),
            Trace(task_id=task, repeat=0),
        )  # fmt: skip
    store.close()
    page = build_report([store.dir], tmp_path / "report.html").read_text()
    about = page.split('<section id="run-0">', 1)[1].split("<br>", 1)[0]
    assert "strict 33.3% [" in about and "66.7% of samples in the instructed form" in about
    assert "0.67 replies cut at max_tokens per sample, in 1 of 3 samples (33.3%)" in about


def test_collapsed_samples_show_the_gold_answer_and_can_be_narrowed_to_the_wrong_ones(tmp_path):
    run = make_run(tmp_path / "run", "debate", [True, False, True])
    page = build_report([run], tmp_path / "report.html").read_text()
    summaries = re.findall(r"<details class=\"([^\"]*)\"[^>]*><summary>(.*?)</summary>", page)
    assert [(kind, re.sub(r"<[^>]+>", "", line)) for kind, line in summaries] == [
        ("sample correct", "✓ correct t0 repeat 0 → 0 · gold 1"),
        ("sample", "✗ wrong t1 repeat 0 → 1 · gold 1"),
        ("sample correct", "✓ correct t2 repeat 0 → 2 · gold 1"),
    ]
    box = '<input type="checkbox" class="wrong-only" id="run-0-wrong-only"> wrong only'
    assert box in page and "(not scored correct: 1)" in page
    # CSS alone: the checked box hides the section's correct samples
    assert "section:has(.wrong-only:checked) .sample.correct { display: none; }" in page
    assert "<script" not in page.lower()
