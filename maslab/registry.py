"""Name -> class registries with explicit names, plugin discovery and helpful lookup errors."""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from maslab.errors import ConfigError

C = TypeVar("C", bound=type)


class Registry(Generic[C]):
    """Classes registered under explicit names; lookups never guess by substring.

    ``package`` is imported on first lookup (it registers the bundled classes); installed
    distributions can add more through the entry-point group ``maslab.<kind>s``.
    """

    def __init__(self, kind: str, package: str) -> None:
        self.kind = kind
        self.package = package
        self._classes: dict[str, C] = {}
        self._discovered = False

    def register(self, name: str) -> Callable[[C], C]:
        """Class decorator; sets ``cls.name``."""

        def add(cls: C) -> C:
            existing = self._classes.get(name)
            if existing is not None and existing.__qualname__ != cls.__qualname__:
                raise ConfigError(f"{self.kind} name '{name}' is taken by {existing.__qualname__}")
            cls.name = name
            self._classes[name] = cls
            return cls

        return add

    def _discover(self) -> None:
        if self._discovered:
            return
        self._discovered = True
        importlib.import_module(self.package)
        for plugin in entry_points(group=f"maslab.{self.kind}s"):
            try:
                plugin.load()
            except Exception as exc:  # third-party code: name the plugin, not our traceback
                problem = (str(exc).splitlines() or [type(exc).__name__])[0]
                raise ConfigError(
                    f"{self.kind} plugin '{plugin.name}' ({plugin.value}) failed to load: "
                    f"{type(exc).__name__}: {problem}; fix or uninstall it"
                ) from exc

    def names(self) -> list[str]:
        self._discover()
        return sorted(self._classes)

    def get(self, name: str) -> C:
        """The class registered as ``name``; a one-line error with close matches otherwise."""
        if not isinstance(name, str):
            raise ConfigError(f"a {self.kind} name is a string, got {type(name).__name__}")
        self._discover()
        if name in self._classes:
            return self._classes[name]
        close = difflib.get_close_matches(name, self._classes, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        known = ", ".join(sorted(self._classes))
        raise ConfigError(f"unknown {self.kind} '{name}'; {hint}known: {known}")
