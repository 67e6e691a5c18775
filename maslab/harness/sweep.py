"""Sweep files: a grid of methods x benchmarks x models, each cell a resumable run.

out: runs/my-sweep
models: [openai:gpt-4o-mini, "openai:qwen@http://localhost:8000/v1"]
methods:
  - vanilla
  - {name: llm_debate, config: {agents: 3, rounds: 2}, label: debate-3x2}
  - {name: mad, model_roles: {judge: openai:gpt-4o}, label: mad-gpt4o-judge}
benchmarks:
  - gsm8k
  - {name: arith, options: {difficulty: 4}, optimize_on: dev, optimize_limit: 20}
  - {name: arith, options: {difficulty: 6}, label: arith-hard}   # one name twice: label them
limit: 50
shuffle: false                # shuffle each benchmark's tasks with seed before the limit
repeats: 1
concurrency: 32               # model calls in flight across all running cells
max_cells: 4                  # cells run at once
sampling: {temperature: 0.5, max_tokens: 2048}
evaluator: llm_judge          # optional; then judge_model is required
judge_model: openai:gpt-4o-mini
# evaluator_options: {judge_a: SPEC, judge_b: SPEC}   # the named evaluator's options
max_calls: 20                 # per-sample budgets, as maslab run --max-calls,
max_sample_tokens: 60000      # --max-sample-tokens and --max-sample-seconds
max_sample_seconds: 300

Every option of ``maslab run`` (and of :func:`maslab.evaluate`) has its key: per sweep, or per
method (``config``, ``model_roles``) or benchmark (``options``, ``data``, ``split``, ``limit``,
``optimize_on``, ``optimize_limit``) entry; ``sampling`` holds temperature and max_tokens. Where
the samples are solved (``--backend`` and Ray's options), ``--quiet`` and ``--import`` are
``maslab sweep``'s options, for all the cells; a shard (``--shard``) is not a sweep's.

A file is checked as a whole (names, configs, providers, endpoint aliases) before anything runs.
What only the environment can make right (an API key variable, a dataset) is checked per cell,
by the caller, so one missing piece sets aside only the cells that need it. Up to
``max_cells`` cells run at once, sharing one ``concurrency`` cap and every endpoint's own.

A benchmark's ``optimize_on`` (and ``optimize_limit``) gives the methods that learn (those with
an ``optimize`` step) an optimisation step on that split (``maslab run --optimize-on``); the
other methods run without one.
"""

from __future__ import annotations

import fnmatch
import inspect
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from maslab import defaults
from maslab.bench.benchmark import get_benchmark
from maslab.bench.evaluation import check_evaluator_options, get_evaluator
from maslab.config_files import load_yaml
from maslab.core.context import check_sampling
from maslab.core.method import get_method
from maslab.core.roles import role_models
from maslab.core.scheduling import Policy
from maslab.errors import ConfigError
from maslab.harness.runner import RunConfig
from maslab.llm.endpoints import load_endpoints
from maslab.llm.registry import check_model
from maslab.paths import default_response_cache


def unused_judge(option: str, evaluators: Iterable[str]) -> ConfigError:
    """The error for a judge model given where none of ``evaluators`` asks one."""
    return ConfigError(
        f"{option} is only for an evaluator that asks a judge model (llm_judge), "
        f"not for {' or '.join(evaluators)}"
    )


def judge_options(evaluator: str, judge: str | None) -> dict[str, Any]:
    """``{"judge": judge}`` for an evaluator that asks a judge model, else ``{}``; a
    :class:`ConfigError` when the evaluator needs a judge and ``judge`` is None."""
    parameter = inspect.signature(get_evaluator(evaluator)).parameters.get("judge")
    if parameter is None:
        return {}
    if judge is None:
        if parameter.default is inspect.Parameter.empty:
            raise ConfigError(
                f"evaluator {evaluator} needs a judge model: --judge-model SPEC "
                "(judge_model: in a sweep file), e.g. openai:gpt-4o-mini"
            )
        return {}
    return {"judge": judge}


class MethodCell(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    config: dict[str, Any] = Field(default_factory=dict)
    model_roles: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None

    @model_validator(mode="after")
    def _known(self) -> MethodCell:
        method = get_method(self.name)(self.config)  # unknown names, bad configs: one line
        self.model_roles = method.check_model_roles(self.model_roles)
        return self


class BenchmarkCell(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    options: dict[str, Any] = Field(default_factory=dict)
    data: str | None = None
    split: str = defaults.SPLIT
    limit: int | None = Field(None, ge=1)
    optimize_on: str | None = None
    optimize_limit: int | None = Field(None, ge=1)
    label: str | None = None

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        get_benchmark(name)
        return name


class Sweep(BaseModel):
    """A validated sweep file."""

    model_config = ConfigDict(extra="forbid")

    out: str = "runs/sweep"
    endpoints: str | None = None  # before the models, which are checked against it
    models: list[str] = Field(min_length=1)
    methods: list[MethodCell] = Field(min_length=1)
    benchmarks: list[BenchmarkCell] = Field(min_length=1)
    limit: int | None = Field(None, ge=1)
    shuffle: bool = False
    repeats: int = Field(defaults.REPEATS, ge=1)
    seed: int = defaults.SEED
    concurrency: int = Field(defaults.CONCURRENCY, ge=1)
    max_cells: int = Field(defaults.MAX_CELLS, ge=1)
    scheduler: Policy = defaults.SCHEDULER
    sampling: dict[str, Any] = Field(default_factory=lambda: dict(defaults.SAMPLING))
    evaluator: str | None = None
    judge_model: str | None = None
    evaluator_options: dict[str, Any] = Field(default_factory=dict)
    # every cell's per-sample budgets: maslab run's --max-calls, --max-sample-tokens and
    # --max-sample-seconds (RunConfig's max_calls, max_tokens and max_seconds)
    max_calls: int | None = Field(None, ge=1)
    max_sample_tokens: int | None = Field(None, ge=1)
    max_sample_seconds: float | None = Field(None, gt=0)
    cache: str | bool = True
    strict_sandbox: bool = False
    unsafe_no_sandbox: bool = False
    native: bool = True

    @field_validator("methods", "benchmarks", mode="before")
    @classmethod
    def _bare_names(cls, value: Any) -> Any:
        """``- vanilla`` is short for ``- {name: vanilla}``."""
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("endpoints")
    @classmethod
    def _endpoints_file(cls, path: str | None) -> str | None:
        if path is not None:
            load_endpoints(path)
        return path

    @field_validator("sampling")
    @classmethod
    def _sampling(cls, sampling: dict[str, Any]) -> dict[str, Any]:
        return check_sampling(sampling, what="")  # the error names the field

    @field_validator("models")
    @classmethod
    def _specs(cls, models: list[str], info: ValidationInfo) -> list[str]:
        """Known providers and aliases (API keys are the cells' business)."""
        for spec in models:
            check_model(spec, info.data.get("endpoints"), keys=False)
        return models

    @field_validator("methods")
    @classmethod
    def _role_models(cls, methods: list[MethodCell], info: ValidationInfo) -> list[MethodCell]:
        for cell in methods:
            for spec in role_models(cell.model_roles):
                check_model(spec, info.data.get("endpoints"), keys=False)
        return methods

    @field_validator("judge_model")
    @classmethod
    def _judge(cls, spec: str | None, info: ValidationInfo) -> str | None:
        if spec is not None:
            check_model(spec, info.data.get("endpoints"), keys=False)
        return spec

    @field_validator("evaluator")
    @classmethod
    def _evaluator(cls, name: str | None) -> str | None:
        if name is not None:
            get_evaluator(name)
        return name

    @model_validator(mode="after")
    def _judged(self) -> Sweep:
        """Every evaluator has the judge model it needs, and a judge model has a use."""
        evaluators = {self.evaluator or get_benchmark(b.name).evaluator for b in self.benchmarks}
        judged = [name for name in sorted(evaluators) if judge_options(name, self.judge_model)]
        if self.judge_model and not judged:
            raise unused_judge("judge_model", sorted(evaluators))
        if self.evaluator_options:
            if self.evaluator is None:
                raise ValueError(
                    "evaluator_options are the options of one evaluator: name it (evaluator:)"
                )
            if self.judge_model and "judge" in self.evaluator_options:
                raise ValueError("give the judge once: judge_model or evaluator_options judge")
            check_evaluator_options(self.evaluator, self.scoring(), "evaluator_options")
        return self

    @model_validator(mode="after")
    def _distinct_directories(self) -> Sweep:
        """Two entries of one benchmark (other options, split) or of one method (other configs)
        would share a run directory, and its identity check would refuse the second."""
        for kind, entries in (("benchmarks", self.benchmarks), ("methods", self.methods)):
            labels = [entry.label or entry.name for entry in entries]
            if twice := sorted({label for label in labels if labels.count(label) > 1}):
                raise ValueError(
                    f"{kind} {', '.join(twice)} appear more than once: give each entry its own "
                    "label (label:), which names its directory"
                )
        return self

    def scoring(self, benchmark: str | None = None) -> dict[str, Any]:
        """The options of the evaluator that scores ``benchmark`` (the file's evaluator, else
        the benchmark's own): the judge model where it takes one, then ``evaluator_options``."""
        name = self.evaluator or get_benchmark(str(benchmark)).evaluator
        return {**judge_options(name, self.judge_model), **self.evaluator_options}

    def cells(self, *, limit: int | None = None) -> list[Cell]:
        """One run per benchmark x method x model, each in its own directory under ``out``;
        ``limit`` caps every cell's number of tasks."""
        cache = str(default_response_cache()) if self.cache is True else (self.cache or None)
        cells = []
        for bench, method, model in itertools.product(self.benchmarks, self.methods, self.models):
            label, bench_label = method.label or method.name, bench.label or bench.name
            slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
            caps = [n for n in (bench.limit or self.limit, limit) if n is not None]
            learns = get_method(method.name).learns()
            config = RunConfig(
                method=method.name,
                method_config=method.config,
                benchmark=bench.name,
                benchmark_options=bench.options,
                split=bench.split,
                limit=min(caps, default=None),
                shuffle=self.shuffle,
                data=bench.data,
                model=model,
                model_roles=method.model_roles,
                endpoints=self.endpoints,
                sampling=self.sampling,
                repeats=self.repeats,
                seed=self.seed,
                concurrency=self.concurrency,
                scheduler=self.scheduler,
                evaluator=self.evaluator,
                evaluator_options=self.scoring(bench.name),
                max_calls=self.max_calls,
                max_tokens=self.max_sample_tokens,
                max_seconds=self.max_sample_seconds,
                cache=cache,
                strict_sandbox=self.strict_sandbox,
                unsafe_no_sandbox=self.unsafe_no_sandbox,
                native=self.native,
                optimize_on=bench.optimize_on if learns else None,
                optimize_limit=bench.optimize_limit if learns else None,
                out=str(Path(self.out) / bench_label / label / slug),
            )
            cells.append(Cell(bench.name, method.name, label, model, config, bench_label))
        return cells


@dataclass(frozen=True)
class Cell:
    """One run of a sweep; ``label`` and ``benchmark_label`` are the method's and the
    benchmark's labels in the file (their names by default), which name the run's directory."""

    benchmark: str
    method: str
    label: str
    model: str
    config: RunConfig
    benchmark_label: str = ""

    def __str__(self) -> str:
        return f"{self.benchmark_label or self.benchmark}/{self.label}/{self.model}"

    def matches(self, pattern: dict[str, str]) -> bool:
        """Whether every ``key: glob`` of ``pattern`` (see :func:`parse_only`) fits this cell;
        ``method`` and ``benchmark`` fit the name or the label."""
        values = {
            "benchmark": (self.benchmark, self.benchmark_label),
            "method": (self.method, self.label),
            "model": (self.model,),
        }
        return all(
            any(fnmatch.fnmatchcase(value, glob) for value in values[key])
            for key, glob in pattern.items()
        )


ONLY_KEYS = ("method", "benchmark", "model")


def parse_only(text: str) -> dict[str, str]:
    """``method=llm_debate,benchmark=ar*`` -> ``{"method": "llm_debate", "benchmark": "ar*"}``:
    comma-separated ``KEY=GLOB`` terms, KEY one of method, benchmark, model."""
    pattern: dict[str, str] = {}
    for term in text.split(","):
        key, sep, glob = (part.strip() for part in term.partition("="))
        if not sep or key not in ONLY_KEYS or not glob:
            raise ConfigError(
                f"--only {text}: '{term.strip()}' is not KEY=GLOB with KEY one of "
                f"{', '.join(ONLY_KEYS)} (e.g. --only method=llm_debate,benchmark=arith)"
            )
        pattern[key] = glob
    return pattern


def select(cells: Sequence[Cell], only: Sequence[str]) -> list[Cell]:
    """The cells that match any of the ``--only`` patterns (all cells when there are none); a
    :class:`ConfigError` when the patterns match no cell."""
    if not only:
        return list(cells)
    patterns = [parse_only(text) for text in only]
    chosen = [cell for cell in cells if any(cell.matches(p) for p in patterns)]
    if not chosen:
        listed = ", ".join(map(str, cells))
        raise ConfigError(f"--only {' '.join(only)} matches no cell; the cells: {listed}")
    return chosen


def load_sweep(path: str | Path, *, models: Sequence[str] = ()) -> Sweep:
    """Read and validate a sweep file (errors name the file, line and field); ``models``, when
    given, replace the file's."""
    sweep = load_yaml(path, Sweep)
    for spec in models:
        check_model(spec, sweep.endpoints, keys=False)
    return sweep.model_copy(update={"models": list(models)}) if models else sweep
