"""Finished runs logged to an experiment tracker (``--log-to mlflow``, ``log_to:`` in a sweep
file, ``evaluate(log_to="mlflow")``).

Each run becomes an MLflow run in the experiment ``MLFLOW_EXPERIMENT_NAME`` (else ``maslab``),
on the tracking server ``MLFLOW_TRACKING_URI`` names (else MLflow's default, a SQLite file in
the working directory):

- parameters: the run's identity (:meth:`~maslab.store.records.Manifest.identity`, nested keys
  dotted, values as JSON text);
- metrics: accuracy and its 95% interval (a run that measures rather than grades has none),
  strict accuracy, samples, errors, budget stops, tokens and calls per sample, the tokens
  spent per sample and the tokens served in all (the run's summary);
- tags: method, benchmark, model, maslab version, git commit, and the run directory;
- artifacts: the manifest and the report.

A sweep is a parent run, its cells child runs under it (MLflow's ``mlflow.parentRunId``). The
logging uses MLflow's client with explicit run ids, never its "active run" state, so cells
finishing at once log apart. ``mlflow`` is imported only when logging.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from maslab.errors import ConfigError
from maslab.store.records import MANIFEST
from maslab.version import __version__

if TYPE_CHECKING:
    from maslab.analysis.run_result import RunResult

EXPERIMENT = "maslab"
PARAM_CHARS = 6000
"""MLflow's limit on a parameter's value."""


def check_tracker(name: str) -> None:
    """A one-line ConfigError when ``name``'s package is not installed."""
    import importlib.util

    if name == "mlflow" and importlib.util.find_spec("mlflow") is None:
        raise ConfigError("log_to mlflow needs the optional extra: pip install 'maslab[mlflow]'")


def _client() -> tuple[Any, str]:
    """MLflow's client and the experiment's id (made when it is new)."""
    for name in ("mlflow", "alembic"):  # its database set-up talks at INFO
        logging.getLogger(name).setLevel(logging.WARNING)
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or EXPERIMENT
    found = client.get_experiment_by_name(name)
    return client, found.experiment_id if found is not None else client.create_experiment(name)


def _flat(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, value in values.items():
        if isinstance(value, Mapping) and value:
            yield from _flat(value, f"{prefix}{key}.")
        else:
            text = value if isinstance(value, str) else orjson.dumps(value).decode()
            yield f"{prefix}{key}", text[:PARAM_CHARS]


def metrics_of(result: RunResult) -> dict[str, float]:
    """What the run's summary says, as MLflow metrics."""
    s = result.summary
    found: dict[str, float] = {
        "samples": s.n, "errors": s.errors, "budget_stops": s.budget_stopped,
        "tokens_per_sample": s.mean_tokens, "spent_tokens_per_sample": s.mean_spent_tokens,
        "calls_per_sample": s.mean_calls, "served_tokens": s.total_served_tokens,
    }  # fmt: skip
    if s.graded:
        found.update(accuracy=s.accuracy, accuracy_ci_low=s.ci[0], accuracy_ci_high=s.ci[1])
    if s.strict_accuracy is not None:
        found["strict_accuracy"] = s.strict_accuracy
    return found


def log_run(result: RunResult, *, parent: str | None = None) -> str:
    """Log ``result`` as an MLflow run (under the run ``parent``, if given); its id."""
    from mlflow.entities import Metric, Param

    client, experiment = _client()
    m = result.manifest
    tags = {
        "maslab.method": m.method, "maslab.benchmark": m.benchmark, "maslab.model": m.model,
        "maslab.version": __version__, "maslab.run": str(result.dir),
        **({"maslab.git_commit": m.git_commit} if m.git_commit else {}),
        **({"mlflow.parentRunId": parent} if parent else {}),
    }  # fmt: skip
    run = client.create_run(experiment, run_name=result.dir.name, tags=tags)
    now = int(time.time() * 1000)
    client.log_batch(
        run.info.run_id,
        metrics=[Metric(k, float(v), now, 0) for k, v in metrics_of(result).items()],
        params=[Param(k, v) for k, v in _flat(m.identity())],
    )
    client.log_artifact(run.info.run_id, str(result.dir / MANIFEST))
    if result.report is not None:
        client.log_artifact(run.info.run_id, str(result.report))
    client.set_terminated(run.info.run_id)
    return str(run.info.run_id)


def start_parent(name: str) -> str:
    """A parent run for a sweep's cells; its id."""
    client, experiment = _client()
    return str(client.create_run(experiment, run_name=name, tags={
        "maslab.version": __version__, "maslab.sweep": name,
    }).info.run_id)  # fmt: skip


def end_parent(run_id: str, failed: bool) -> None:
    client, _ = _client()
    client.set_terminated(run_id, "FAILED" if failed else "FINISHED")
