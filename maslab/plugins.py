"""Plugins: what installed distributions add through entry points, and modules named on the
command line (``--import``).

A distribution adds methods, benchmarks, evaluators, model providers or tools by declaring
entry points in the groups ``maslab.methods``, ``maslab.benchmarks``, ``maslab.evaluators``,
``maslab.providers`` and ``maslab.tools``. An entry point names either a module, whose
import registers things with the usual decorators (``@register_method("name")``, ...), or the
object itself (a class; for a provider or a tool, its factory), which is registered under the
entry point's name. A plugin that fails to load is skipped with a one-line warning naming it,
its group and its distribution; everything else keeps working.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable
from functools import cache
from importlib.metadata import EntryPoints, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from maslab.errors import ConfigError, MaslabError
from maslab.secrets import redact

log = logging.getLogger(__name__)
# top-level package of every plugin loaded so far -> the distribution that installed it
_DISTRIBUTIONS: dict[str, str] = {}


def describe(exc: BaseException) -> str:
    """``Type: first line of the message`` (just the type when there is no message)."""
    first = (str(exc).splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


class _EntryPointGroups(Protocol):
    """What ``entry_points()`` returns: ``EntryPoints`` (3.12+), ``SelectableGroups`` before."""

    def select(self, *, group: str) -> EntryPoints: ...


@cache
def _installed_entry_points() -> _EntryPointGroups:
    """Every installed distribution's entry points, read once per process (reading them is a
    walk over every distribution's metadata: once, not once per group)."""
    return entry_points()


class PluginGroup:
    """The entry points of one group, loaded on the first :meth:`load` and never again.

    ``add(name, obj)`` registers an entry point's object (anything callable: a class, a
    factory); it raises to refuse one, which is then reported like a failed import.
    """

    def __init__(self, group: str, add: Callable[[str, Any], object]) -> None:
        self.group = group
        self.add = add
        self._loaded = False

    def load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for point in _installed_entry_points().select(group=self.group):
            dist = point.dist.name if point.dist is not None else None
            try:
                loaded = point.load()
                if not isinstance(loaded, ModuleType):
                    if not callable(loaded):
                        raise TypeError(f"{point.value} is neither a module nor callable")
                    self.add(point.name, loaded)
            except Exception as exc:  # third-party code: one line naming it, then carry on
                log.warning(
                    "warning: plugin '%s' (%s, from %s) not loaded: %s",
                    point.name, self.group, dist or "an unknown distribution",
                    redact(describe(exc)),
                )  # fmt: skip
                continue
            if dist is not None:
                _DISTRIBUTIONS[point.module.partition(".")[0]] = dist


def origin(obj: object) -> str:
    """Where a registered class or factory comes from: ``bundled`` (maslab itself), the
    distribution of the plugin that brought it, or ``module <name>`` (``--import``, a script)."""
    module = getattr(obj, "__module__", None) or "?"
    top = module.partition(".")[0]
    if top == "maslab":
        return "bundled"
    return _DISTRIBUTIONS.get(top, f"module {module}")


def import_module(name: str) -> ModuleType:
    """Import a user module so that what it registers can be named: a path to a ``.py`` file,
    or a dotted name (searched in the current directory too). A one-line :class:`ConfigError`
    when it fails."""
    what = f"--import {name}"
    if not name.endswith(".py"):
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            return importlib.import_module(name)
        except (Exception, SystemExit) as exc:
            raise ConfigError(f"{what}: {_failure(exc)}") from None
    path = Path(name).resolve()
    if not path.is_file():
        raise ConfigError(f"{what}: file not found")
    module_name = path.stem
    if (known := sys.modules.get(module_name)) is not None:
        if getattr(known, "__file__", None) == str(path):
            return known
        raise ConfigError(f"{what}: a module named '{module_name}' is already imported; rename it")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{what}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # pydantic and dataclasses look classes' modules up here
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        del sys.modules[module_name]
        raise ConfigError(f"{what}: {_failure(exc)}") from None
    return module


def import_function(spec: str, what: str) -> Callable[..., Any]:
    """The callable ``module:name`` or ``path/to/file.py:name`` names (``name`` may be dotted,
    ``Class.method``); a one-line :class:`ConfigError` naming ``what`` it is for (``evaluator``)
    when it cannot be imported."""
    where, _, qualname = spec.rpartition(":")
    if not where or not qualname:
        raise ConfigError(f"{what} {spec!r}: name a function as module:function")
    try:
        module = import_module(where)
    except ConfigError as exc:  # its words, less the --import it names
        why = str(exc).removeprefix(f"--import {where}: ")
        raise ConfigError(f"{what} {spec}: {why}") from None
    found: Any = module
    try:
        for name in qualname.split("."):
            found = getattr(found, name)
    except AttributeError:
        raise ConfigError(f"{what} {spec}: {where} has no {qualname}") from None
    return found


def _failure(exc: BaseException) -> str:
    """Why importing a module failed, in words (an exit is no error type a user would know)."""
    if isinstance(exc, SystemExit):
        return f"it exits while it is imported (sys.exit({exc.code!r})); import nothing that exits"
    return str(exc) if isinstance(exc, MaslabError) else describe(exc)
