"""``--log-to mlflow``: a run becomes an MLflow run whose metrics are its summary's, its
parameters its identity, its artifacts the manifest and the report; a sweep becomes a parent
run with its cells as children. On a SQLite tracking store in a scratch directory."""

from __future__ import annotations

from pathlib import Path

import pytest

import maslab
from maslab.cli import main

mlflow = pytest.importorskip("mlflow")


@pytest.fixture
def store(tmp_path: Path, monkeypatch) -> mlflow.tracking.MlflowClient:
    monkeypatch.chdir(tmp_path)  # MLflow keeps a SQLite store's artifacts in ./mlruns
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "tests")
    from mlflow.tracking import MlflowClient

    return MlflowClient()


def runs(client) -> list:
    experiment = client.get_experiment_by_name("tests")
    return client.search_runs([experiment.experiment_id]) if experiment else []


def test_a_run_is_logged_with_its_summary_identity_and_files(store, tmp_path):
    out = tmp_path / "run"
    assert main(["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "3",
                 "--model", "scripted:echo", "--out", str(out), "--no-cache", "--quiet",
                 "--log-to", "mlflow"]) == 0  # fmt: skip
    [logged] = runs(store)
    result = maslab.load_run(out)
    s = result.summary
    assert logged.data.metrics["accuracy"] == s.accuracy
    assert (logged.data.metrics["accuracy_ci_low"], logged.data.metrics["accuracy_ci_high"]) == (
        pytest.approx(s.ci[0]),
        pytest.approx(s.ci[1]),
    )
    assert logged.data.metrics["calls_per_sample"] == s.mean_calls == 1
    assert logged.data.metrics["samples"] == 3
    assert logged.data.params["method"] == "vanilla" and logged.data.params["seed"] == "0"
    assert logged.data.tags["maslab.benchmark"] == "arith"
    assert logged.data.tags["maslab.model"] == "scripted:echo"
    files = {f.path for f in store.list_artifacts(logged.info.run_id)}
    assert files == {"manifest.json", "report.html"}


def test_a_sweep_is_a_parent_with_its_cells_as_children(store, tmp_path):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"out: {tmp_path / 'runs'}\nmodels: [scripted:echo]\nmethods: [vanilla, cot]\n"
        "benchmarks: [arith]\nlimit: 2\ncache: false\n"
    )
    assert main(["sweep", str(sweep), "--quiet", "--log-to", "mlflow"]) == 0
    logged = runs(store)
    [parent] = [r for r in logged if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in logged if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(logged) == 3 and len(children) == 2
    assert parent.info.status == "FINISHED"
    for child in children:
        result = maslab.load_run(child.data.tags["maslab.run"])
        assert child.data.metrics["accuracy"] == result.summary.accuracy
        assert child.data.metrics["tokens_per_sample"] == pytest.approx(result.summary.mean_tokens)
    assert {c.data.tags["maslab.method"] for c in children} == {"vanilla", "cot"}


def test_evaluate_logs_too_and_a_missing_extra_is_one_line(store, tmp_path, monkeypatch):
    maslab.evaluate("vanilla", "arith", "scripted:echo", limit=1, out=tmp_path / "run",
                    cache=False, progress=False, log_to="mlflow")  # fmt: skip
    assert len(runs(store)) == 1
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "mlflow" else found(name, *a))  # fmt: skip
    with pytest.raises(maslab.ConfigError, match=r"pip install 'maslab\[mlflow\]'"):
        maslab.evaluate("vanilla", "arith", "scripted:echo", limit=1, out=tmp_path / "other",
                        log_to="mlflow")  # fmt: skip
