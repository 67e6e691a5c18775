"""One set of run options on three surfaces: ``maslab run``'s flags, the keywords of
:func:`maslab.evaluate` / :func:`maslab.aevaluate`, and the keys of a sweep file.

Each surface's names are read from the surface itself (the argparse parser, the function
signatures, the sweep file's pydantic models), mapped to one canonical spelling (the Python
keyword), and compared. An option may be missing from a surface only when :data:`ONLY_ON` says
so, and why; so an option added to one surface and not the others fails here.
"""

from __future__ import annotations

import argparse
import inspect
import typing

import pytest
from pydantic import BaseModel

import maslab
from maslab import MaslabError
from maslab import api as harness
from maslab.cli import build_parser
from maslab.core.context import Sampling
from maslab.harness.options import RunKeywords, RunOptions
from maslab.harness.sweep import Sweep

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
    "benchmarks[].options": "bench_options",
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
    """The keys a pydantic model takes, a list of models' entries as ``key[].entry_key``."""
    keys = set()
    for name, field in model.model_fields.items():
        (entry, *_) = typing.get_args(field.annotation) or (None,)
        if isinstance(entry, type) and issubclass(entry, BaseModel):
            keys |= model_keys(entry, f"{prefix}{name}[].")
        else:
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
    assert left == {"imports", "backend", "address", "workers", "shards", "progress"}
    assert left <= {canonical_flag(flag) for flag in flags("sweep")}
