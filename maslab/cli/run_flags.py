"""``maslab run``'s run-option flags, derived from :class:`~maslab.harness.options.RunOptions`:
each field is ``--its-name-with-dashes``, its type picks the argparse type or action, its
default is the flag's and its description, as :func:`plain_text`, is the flag's help.
:data:`SPELLING`, :data:`ALIASES` and :data:`METAVARS` hold the few flags spelled otherwise."""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic.fields import FieldInfo

from maslab.cli.console import number, plain_text
from maslab.harness.options import RunKeywords, RunOptions

# options given once per item (the field takes a sequence of KEY=VALUE strings): a singular flag
SPELLING = {
    "model_roles": "--model-role",
    "bench_options": "--bench-option",
    "evaluator_options": "--evaluator-option",
}
ALIASES = {"repeats": ("--epochs",)}
METAVARS = {
    "model_roles": "NAME=MODEL",
    "optimize_on": "SPLIT",
    "shard": "I/N",
    "limit": "N",
    "optimize_limit": "N",
    "data": "FILE",
    "endpoints": "FILE",
    "cache": "FILE",
    "out": "DIR",
}


def flag(name: str) -> str:
    """The flag of the option ``name``."""
    return SPELLING.get(name, "--" + name.replace("_", "-"))


def _kinds(field: FieldInfo) -> tuple[Any, ...]:
    """The types a field's annotation allows, None left out."""
    annotation = field.annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(k for k in typing.get_args(annotation) if k is not type(None))
    return (annotation,)


def _number(kind: type, field: FieldInfo) -> Callable[[str], float]:
    """An argparse type for an int or float field, checking its bounds (``ge``, ``gt``, ``le``)."""
    low, high, above = None, None, False
    for rule in field.metadata:
        low = getattr(rule, "ge", low)
        if (gt := getattr(rule, "gt", None)) is not None:
            low, above = gt, True
        high = getattr(rule, "le", high)
    return kind if low is None else number(kind, low, high, above=above)


def _arguments(name: str, field: FieldInfo) -> dict[str, Any]:
    """The keywords of ``add_argument`` for the option ``name``."""
    kinds = _kinds(field)
    default = field.default
    text = plain_text(field.description or "")
    arguments: dict[str, Any] = {"dest": name, "default": default, "help": text}
    if name in METAVARS:
        arguments["metavar"] = METAVARS[name]
    if kinds == (bool,):
        action = argparse.BooleanOptionalAction if default else "store_true"
        return {**arguments, "action": action}
    if bool in kinds:  # on (the default), a file, or off (--no-NAME, see add_run_flags)
        return {**arguments, "type": Path}
    if any(typing.get_origin(k) is Sequence for k in kinds):  # repeated KEY=VALUE
        return {"metavar": "KEY=VALUE", **arguments, "action": "append"}
    if typing.get_origin(kinds[0]) is Literal:
        arguments["choices"] = typing.get_args(kinds[0])
    elif Path in kinds:
        arguments["type"] = Path
    elif kinds[0] in (int, float):
        arguments["type"] = _number(kinds[0], field)
    if default is not None:
        arguments["help"] += f" (default {default})"
    return arguments


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """A flag for every run option."""
    for name, field in RunOptions.model_fields.items():
        p.add_argument(flag(name), *ALIASES.get(name, ()), **_arguments(name, field))
        if bool in _kinds(field) and len(_kinds(field)) > 1:  # a bool or a file: its off
            off = f"--no-{flag(name).removeprefix('--')}"
            p.add_argument(
                off, dest=name, action="store_const", const=False, help=f"{flag(name)} off"
            )


def run_keywords(args: argparse.Namespace) -> RunKeywords:
    """The run options that :func:`add_run_flags`' flags parsed into ``args``."""
    return typing.cast(RunKeywords, {name: getattr(args, name) for name in RunOptions.model_fields})


FLAGS = {name: flag(name) for name in RunOptions.model_fields}
"""Each run option as ``maslab run`` spells it, for error messages."""
