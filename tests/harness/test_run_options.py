"""One set of run options on three surfaces: ``maslab run``'s flags, the keywords of
:func:`maslab.evaluate` / :func:`maslab.aevaluate`, and the keys of a sweep file.

Each surface's names are read from the surface itself (the argparse parser, the function
signatures, the sweep file's pydantic models), mapped to one canonical spelling (the Python
keyword), and compared. An option may be missing from a surface only when :data:`ONLY_ON` says
so, and why; so an option added to one surface and not the others fails here. Then, per option
of :class:`RunOptions`: its flag's help is its description, and a sweep file that sets it
builds the cell's RunConfig that ``run_config`` builds (:data:`SAMPLES` gives each a value).
"""

from __future__ import annotations

import argparse
import inspect
import typing
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

import maslab
from maslab import MaslabError
from maslab import api as harness
from maslab.bench.evaluation import get_evaluator
from maslab.cli import build_parser
from maslab.cli.console import plain_text
from maslab.cli.run_flags import flag, run_keywords
from maslab.core.context import Sampling
from maslab.core.method import get_method
from maslab.harness.options import SHARED, RunKeywords, RunOptions
from maslab.harness.ray_backend import RunSpec, ShardWorker
from maslab.harness.sweep import NOT_IN_A_SWEEP, NOT_IN_AN_ENTRY, Sweep, load_sweep

CLI, PYTHON, SWEEP = "maslab run", "evaluate", "sweep file"
EVERYWHERE = frozenset({CLI, PYTHON, SWEEP})

# Flags spelled otherwise than ``--`` + the canonical name with dashes.
FLAG_NAMES = {
    "--model-role": "model_roles",  # repeated, one role each
    "--bench-option": "bench_options",
    "--evaluator-option": "evaluator_options",
    "--epochs": "repeats",  # an alias
    "--no-native": "native",
    "--no-cache": "cache",  # --cache FILE, or --no-cache: the keyword's True / False / file
    "--quiet": "progress",  # the keyword's progress=False
    "--import": "imports",
}
# Sweep-file keys spelled otherwise than the canonical name (``benchmarks[].split`` is ``split``;
# the other ``sampling.*`` keys keep their prefix: ``sampling.seed`` is not the run's seed).
SWEEP_NAMES = {
    "models": "model",  # the file's list of models: one cell per model
    "methods[].name": "method",
    "methods[].config": "config",
    "benchmarks[].name": "benchmark",
    "methods[].label": "label",
    "benchmarks[].label": "label",
    "sampling.temperature": "temperature",
    "sampling.max_tokens": "max_tokens",
}

RUN_ONLY = frozenset({CLI, PYTHON})  # not in a sweep file
SWEEP_COMMAND = "maslab sweep takes it on its command line, for all the cells"
BEYOND = "a sampling parameter beyond temperature and max_tokens: only a sweep's sampling, so far"
# The options on only some surfaces: option -> (those surfaces, why). Nothing else may differ.
ONLY_ON: dict[str, tuple[frozenset[str], str]] = {
    "imports": (frozenset({CLI}), f"Python code imports its plugins itself; {SWEEP_COMMAND}"),
    "otel": (frozenset({CLI}), f"Python calls maslab.telemetry.enable(); {SWEEP_COMMAND}"),
    "backend": (RUN_ONLY, f"where samples are solved, not what a cell is; {SWEEP_COMMAND}"),
    "address": (RUN_ONLY, f"the Ray cluster of --backend ray; {SWEEP_COMMAND}"),
    "workers": (RUN_ONLY, f"Ray's worker slots; {SWEEP_COMMAND}"),
    "shards": (RUN_ONLY, f"how the samples are dealt to Ray's workers; {SWEEP_COMMAND}"),
    "progress": (RUN_ONLY, f"how a run is shown (--quiet); {SWEEP_COMMAND}"),
    "shard": (RUN_ONLY, "one machine's part of one run, for maslab merge; not a grid's"),
    "max_cells": (frozenset({SWEEP}), "cells run at once: only a sweep has cells"),
    "label": (frozenset({SWEEP}), "names a sweep entry's directories; a run's is out"),
    "sampling.top_p": (frozenset({SWEEP}), BEYOND),
    "sampling.stop": (frozenset({SWEEP}), BEYOND),
    "sampling.seed": (frozenset({SWEEP}), BEYOND),
    "sampling.extra": (frozenset({SWEEP}), BEYOND),
}


def subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[name]


def flags(command: str) -> set[str]:
    """Every option string of ``maslab <command>`` (aliases too), --help aside."""
    return {
        flag
        for action in subcommand(command)._actions
        if not isinstance(action, argparse._HelpAction)
        for flag in action.option_strings
    }


def canonical_flag(flag: str) -> str:
    return FLAG_NAMES.get(flag, flag.removeprefix("--").replace("-", "_"))


def cli_options() -> set[str]:
    return {canonical_flag(flag) for flag in flags("run")}


def python_options() -> set[str]:
    """evaluate's and aevaluate's parameters, their ``**options`` read from its TypedDict."""
    signature = inspect.signature(maslab.aevaluate)
    assert signature.parameters == inspect.signature(maslab.evaluate).parameters
    named = {p.name for p in signature.parameters.values() if p.kind != p.VAR_KEYWORD}
    (keywords,) = (p for p in signature.parameters.values() if p.kind == p.VAR_KEYWORD)
    (typed_dict,) = typing.get_args(typing.get_type_hints(maslab.aevaluate)[keywords.name])
    return named | set(typed_dict.__annotations__)


def model_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """The keys a pydantic model takes, a list of models' entries as ``key[].entry_key``, less
    those the sweep refuses there."""
    refused = NOT_IN_AN_ENTRY if prefix else NOT_IN_A_SWEEP
    keys = set()
    for name, field in model.model_fields.items():
        (entry, *_) = typing.get_args(field.annotation) or (None,)
        if isinstance(entry, type) and issubclass(entry, BaseModel):
            keys |= model_keys(entry, f"{prefix}{name}[].")
        elif name not in refused:
            keys.add(prefix + name)
    return keys


def sweep_options() -> set[str]:
    keys = model_keys(Sweep)
    assert "sampling" in keys  # a mapping the Sampling model checks: its keys are the options
    keys = (keys - {"sampling"}) | {f"sampling.{key}" for key in Sampling.model_fields}
    return {SWEEP_NAMES.get(key, key.split("[].")[-1]) for key in keys}


def test_the_keywords_spell_the_options_model_exactly():
    """RunKeywords (for type checkers) and RunOptions (the definition): the same names, the
    same types."""
    assert typing.get_type_hints(RunKeywords) == {
        name: field.annotation for name, field in RunOptions.model_fields.items()
    }


def test_run_config_takes_exactly_the_options_model():
    with pytest.raises(TypeError, match="unexpected keyword argument 'limt'"):
        harness.run_config("vanilla", "arith", "scripted:echo", limt=3)
    with pytest.raises(MaslabError, match="limit"):
        harness.run_config("vanilla", "arith", "scripted:echo", limit=0)


def test_each_surface_has_every_option_of_the_model():
    """Every RunOptions field (and the method, benchmark and model) on each surface, unless
    :data:`ONLY_ON` says why not; and no surface has an option the model lacks, beyond those
    :data:`ONLY_ON` lists (how a run is executed or shown, not what it is)."""
    model = {"method", "benchmark", "model", *RunOptions.model_fields}
    for surface, names in (
        (CLI, cli_options()), (PYTHON, python_options()), (SWEEP, sweep_options())
    ):  # fmt: skip
        expected = {o for o in model if surface in ONLY_ON.get(o, (EVERYWHERE, ""))[0]}
        assert expected <= names, f"{surface} lacks {sorted(expected - names)}"
        assert names <= model | ONLY_ON.keys(), f"{surface} has {sorted(names - model)}"


def test_run_options_are_the_same_on_the_cli_in_python_and_in_a_sweep_file():
    surfaces = {CLI: cli_options(), PYTHON: python_options(), SWEEP: sweep_options()}
    where = {
        option: frozenset(s for s, names in surfaces.items() if option in names)
        for option in set().union(*surfaces.values())
    }
    expected = {option: ONLY_ON.get(option, (EVERYWHERE, ""))[0] for option in where}
    differ = {o: sorted(s) for o, s in where.items() if s != expected[o]}
    assert not differ, f"options missing from a surface (option: the surfaces it is on): {differ}"
    assert not ONLY_ON.keys() - where.keys(), "ONLY_ON names options no surface has"
    assert {"max_calls", "max_sample_tokens", "max_sample_seconds", "shuffle"} <= where.keys()


def test_the_sweep_command_takes_what_the_sweep_file_leaves_to_it():
    """Each option :data:`ONLY_ON` leaves to ``maslab sweep``'s command line is there."""
    left = {o for o, (_, why) in ONLY_ON.items() if SWEEP_COMMAND in why}
    assert left == {"imports", "otel", "backend", "address", "workers", "shards", "progress"}
    assert left <= {canonical_flag(flag) for flag in flags("sweep")}


def run_action(name: str) -> argparse.Action:
    """The action of ``maslab run``'s flag for the option ``name``."""
    (action,) = (a for a in subcommand("run")._actions if flag(name) in a.option_strings)
    return action


@pytest.mark.parametrize("name", RunOptions.model_fields)
def test_each_flag_is_derived_from_its_option(name):
    """Its help is the option's description, and it parses into the option."""
    action = run_action(name)
    assert action.dest == name
    description = RunOptions.model_fields[name].description
    assert description and action.help and action.help.startswith(plain_text(description))


def test_the_flags_defaults_are_the_options_defaults():
    args = subcommand("run").parse_args(["--method", "vanilla", "--benchmark", "arith"])
    assert RunOptions.model_validate(run_keywords(args)) == RunOptions()


def test_the_special_flags_keep_their_spellings():
    parse = subcommand("run").parse_args
    base = ["--method", "vanilla", "--benchmark", "arith"]
    args = parse([*base, "--config", "a=1", "--config", "b=2", "--model-role", "judge=x:y",
                  "--bench-option", "size=3", "--evaluator-option", "k=v", "--shard", "1/2",
                  "--epochs", "3", "--no-native", "--cache", "c.sqlite"])  # fmt: skip
    keywords = run_keywords(args)
    assert keywords["config"] == ["a=1", "b=2"] and keywords["model_roles"] == ["judge=x:y"]
    assert keywords["bench_options"] == ["size=3"] and keywords["evaluator_options"] == ["k=v"]
    assert (keywords["shard"], keywords["repeats"], keywords["native"]) == ("1/2", 3, False)
    assert str(keywords["cache"]) == "c.sqlite"
    assert run_keywords(parse([*base, "--no-cache"]))["cache"] is False
    with pytest.raises(SystemExit):  # argparse checks the model's bounds: 0 to 2
        parse([*base, "--temperature", "3"])


# Each option's value in a sweep file (not its default), with what it needs beside it; the
# method whose entry takes it.
SAMPLES: dict[str, tuple[str, dict[str, Any]]] = {
    "split": ("vanilla", {"split": "dev"}),
    "data": ("vanilla", {"data": "tasks.jsonl"}),
    "limit": ("vanilla", {"limit": 2}),
    "shuffle": ("vanilla", {"shuffle": True}),
    "repeats": ("vanilla", {"repeats": 2}),
    "seed": ("vanilla", {"seed": 7}),
    "config": ("llm_debate", {"config": {"agents": 2}}),
    "model_roles": ("mad", {"model_roles": {"judge": "scripted:echo"}}),
    "bench_options": ("vanilla", {"bench_options": {"difficulty": 4}}),
    "temperature": ("vanilla", {"temperature": 0.1}),
    "max_tokens": ("vanilla", {"max_tokens": 64}),
    "evaluator": ("vanilla", {"evaluator": "exact"}),
    "judge_model": ("vanilla", {"evaluator": "llm_judge", "judge_model": "scripted:echo"}),
    "evaluator_options": (
        "vanilla",
        {
            "evaluator": "behaviour_coding",
            "evaluator_options": {"judge_a": "scripted:echo", "judge_b": "scripted:echo"},
        },
    ),
    "max_calls": ("vanilla", {"max_calls": 1}),
    "max_sample_tokens": ("vanilla", {"max_sample_tokens": 100}),
    "max_sample_seconds": ("vanilla", {"max_sample_seconds": 5.0}),
    "concurrency": ("vanilla", {"concurrency": 3}),
    "scheduler": ("vanilla", {"scheduler": "fcfs"}),
    "endpoints": ("vanilla", {"endpoints": "endpoints.yaml"}),
    "cache": ("vanilla", {"cache": "cache.sqlite"}),
    "strict_sandbox": ("vanilla", {"strict_sandbox": True}),
    "unsafe_no_sandbox": ("vanilla", {"unsafe_no_sandbox": True}),
    "native": ("vanilla", {"native": False}),
    "log_to": ("vanilla", {"log_to": "mlflow"}),
    "optimize_on": ("dylan", {"optimize_on": "dev"}),
    "optimize_limit": ("dylan", {"optimize_on": "dev", "optimize_limit": 2}),
}
# run options a sweep cell does not set: its directory is named by the sweep's out and labels
UNSET = {"out", *NOT_IN_A_SWEEP}


@pytest.mark.parametrize(
    ("name", "where"),
    [
        (name, where)
        for name in sorted(RunOptions.model_fields.keys() - UNSET)
        for where in (("top",) if name in SHARED else ("top", "methods", "benchmarks"))
    ],
)
def test_a_sweep_that_sets_an_option_builds_its_cells_config(tmp_path, monkeypatch, name, where):
    """Set at the top of the file, or in a method or benchmark entry (at the top only, for the
    options the cells share), the option reaches the cell's RunConfig as in ``run_config``."""
    assert name in SAMPLES, f"give the new option {name} a value in SAMPLES"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "endpoints.yaml").write_text("local:\n  - base_url: http://127.0.0.1:9/v1\n")
    method, options = SAMPLES[name]
    file: dict[str, Any] = {"models": ["scripted:echo"], "methods": [{"name": method}],
                            "benchmarks": [{"name": "arith"}]}  # fmt: skip
    (file if where == "top" else file[where][0]).update(options)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(file))
    (cell,) = load_sweep(sweep).cells()
    out = cell.config.out
    assert cell.config == harness.run_config(method, "arith", "scripted:echo", out=out, **options)
    assert cell.config != harness.run_config(method, "arith", "scripted:echo", out=out)


@pytest.mark.parametrize(
    ("entry", "refused"),
    [({}, "shard"), *(({"name": "vanilla"}, key) for key in sorted(NOT_IN_AN_ENTRY))],
)
def test_a_sweep_refuses_the_options_a_sweep_or_an_entry_does_not_set(tmp_path, entry, refused):
    file: dict[str, Any] = {"models": ["scripted:echo"], "methods": ["vanilla"],
                            "benchmarks": ["arith"]}  # fmt: skip
    if entry:
        file["methods"] = [
            {**entry, refused: SAMPLES.get(refused, ("", {refused: "x"}))[1][refused]}
        ]
    else:
        file[refused] = "1/2"
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(file))
    where = "an entry" if entry else "a sweep"
    with pytest.raises(MaslabError, match=f"sweep.yaml:\\d+: .*{refused} is not for {where}"):
        load_sweep(sweep)


def test_a_ray_workers_resources_are_per_setting_the_runs_share(tmp_path):
    """Two runs that differ in an option the cells share (the scheduler here) get their own
    model pool and call gate on a Ray worker, as they would locally."""
    worker = ShardWorker(0, 1, None)
    configs = [
        harness.run_config("vanilla", "arith", "scripted:echo", scheduler=policy, cache=False)
        for policy in ("fcfs", "progress")
    ]
    method, evaluator = get_method("vanilla"), get_evaluator("numeric")
    gates = [worker.resources(RunSpec(c, method, evaluator, None, None))[1] for c in configs]
    assert gates[0] is not gates[1]
