"""Name -> class registries with explicit names, plugin discovery and helpful lookup errors."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
from collections.abc import Callable
from typing import ClassVar, Generic, Protocol, TypeVar

from maslab.errors import ConfigError
from maslab.plugins import PluginGroup


class _Named(Protocol):
    """What a registry holds the classes of: a registered name, set by :meth:`Registry.register`."""

    name: ClassVar[str]


C = TypeVar("C", bound=type[_Named])


class Registry(Generic[C]):
    """Classes registered under explicit names; lookups never guess by substring.

    The bundled classes live in the modules of ``package``, each registering its own: a lookup
    imports the module of the name asked for (``maslab.methods.llm_debate`` for
    ``llm_debate``; a module of a family package too, ``maslab.methods.graph_designers.
    agentprune`` for ``agentprune``), and a listing, or a name no module is called, imports
    them all. Installed
    distributions add more through the entry-point group ``group`` (by default
    ``maslab.<kind>s``; see :mod:`maslab.plugins`), loaded on the first lookup either way.
    """

    def __init__(self, kind: str, package: str, group: str | None = None) -> None:
        self.kind = kind
        self.package = package
        self._classes: dict[str, C] = {}
        self._plugins = PluginGroup(group or f"maslab.{kind}s", self._add_plugin)
        self._discovered = False

    def register(self, name: str) -> Callable[[C], C]:
        """Class decorator; sets ``cls.name``."""

        def add(cls: C) -> C:
            if not cls.__module__.startswith(f"{self.package}."):
                self._import_bundled(name)  # a bundled class keeps its name, imported or not
            existing = self._classes.get(name)
            if existing is not None and existing.__qualname__ != cls.__qualname__:
                raise ConfigError(f"{self.kind} name '{name}' is taken by {existing.__qualname__}")
            cls.name = name
            self._classes[name] = cls
            return cls

        return add

    def _add_plugin(self, name: str, cls: C) -> None:
        """Register a plugin's class under its entry point's name, unless its import did."""
        if not isinstance(cls, type):
            raise TypeError(f"{cls!r} is not a {self.kind} class")
        if cls not in self._classes.values():
            self.register(name)(cls)

    def _modules(self) -> dict[str, str]:
        """Every bundled module by its last name: the package's own, and those of its family
        packages (a package whose ``__init__`` registers nothing, several classes sharing its
        code, each in a module named after it)."""
        package = importlib.import_module(self.package)
        found: dict[str, str] = {}
        for module in pkgutil.iter_modules(package.__path__):
            found[module.name] = f"{self.package}.{module.name}"
            if module.ispkg:
                inner = importlib.util.find_spec(found[module.name])
                for sub in pkgutil.iter_modules(inner.submodule_search_locations if inner else []):
                    found.setdefault(sub.name, f"{found[module.name]}.{sub.name}")
        return found

    def _discover(self) -> None:
        """Import every bundled module and load the plugins."""
        if not self._discovered:
            for module in self._modules().values():
                importlib.import_module(module)
            self._discovered = True
        self._plugins.load()

    def _find(self, name: str) -> None:
        """Import the bundled module named ``name``, if there is one (start-up stays cheap: a
        run imports its own method, not all of them), then load the plugins."""
        self._import_bundled(name)
        self._plugins.load()

    def _import_bundled(self, name: str) -> None:
        """Import the bundled module named ``name``, if there is one and it is not yet in."""
        if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in self._classes:
            module = self._modules().get(name)
            if module is not None:
                importlib.import_module(module)

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._classes)

    def get(self, name: str) -> C:
        """The class registered as ``name``; a one-line error with close matches otherwise."""
        if not isinstance(name, str):
            raise ConfigError(f"a {self.kind} name is a string, got {type(name).__name__}")
        self._find(name)
        if name in self._classes:
            return self._classes[name]
        self._discover()
        if name in self._classes:
            return self._classes[name]
        close = difflib.get_close_matches(name, self._classes, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        known = ", ".join(sorted(self._classes))
        raise ConfigError(f"unknown {self.kind} '{name}'; {hint}known: {known}")
