"""``maslab show``: a run's summary cuts a long error at a word; a sample's shows all of it."""

from __future__ import annotations

from maslab.cli import main
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace

ERROR = "ServerError: m: HTTP 502: " + " ".join(f"part{i:02d} of the reply" for i in range(12))


def test_the_summary_cuts_a_long_error_and_the_sample_shows_it_whole(tmp_path, capsys):
    store = RunStore(tmp_path / "run")
    store.open(Manifest(method="vanilla", benchmark="arith", model="scripted:echo",
                        evaluator="numeric", task_ids=["t1"]))  # fmt: skip
    failed = ResultRecord(task_id="t1", status="error", error=ERROR)
    store.append(failed, Trace(task_id="t1", repeat=0))
    store.close()

    assert main(["show", str(store.dir)]) == 0
    summary = " ".join(capsys.readouterr().out.split())
    errors = summary.split("errors: 1 × ")[1]
    shown = errors[: errors.index("…")]
    assert ERROR.startswith(shown + " ") and len(shown) < len(ERROR)  # whole words only
    assert main(["show", str(store.dir), "t1"]) == 0
    assert ERROR in " ".join(capsys.readouterr().out.split())
