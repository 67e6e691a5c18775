"""BFCL's wheel in the data cache: its data files, and its environment classes imported from it.

The wheel is read as a zip archive and never installed: its declared dependencies are heavy and
pinned, while the environment classes maslab runs need only the standard library and mpmath.
A finder on ``sys.meta_path`` serves the few ``bfcl_eval`` modules those classes need (empty
package ``__init__`` files and the ``func_source_code`` modules) from the cached wheel, and
nothing else of the package.
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import json
import sys
import zipfile
import zipimport
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from maslab.bench.data import PypiFile, register_pypi_file
from maslab.errors import ConfigError

WHEEL = register_pypi_file(
    PypiFile(
        name="bfcl",
        project="bfcl-eval",
        version="2026.3.23",
        filename="bfcl_eval-2026.3.23-py3-none-any.whl",
        sha256="3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
    )
)
ENV_PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
_PACKAGES = frozenset(tuple(ENV_PACKAGE.split(".")[: i + 1]) for i in range(4))


def wheel_path() -> Path:
    """The cached wheel; a one-line :class:`ConfigError` saying how to get it when absent."""
    if not WHEEL.path.is_file():
        raise ConfigError(WHEEL.missing())
    return WHEEL.path


def read_jsonl(member: str) -> list[dict[str, Any]]:
    """The records of a JSON-lines file of the wheel's ``bfcl_eval/data/`` (a fresh copy)."""
    return [json.loads(line) for line in _lines(str(wheel_path()), member)]


@functools.lru_cache(maxsize=64)
def _lines(wheel: str, member: str) -> tuple[str, ...]:
    try:
        with zipfile.ZipFile(wheel) as archive:
            text = archive.read(f"bfcl_eval/data/{member}").decode("utf-8")
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"{wheel}: cannot read bfcl_eval/data/{member} ({exc})") from None
    return tuple(line for line in text.splitlines() if line.strip())


def env_module(name: str) -> ModuleType:
    """The module ``func_source_code.<name>`` of the cached wheel, imported through
    :class:`_WheelFinder`."""
    _FINDER.wheel = wheel_path()
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    return importlib.import_module(f"{ENV_PACKAGE}.{name}")


class _WheelFinder(importlib.abc.MetaPathFinder):
    """Finds the package chain down to ``func_source_code`` and its modules in the wheel."""

    wheel: Path | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        parts = tuple(fullname.split("."))
        served = parts in _PACKAGES or (len(parts) == 5 and ".".join(parts[:4]) == ENV_PACKAGE)
        if self.wheel is None or not served:
            return None
        folder = "/".join(parts[:-1])
        importer = zipimport.zipimporter(f"{self.wheel}/{folder}/" if folder else str(self.wheel))
        return importer.find_spec(fullname)


_FINDER = _WheelFinder()
