"""``maslab show``'s results: one whole line per sample, aligned, whatever the terminal."""

from __future__ import annotations

import io

from rich.console import Console

from maslab.bench.evaluation import Score
from maslab.report.show import show_run, show_task
from maslab.store.records import TraceTool
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace


def _run(tmp_path, task_ids: list[str]) -> RunStore:
    store = RunStore(tmp_path / "run")
    manifest = Manifest(method="vanilla", benchmark="arith", model="scripted:echo",
                        evaluator="numeric", task_ids=task_ids)  # fmt: skip
    store.open(manifest)
    for i, task in enumerate(task_ids):
        score = Score(value=float(i % 2), correct=bool(i % 2), extracted=f"{i}\nmore")
        record = ResultRecord(task_id=task, status="ok", answer=str(i), gold=f"{i}\n(two lines)",
                              score=score, usage={"calls": 1, "prompt_tokens": 1200})  # fmt: skip
        store.append(record, Trace(task_id=task, repeat=0, messages=[], calls=[]))
    store.close()
    return store


def test_each_sample_is_one_whole_aligned_line(tmp_path):
    long_id = "a-task-id-much-longer-than-the-terminal-is-wide-" * 2
    store = _run(tmp_path, ["t1", long_id, "t3"])
    out = io.StringIO()
    show_run(store, Console(file=out, width=60))
    lines = out.getvalue().splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["task", "rep"])
    rows = lines[header + 1 :]
    assert len(rows) == 3  # no folded cells, and the two-line golds stay on one line each
    assert any(row.startswith(long_id) for row in rows)
    first = next(row for row in rows if row.startswith("t1 "))
    assert "0 more" in first and "0 (two lines)" in first and "✗" in first
    tokens = lines[header].index("tokens")
    assert {row[tokens : tokens + 6].strip() for row in rows} == {"1,200"}  # columns line up


def test_a_transcript_lists_the_tool_calls_and_the_first_failing_turn(tmp_path):
    store = RunStore(tmp_path / "run")
    store.open(Manifest(method="tool_agent", benchmark="toy", model="m", evaluator="bfcl_state"))
    difference = {"class": "Shelf", "attribute": "items", "model": "['a']", "expected": "['b']"}
    details = {"turns": [False], "first_failed_turn": 0, "reason": "Shelf.items differ",
               "difference": difference}  # fmt: skip
    score = Score(value=0.0, correct=False, extracted="[[]]", details=details)
    tools = [
        TraceTool(turn=0, agent="agent", name="put", arguments={"item": "a"}, result="ok"),
        TraceTool(turn=0, agent="agent", name="take", result="error: [red]empty[/]", error=True),
    ]
    record = ResultRecord(task_id="t", status="ok", answer="[[]]", gold="[[]]", score=score)
    store.append(record, Trace(task_id="t", repeat=0, messages=[], calls=[], tools=tools))
    store.close()
    out = io.StringIO()
    show_task(store, "t", 0, Console(file=out, width=200))
    text = out.getvalue()
    assert 'turn 0 · agent: put({"item":"a"}) → ok' in text
    assert "take({}) → error: [red]empty[/]" in text  # markup in a result is shown, not applied
    assert "first failed turn: 0 (Shelf.items differ)" in text
    assert "Shelf.items: model ['a']" in text and "Shelf.items: expected ['b']" in text


def test_strict_verdicts_and_cut_replies_get_their_columns_only_when_the_run_has_them(tmp_path):
    store = RunStore(tmp_path / "run")
    store.open(Manifest(method="cot", benchmark="arith", model="m", evaluator="numeric"))
    strict = [("64", True, 0), (None, True, 2), ("3", False, 0)]  # (strict answer, ok, cut)
    for i, (answer, ok, cut) in enumerate(strict):
        score = Score(value=float(ok), correct=ok, extracted="64").with_strict(answer, ok)
        record = ResultRecord(task_id=f"t{i}", status="ok", answer="a", gold="64", score=score,
                              truncated_calls=cut)  # fmt: skip
        store.append(record, Trace(task_id=f"t{i}", repeat=0, messages=[], calls=[]))
    store.close()
    out = io.StringIO()
    show_run(store, Console(file=out, width=200))
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("strict 33.3% [") and lines[1].endswith(
        "66.7% of samples in the instructed form"
    )
    assert lines[2] == "0.67 replies cut at max_tokens per sample, in 1 of 3 samples (33.3%)"
    assert lines[3].split() == ["task", "rep", "status", "extracted", "gold", "ok", "strict",
                                "tokens", "calls", "cut"]  # fmt: skip
    assert [line.split()[5:7] + line.split()[-1:] for line in lines[4:]] == [
        ["✓", "✓", "0"], ["✓", "—", "2"], ["✗", "✗", "0"]
    ]  # fmt: skip
    out = io.StringIO()
    show_task(store, "t1", 0, Console(file=out, width=200))
    assert "strict: wrong (no answer in the instructed form)" in out.getvalue()
    assert "replies cut at max_tokens: 2" in out.getvalue()
    plain = io.StringIO()
    show_run(_run(tmp_path / "plain", ["t1"]), Console(file=plain, width=200))
    assert "strict" not in plain.getvalue() and " cut" not in plain.getvalue()


def test_rows_are_redacted_on_a_terminal_and_off_one(tmp_path):
    from secrets import token_hex

    from maslab.secrets import MARKER, register_secret

    key = f"zq{token_hex(10)}"
    store = _run(tmp_path, [f"task-{key}"])
    register_secret(key)  # after the run was written: shown, it must be redacted
    for terminal in (False, True):  # off one, the rows are written as plain text
        out = io.StringIO()
        show_run(store, Console(file=out, width=200, force_terminal=terminal))
        assert key not in out.getvalue() and MARKER in out.getvalue()
