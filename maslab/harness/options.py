"""A run's options beside its method, benchmark and model: defined once, here.

:class:`RunOptions` is the definition: names (Python's spelling), types, defaults and what each
does. ``maslab.evaluate`` / ``aevaluate`` take them as keywords (:class:`RunKeywords` spells
them for type checkers and notebooks), ``maslab run`` as flags and a sweep file as keys;
``tests/test_run_options.py`` derives each surface's names from this model and fails when one
lacks an option. :func:`maslab.api.run_config` turns them into the validated
:class:`~maslab.harness.runner.RunConfig` that the runner, the Ray workers and the manifest use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from maslab import defaults
from maslab.core.scheduling import Policy

Overrides = Mapping[str, Any] | Sequence[str] | str
"""Settings to override: a mapping (dotted keys reach into nested settings), or ``KEY=VALUE``
strings (one, or several) whose values read as YAML."""


class RunOptions(BaseModel):
    """Every option of one run beside its method, benchmark and model."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    # the experiment
    split: str = Field(defaults.SPLIT, description="the benchmark split the run scores")
    data: str | Path | None = Field(None, description="a local data file instead of the cache")
    limit: int | None = Field(None, ge=1, description="the first N tasks only")
    shuffle: bool = Field(False, description="shuffle the tasks (by the seed) before the limit")
    repeats: int = Field(defaults.REPEATS, ge=1, description="independent attempts at each task")
    seed: int = Field(defaults.SEED, description="keys every random draw of the run")
    config: Overrides | None = Field(None, description="overrides of the method's settings")
    model_roles: Mapping[str, Any] | Sequence[str] | None = Field(
        None, description="roles or agents of the method on other models (NAME=MODEL)"
    )
    bench_options: Overrides | None = Field(None, description="the benchmark's options")
    # sampling, each call's
    temperature: float = Field(defaults.TEMPERATURE, description="sampling temperature")
    max_tokens: int | None = Field(
        None, ge=1, description="completion tokens per call (by default the model's default)"
    )
    # scoring
    evaluator: str | None = Field(None, description="the scoring protocol (the benchmark's)")
    judge_model: str | None = Field(None, description="the judge of judged evaluators")
    evaluator_options: Overrides | None = Field(None, description="the evaluator's options")
    # each sample's budgets
    max_calls: int | None = Field(None, ge=1, description="model calls per sample")
    max_sample_tokens: int | None = Field(None, ge=1, description="tokens per sample")
    max_sample_seconds: float | None = Field(None, gt=0, description="wall seconds per sample")
    # how it runs
    concurrency: int = Field(
        defaults.CONCURRENCY, ge=1, description="model calls in flight, and samples"
    )
    scheduler: Policy = Field(
        defaults.SCHEDULER, description="which waiting call goes next at the cap"
    )
    endpoints: str | Path | None = Field(None, description="an endpoints file (model aliases)")
    cache: bool | str | Path = Field(
        True, description="the response cache: the user's (True), none (False) or a file"
    )
    out: str | Path | None = Field(
        None, description="the run directory (by default one named by the run's identity)"
    )
    strict_sandbox: bool = Field(False, description="demand every sandbox protection")
    unsafe_no_sandbox: bool = Field(
        False, description="let model-written code run unisolated, with your user's rights"
    )
    native: bool = Field(True, description="use native structured output and tool calls")
    optimize_on: str | None = Field(None, description="a split the method learns from first")
    optimize_limit: int | None = Field(None, ge=1, description="its first N tasks only")
    shard: str | tuple[int, int] | None = Field(
        None, description="run only shard i of N (i/N) of the tasks"
    )


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
    evaluator: str | None
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
    optimize_on: str | None
    optimize_limit: int | None
    shard: str | tuple[int, int] | None
