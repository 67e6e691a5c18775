"""Load YAML files into pydantic models, reporting mistakes as ``file:line: field: problem``."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import TypeAdapter, ValidationError

from maslab.errors import ConfigError

T = TypeVar("T")
Loc = tuple[Any, ...]


def _node_lines(node: yaml.Node, loc: Loc, out: dict[Loc, int]) -> None:
    """Map every key path in a composed YAML tree to its 1-based line."""
    out[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*loc, key.value)
            _node_lines(value, child, out)
            out[child] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _node_lines(item, (*loc, i), out)


def _line_of(loc: Loc, lines: dict[Loc, int]) -> int | None:
    for end in range(len(loc), -1, -1):
        key = tuple(str(p) if not isinstance(p, int) else p for p in loc[:end])
        if key in lines:
            return lines[key]
    return None


def _field(loc: Loc) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def load_yaml(path: str | Path, schema: type[T] | TypeAdapter[T]) -> T:
    """Parse ``path`` and validate it against ``schema`` (a pydantic model or TypeAdapter).

    Raises :class:`ConfigError` with a one-line ``file:line: field: problem`` message.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from None
    lines: dict[Loc, int] = {}
    if node is not None:
        _node_lines(node, (), lines)
    adapter = schema if isinstance(schema, TypeAdapter) else TypeAdapter(schema)
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function")))
        line = _line_of(loc, lines)
        where = f"{path}:{line}" if line else str(path)
        field = _field(loc)
        raise ConfigError(f"{where}: {field + ': ' if field else ''}{_problem(err)}") from None


def _problem(err: Any) -> str:
    """A pydantic error's text on one line; an error a validator raised without the
    ``Value error,`` prefix pydantic adds."""
    error = err.get("ctx", {}).get("error")
    return " ".join(str(error if isinstance(error, ValueError) else err["msg"]).split())


def validation_message(exc: ValidationError, what: str = "") -> str:
    """One line for a pydantic error on in-memory input (no file to point at); ``what`` names
    the input, when the caller does not."""
    err = exc.errors()[0]
    field = _field(tuple(err["loc"]))
    return f"{what + ': ' if what else ''}{field + ': ' if field else ''}{_problem(err)}"


def parse_value(text: str) -> Any:
    """A command-line value as YAML reads it: ``3`` -> 3, ``true`` -> True, ``a,b`` stays text."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _override_pairs(
    overrides: Mapping[str, Any] | Iterable[str], what: str, prefix: str = ""
) -> Iterator[tuple[str, Any]]:
    """(dotted path, value) pairs: ``key.path=value`` strings (values read as YAML), or a
    mapping whose keys may be dotted and whose nested mappings merge into the base."""
    if isinstance(overrides, Mapping):
        for key, value in overrides.items():
            path = f"{prefix}{key}"
            if isinstance(value, Mapping) and value:
                yield from _override_pairs(value, what, f"{path}.")
            else:
                yield path, value
        return
    for item in [overrides] if isinstance(overrides, str) else overrides:
        path, sep, raw = item.partition("=")
        if not sep or not path:
            raise ConfigError(f"{what}: '{item}' is not key=value")
        yield path, parse_value(raw)


def apply_overrides(
    base: dict[str, Any], overrides: Mapping[str, Any] | Iterable[str], what: str
) -> dict[str, Any]:
    """Apply overrides to a copy of ``base``: ``key.path=value`` strings, or a mapping (dotted
    keys or nested mappings); list items by index (``agents.0.model=openai:gpt-4o``). Unknown
    keys are left for validation to reject."""
    result = copy.deepcopy(base)
    for path, value in _override_pairs(overrides, what):
        node: Any = result
        keys = path.split(".")
        for i, key in enumerate(keys):
            last = i == len(keys) - 1
            if isinstance(node, list):
                if not key.isdigit() or int(key) >= len(node):
                    raise ConfigError(f"{what}: '{path}': no item {key} (the list has {len(node)})")
                index: Any = int(key)
            elif isinstance(node, dict):
                index = key
                if not last and node.get(key) is None:  # absent, or a default of none: a map
                    node[key] = {}
            else:
                raise ConfigError(f"{what}: '{path}': '{keys[i - 1]}' is not a mapping or list")
            if last:
                node[index] = copy.deepcopy(value)
            else:
                node = node[index]
    return result
