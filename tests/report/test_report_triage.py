"""The report's triage: each signal's count, the samples ranked as ``maslab triage`` ranks them
(a planted problem sample first), badges on the transcripts, and the signal filter."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from test_report_pictures import tbody, text

from maslab.analysis.triage import SIGNALS, signals
from maslab.bench.evaluation import Score
from maslab.report import build_report
from maslab.report.triage import TOP
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace

AGENTS = ("a", "b")


@dataclass(frozen=True)
class Sample:
    """One scripted debate: each round's replies (agents a, b; the last one is the answer),
    the tokens it used, and how many of its model calls failed."""

    rounds: tuple[tuple[str, str], ...] = (("It is 1.", "I get 1."), ("Still 1.", "Yes, 1."))
    tokens: int = 100
    failed: int = 0


FLIP = Sample((("It is 2.", "I get 1."), ("Now 1.", "Yes, 1.")))  # a flips 2 -> 1
PROBLEM = Sample((("It is 2.", "I get 1."), ("Now 3.", "Now 4.")), tokens=5000, failed=2)


def _key(reply: str) -> str | None:
    digits = re.findall(r"\d", reply)
    return digits[-1] if digits else None


def make_run(
    directory: Path, samples: list[Sample], *, stored: bool = True, answers: bool = True
) -> Path:
    """Sample i is task ``t{i}`` (gold "1"); its record holds its signals as a run stores them
    unless ``stored`` is False (a run from before they were), its trace the extracted answers
    unless ``answers`` is False."""
    store = RunStore(directory)
    store.open(Manifest(method="llm_debate", benchmark="arith", model="m", evaluator="numeric"))
    for i, sample in enumerate(samples):
        messages = [
            {"sender": agent, "content": reply, "round": r, "kind": "message"}
            for r, replies in enumerate(sample.rounds)
            for agent, reply in zip(AGENTS, replies, strict=True)
        ]
        calls = [{"agent": m["sender"], "round": m["round"], "error": None} for m in messages]
        calls += [{"agent": "a", "error": "timed out"}] * sample.failed
        trace: dict[str, Any] = {"task_id": f"t{i}", "repeat": 0, "messages": messages,
                                 "calls": calls}  # fmt: skip
        if answers:
            trace["answers"] = [_key(m["content"]) for m in messages]
        line = Trace.model_validate(trace)
        final = messages[-1]["content"]
        correct = _key(final) == "1"
        record = ResultRecord(
            task_id=f"t{i}", status="ok", answer=final, gold="1",
            score=Score(value=float(correct), correct=correct, extracted=_key(final)),
            usage={"calls": len(calls), "prompt_tokens": sample.tokens},
        )  # fmt: skip
        if stored:
            record = record.model_copy(update={"signals": signals(record, line)})
        store.append(record, line)
    store.close()
    return directory


def counts(page: str) -> dict[str, str]:
    return {row[0]: row[1] for row in tbody(page, "triage")}


def ranked(page: str) -> list[str]:
    """The 'Read first' list: each item's text."""
    items = page.split('<ol class="ranked">', 1)[1].split("</ol>", 1)[0]
    return [text(item) for item in re.findall(r"<li>(.*?)</li>", items)]


def shown(page: str) -> list[tuple[str, str]]:
    """Each transcript in the drill-down: its task id and the signals the filter reads."""
    return [
        (task, names)
        for names, task in re.findall(
            r'<details class="sample(?: correct)?"(?: data-signals="([^"]*)")?><summary>'
            r".*?<code>(.*?)</code>",
            page,
        )
    ]


def test_the_triage_counts_each_signal_and_ranks_a_planted_problem_sample_first(tmp_path):
    samples = [Sample()] * 10
    samples[2], samples[7] = FLIP, PROBLEM
    page = build_report([make_run(tmp_path / "run", samples)], tmp_path / "r.html").read_text()
    expected = dict.fromkeys(SIGNALS, "0")
    # t7: a flips 2 -> 3, b 1 -> 4, they end on 3 and 4; two failed calls; 50 times the tokens
    expected.update(final_disagreement="1", answer_flips="2", failed_calls="1", token_outlier="1")
    assert counts(page) == expected
    assert ranked(page) == [
        "✗ wrong t7 repeat 0 final_disagreement 1answer_flips 2failed_calls 2token_outlier 7.98",
        "✓ correct t2 repeat 0 answer_flips 1",  # each with its outcome
    ]
    assert "the 2 flagged samples, the most signals first" in text(page)
    assert shown(page)[:3] == [
        ("t7", "final_disagreement answer_flips failed_calls token_outlier"),
        ("t2", "answer_flips"),
        ("t0", ""),
    ]
    assert re.search(r'<a href="#run-0-sample-0"><code>t7</code>', page)
    badge = '<span class="signal" title="an agent changed its answer between rounds">'
    assert f"{badge}answer_flips 1</span></summary>" in page  # t2's transcript
    assert (
        page.index('id="run-0-sample-0"')
        > re.search('<details class="sample[^"]*" data-sig', page).start()
    )


def test_the_drill_down_shows_the_tasks_of_flagged_samples_first(tmp_path):
    samples = [Sample()] * 10
    samples[9] = PROBLEM
    run = make_run(tmp_path / "run", samples)
    page = build_report([run], tmp_path / "r.html", max_tasks=2).read_text()
    assert [task for task, _ in shown(page)] == ["t9", "t0"]
    assert "showing 2 of 10 tasks, those of flagged samples first" in page
    assert '<a href="#run-0-sample-0"><code>t9</code>' in page


def test_a_ranked_sample_that_is_not_shown_is_listed_without_a_link(tmp_path):
    samples = [FLIP] * (TOP + 2)
    page = build_report([make_run(tmp_path / "run", samples)], tmp_path / "r.html", max_tasks=3)
    html = page.read_text()
    assert f"the first {TOP} of the {TOP + 2} flagged samples" in html
    assert len(ranked(html)) == TOP
    assert (
        len(
            re.findall(r'<li><span class="tag \w+">[^<]*</span> <a href="#run-0-sample-\d+">', html)
        )
        == 3
    )


@pytest.mark.system
def test_the_filter_offers_the_signals_that_fired_on_the_shown_samples(tmp_path):
    samples = [Sample(), FLIP, Sample(), FLIP, PROBLEM]
    page = build_report([make_run(tmp_path / "run", samples)], tmp_path / "r.html").read_text()
    options = re.findall(r"<option[^>]*>(.*?)</option>", page.split('id="run-0-filter"', 1)[1])
    assert options == [
        "every sample shown (5)",
        "final_disagreement (1)",
        "answer_flips (3)",
        "failed_calls (1)",
        "token_outlier (1)",
    ]
    for name in SIGNALS:  # the filter is CSS: choosing a signal hides the samples without it
        assert (
            f'section:has(.filter option[value="{name}"]:checked) '
            f'.sample:not([data-signals~="{name}"]) {{ display: none; }}'
        ) in page
    assert "<script" not in page.lower()


@pytest.mark.system
def test_a_run_without_stored_signals_gets_them_from_its_traces(tmp_path):
    samples = [Sample(), FLIP, PROBLEM]
    stored = make_run(tmp_path / "stored", samples)
    old = make_run(tmp_path / "old", samples, stored=False)
    page = build_report([stored], tmp_path / "stored.html").read_text()
    again = build_report([old], tmp_path / "old.html").read_text()
    assert counts(again) == counts(page) and counts(page)["answer_flips"] == "2"
    assert ranked(again) == ranked(page) and shown(again) == shown(page)

    older = make_run(tmp_path / "older", samples, stored=False, answers=False)
    page = build_report([older], tmp_path / "older.html").read_text()
    found = counts(page)
    for name in ("final_disagreement", "answer_flips", "minority_consensus"):
        assert found[name] == "0 (not computable on 3)"
    assert found["failed_calls"] == "1" and found["token_outlier"] == "0"  # too few samples to tell


def test_a_run_where_no_signal_fired_says_so_and_offers_no_filter(tmp_path):
    page = build_report([make_run(tmp_path / "run", [Sample()] * 3)], tmp_path / "r.html")
    html = page.read_text()
    assert set(counts(html).values()) == {"0"}
    assert "no signal fired on any sample" in html
    assert "<select" not in html and "Read first" not in html
    assert '<p class="muted">in task order</p>' in html
    assert [task for task, _ in shown(html)] == ["t0", "t1", "t2"]


def test_a_stored_signal_this_maslab_does_not_know_is_shown_escaped(tmp_path):
    run = make_run(tmp_path / "run", [Sample()], stored=False)
    lines = (run / "results.jsonl").read_text().replace('"signals":{}', '"signals":{"<new>":1.0}')
    (run / "results.jsonl").write_text(lines)
    page = build_report([run], tmp_path / "r.html").read_text()
    assert '<span class="signal" title="&lt;new&gt;">&lt;new&gt; 1</span>' in page
    assert "<new>" not in page
