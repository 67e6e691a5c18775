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
  - {name: arith, options: {difficulty: 6}, label: arith-hard, limit: 20}   # labelled: twice
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

Every run option (:class:`~maslab.harness.options.RunOptions`: ``maslab run``'s options, with
:func:`maslab.evaluate`'s names) is a key: at the top of the file, for every cell, or in a
method or benchmark entry, for that entry's cells. A cell's options are the file's, replaced
by its benchmark entry's, then by its method entry's, and are checked as ``maslab run``'s are
(:func:`~maslab.harness.configure.configure`). Beside them: ``out`` at the top is the sweep's
directory (a cell's run is ``out/<benchmark>/<method>/<model>``, by their labels); a
benchmark entry's ``options`` are its ``bench_options``; ``sampling`` may hold temperature and
max_tokens and the other sampling parameters (``top_p``, ``stop``, ...). The options the cells
share (:data:`~maslab.harness.options.SHARED`: endpoints, cache, native, concurrency,
scheduler) go only at the top, and a shard (``--shard``) is not a sweep's. Where the samples
are solved (``--backend`` and Ray's options), ``--quiet`` and ``--import`` are
``maslab sweep``'s options, for all the cells.

A file is checked as a whole (names, configs, providers, endpoint aliases, every cell's
options) before anything runs. What only the environment can make right (an API key variable,
a dataset) is checked per cell, by the caller, so one missing piece sets aside only the cells
that need it. Up to ``max_cells`` cells run at once, sharing one ``concurrency`` cap and every
endpoint's own.

A file's ``judge_model`` goes to the cells whose evaluator asks a judge. ``optimize_on`` (and
``optimize_limit``) give the methods that learn (those with an ``optimize`` step) an
optimisation step on that split (``maslab run --optimize-on``); the other methods run without
one.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from maslab import defaults
from maslab.bench.benchmark import get_benchmark
from maslab.config_files import load_yaml, validation_message
from maslab.core.context import check_sampling
from maslab.core.method import get_method
from maslab.errors import ConfigError, MaslabError
from maslab.harness.configure import checked_method, configure
from maslab.harness.configure import judge_options as judge_options  # its old home
from maslab.harness.configure import unused_judge as unused_judge  # its old home
from maslab.harness.options import SHARED, RunOptions
from maslab.harness.runner import RunConfig
from maslab.llm.endpoints import load_endpoints
from maslab.llm.registry import check_model

# the run options a sweep file does not take, and why
NOT_IN_A_SWEEP = {"shard": "a shard is one machine's part of one run (maslab merge), not a sweep's"}
# those a method or benchmark entry does not take, and why
NOT_IN_AN_ENTRY = {
    **NOT_IN_A_SWEEP,
    **dict.fromkeys(SHARED, "the cells share it (one model pool, one call cap): set it at the top"),
    "out": "the labels name an entry's directories under the sweep's out (label:)",
}
# sampling's keys that are run options
RUN_SAMPLING = ("temperature", "max_tokens")


def _refuse(given: set[str], refused: dict[str, str], where: str) -> None:
    for key in sorted(given & refused.keys()):
        raise ValueError(f"{key} is not for {where}: {refused[key]}")


class Entry(RunOptions):
    """A method or benchmark of the grid: its name, the label that names its directories (the
    name by default), and the run options its cells take instead of the file's."""

    name: str
    label: str | None = None

    @model_validator(mode="after")
    def _overridable(self) -> Self:
        _refuse(self.model_fields_set, NOT_IN_AN_ENTRY, "an entry")
        return self

    def overrides(self) -> dict[str, Any]:
        """The run options this entry sets."""
        return {k: getattr(self, k) for k in self.model_fields_set & RunOptions.model_fields.keys()}


class MethodCell(Entry):
    """A method entry (``config`` and ``model_roles`` are its usual options)."""

    @model_validator(mode="after")
    def _known(self) -> Self:
        checked_method(self.name, self)  # unknown names, bad configs and roles: one line
        return self


class BenchmarkCell(Entry):
    """A benchmark entry; its ``options`` are its ``bench_options``."""

    @model_validator(mode="before")
    @classmethod
    def _options(cls, data: Any) -> Any:
        if isinstance(data, dict) and "options" in data:
            if "bench_options" in data:
                raise ValueError("give the benchmark's options once: options or bench_options")
            data = {**data, "bench_options": data["options"]}
            del data["options"]
        return data

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        get_benchmark(name)
        return name


class Sweep(RunOptions):
    """A validated sweep file: the run options every cell takes unless its entries say
    otherwise, and the grid."""

    out: str = Field(
        "runs/sweep",
        description="the sweep's directory: a cell's run is out/<benchmark>/<method>/<model>",
    )
    models: list[str] = Field(min_length=1)
    methods: list[MethodCell] = Field(min_length=1)
    benchmarks: list[BenchmarkCell] = Field(min_length=1)
    max_cells: int = Field(defaults.MAX_CELLS, ge=1, description="cells run at once")
    sampling: dict[str, Any] = Field(
        default_factory=dict, description="every call's sampling parameters (temperature, ...)"
    )

    @field_validator("methods", "benchmarks", mode="before")
    @classmethod
    def _bare_names(cls, value: Any) -> Any:
        """``- vanilla`` is short for ``- {name: vanilla}``."""
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("endpoints")
    @classmethod
    def _endpoints_file(cls, path: str | Path | None) -> str | Path | None:
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

    @model_validator(mode="after")
    def _grid(self) -> Self:
        """The file's own rules, then every cell checked as ``maslab run`` checks a run."""
        _refuse(self.model_fields_set, NOT_IN_A_SWEEP, "a sweep")
        for key in sorted(self.model_fields_set & self.sampling.keys()):
            raise ValueError(f"give {key} once: at the top or in sampling")
        if "evaluator_options" in self.model_fields_set and self.evaluator is None:
            raise ValueError(
                "evaluator_options are the options of one evaluator: name it (evaluator:)"
            )
        self._distinct_directories()
        self.cells()
        return self

    def _distinct_directories(self) -> None:
        """Two entries of one benchmark (other options, split) or of one method (other configs)
        would share a run directory, and its identity check would refuse the second."""
        for kind, entries in (("benchmarks", self.benchmarks), ("methods", self.methods)):
            labels = [entry.label or entry.name for entry in entries]
            if twice := sorted({label for label in labels if labels.count(label) > 1}):
                raise ValueError(
                    f"{kind} {', '.join(twice)} appear more than once: give each entry its own "
                    "label (label:), which names its directory"
                )

    def run_options(self) -> dict[str, Any]:
        """The file's run options, every cell's unless its entries replace them."""
        options = {k: getattr(self, k) for k in RunOptions.model_fields.keys() - {"out"}}
        return options | {k: v for k, v in self.sampling.items() if k in RUN_SAMPLING}

    def cells(self, *, limit: int | None = None) -> list[Cell]:
        """One run per benchmark x method x model, each in its own directory under ``out``;
        ``limit`` caps every cell's number of tasks."""
        extra = {k: v for k, v in self.sampling.items() if k not in RUN_SAMPLING}
        cells: list[Cell] = []
        evaluators: set[str] = set()
        judged = False
        for bench, method, model in itertools.product(self.benchmarks, self.methods, self.models):
            label, bench_label = method.label or method.name, bench.label or bench.name
            entries = {**bench.overrides(), **method.overrides()}
            options = {**self.run_options(), **entries}
            evaluator = options["evaluator"] or get_benchmark(bench.name).evaluator
            evaluators.add(evaluator)
            if "judge_model" not in entries and options["judge_model"]:  # the file's judge
                if judge_options(evaluator, options["judge_model"]):
                    judged = True
                else:
                    options["judge_model"] = None
            if not get_method(method.name).learns():
                options["optimize_on"] = options["optimize_limit"] = None
            caps = [n for n in (options["limit"], limit) if n is not None]
            slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
            options["limit"] = min(caps, default=None)
            options["out"] = str(Path(self.out) / bench_label / label / slug)
            cell = f"{bench_label}/{label}/{model}"
            try:
                run = RunOptions.model_validate(options)
                config = configure(method.name, bench.name, model, run, keys=False, sampling=extra)
            except ValidationError as exc:
                raise ConfigError(validation_message(exc, cell)) from None
            except MaslabError as exc:
                raise ConfigError(f"{cell}: {exc}") from None
            cells.append(Cell(bench.name, method.name, label, model, config, bench_label))
        if self.judge_model and not judged:
            raise unused_judge("judge_model", sorted(evaluators))
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
