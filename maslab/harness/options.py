"""A run's options beside its method, benchmark and model: defined once, here.

:class:`RunOptions` is the definition: names (Python's spelling), types, defaults and what each
does. ``maslab.evaluate`` / ``aevaluate`` take them as keywords (:class:`RunKeywords` spells
them for type checkers and notebooks), ``maslab run`` as flags derived from the fields (their
help is the descriptions: ``maslab.cli.run_flags``), and a sweep file as keys at its top and in
its entries (:mod:`maslab.harness.sweep`); ``tests/harness/test_run_options.py`` checks each surface
against this model. :func:`~maslab.harness.configure.configure` turns them into the validated
:class:`~maslab.harness.runner.RunConfig` that the runner, the Ray workers and the manifest use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from maslab import defaults
from maslab.core.scheduling import Policy

Overrides = Mapping[str, Any] | Sequence[str] | str
"""Settings to override: a mapping (dotted keys reach into nested settings), or ``KEY=VALUE``
strings (one, or several) whose values read as YAML."""


class RunOptions(BaseModel):
    """Every option of one run beside its method, benchmark and model. Each field's
    ``description`` is its help on every surface (``maslab run --help`` shows it)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    # the experiment
    split: str = Field(defaults.SPLIT, description="the benchmark split the run scores")
    data: str | Path | None = Field(
        None, description="a local data file (JSON, JSONL, Parquet) instead of the data cache"
    )
    limit: int | None = Field(
        None,
        ge=1,
        description="score only the first N tasks (after the shuffle, if any); all by default",
    )
    shuffle: bool = Field(False, description="shuffle the tasks (by the seed) before the limit")
    repeats: int = Field(defaults.REPEATS, ge=1, description="independent attempts at each task")
    seed: int = Field(
        defaults.SEED,
        description="the run seed, which fixes each sample's random streams, the response "
        "cache's draws and the shuffle: the same seed replays a run from the cache",
    )
    config: Overrides | None = Field(
        None, description="overrides of the method's settings, e.g. agents=5 (values read as YAML)"
    )
    model_roles: Mapping[str, Any] | Sequence[str] | None = Field(
        None,
        description="put a role or an agent of the method on another model, e.g. "
        "judge=openai:gpt-4o (NAME.temperature=T sets its temperature); `maslab list methods` "
        "shows the roles",
    )
    bench_options: Overrides | None = Field(
        None, description="the benchmark's options, e.g. difficulty=4 (arith)"
    )
    # sampling, each call's
    temperature: float = Field(defaults.TEMPERATURE, ge=0, le=2, description="sampling temperature")
    max_tokens: int | None = Field(
        None,
        ge=1,
        description=f"completion tokens per model call (by default {defaults.MAX_TOKENS}; "
        f"{defaults.DEMO_MAX_TOKENS} on the demo model)",
    )
    # scoring
    evaluator: str | Callable[..., Any] | None = Field(
        None,
        description="the scoring protocol (by default the benchmark's): a registered name, or a "
        "function fn(task, answer) -> bool | float | Score as module:fn or path/to/file.py:fn",
    )
    judge_model: str | None = Field(
        None, description="the model spec of the judge, for an evaluator that asks one (llm_judge)"
    )
    evaluator_options: Overrides | None = Field(
        None, description="the evaluator's options, e.g. judge_a=openai:gpt-4o (behaviour_coding)"
    )
    # each sample's budgets
    max_calls: int | None = Field(None, ge=1, description="per-sample budget: model calls")
    max_sample_tokens: int | None = Field(
        None, ge=1, description="per-sample budget: tokens over all its calls"
    )
    max_sample_seconds: float | None = Field(
        None, gt=0, description="per-sample budget: wall-clock seconds"
    )
    # how it runs
    concurrency: int = Field(
        defaults.CONCURRENCY, ge=1, description="model calls in flight, and samples"
    )
    scheduler: Policy = Field(
        defaults.SCHEDULER,
        description="which waiting model call goes next when the concurrency binds: the one "
        "waiting longest (fcfs) or the one whose sample is furthest along (progress)",
    )
    endpoints: str | Path | None = Field(
        None, description="an endpoints YAML file (model aliases, keys, limits)"
    )
    cache: bool | str | Path = Field(
        True, description="the response cache: the user's (by default), a file, or none"
    )
    out: str | Path | None = Field(
        None,
        description="the run directory (by default runs/<benchmark>/<method>__<model>__<hash>, "
        "named by the run's identity)",
    )
    strict_sandbox: bool = Field(
        False,
        description="refuse to start unless model-written code runs fully isolated (own "
        "filesystem, /proc and network, unprivileged, process cap)",
    )
    unsafe_no_sandbox: bool = Field(
        False,
        description="let model-written code run where it cannot be isolated (no new root or no "
        "network namespace), with your user's rights; recorded in the run",
    )
    native: bool = Field(
        True,
        description="let calls use native structured output and tool calls where the model "
        "offers them (off: every call on the text protocol, for comparisons with text-only "
        "servers)",
    )
    log_to: Literal["mlflow"] | None = Field(
        None,
        description="log the finished run to an experiment tracker: mlflow (the tracking URI "
        "from MLFLOW_TRACKING_URI, else MLflow's default; pip install 'maslab[mlflow]')",
    )
    optimize_on: str | None = Field(
        None,
        description="let the method learn (its optimize step) on this split before the test "
        "samples; it may share no task with the split",
    )
    optimize_limit: int | None = Field(
        None, ge=1, description="optimise on the first N tasks of optimize_on only"
    )
    shard: str | tuple[int, int] | None = Field(
        None,
        description="run only shard i of N (i/N, 1 <= i <= N) of the tasks: task k (from 0) "
        "goes to shard k mod N + 1; `maslab merge` combines the shards' directories",
    )


SHARED = ("endpoints", "cache", "native", "concurrency", "scheduler")
"""The options that runs executing together must agree on: one model pool and one call gate
are built from them (:class:`~maslab.harness.runner.SharedResources`, a Ray worker's), so a
sweep sets them once for all its cells."""


class RunKeywords(TypedDict, total=False):
    """:class:`RunOptions` as keyword arguments (``**options: Unpack[RunKeywords]``), for type
    checkers and notebooks' completion; a test keeps the two the same."""

    split: str
    data: str | Path | None
    limit: int | None
    shuffle: bool
    repeats: int
    seed: int
    config: Overrides | None
    model_roles: Mapping[str, Any] | Sequence[str] | None
    bench_options: Overrides | None
    temperature: float
    max_tokens: int | None
    evaluator: str | Callable[..., Any] | None
    judge_model: str | None
    evaluator_options: Overrides | None
    max_calls: int | None
    max_sample_tokens: int | None
    max_sample_seconds: float | None
    concurrency: int
    scheduler: Policy
    endpoints: str | Path | None
    cache: bool | str | Path
    out: str | Path | None
    strict_sandbox: bool
    unsafe_no_sandbox: bool
    native: bool
    log_to: Literal["mlflow"] | None
    optimize_on: str | None
    optimize_limit: int | None
    shard: str | tuple[int, int] | None
