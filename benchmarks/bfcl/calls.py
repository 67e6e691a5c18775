"""Function calls read from text: BFCL's call strings and the answers agents give.

A call string such as ``mv(source='a', destination='b')`` or ``sort('final_report.pdf')`` is
parsed with :mod:`ast` and only its argument nodes are read, each with
:func:`ast.literal_eval`: nothing is ever evaluated as code. Positional arguments take the
names of the function's parameters in order (its signature or its doc).

The answer contract: a single-turn answer is a JSON array of ``{"name": str, "arguments":
object}`` in call order, or a Python-syntax list of calls (``[f(a=1), g(b='x')]``); a
multi-turn answer is a JSON array with one such array per turn.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```$", re.DOTALL)
ParameterOrder = Mapping[str, Sequence[str]]
"""Function name -> its parameter names in order, for positional arguments."""


@dataclass(frozen=True)
class Call:
    """One function call: its name and its arguments by parameter name."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


def parse_call(text: str, order: ParameterOrder) -> Call:
    """The call ``text`` writes (``f(a=1)``, ``f('x')``, ``pkg.f(a=[1, 2])``); ValueError if it is
    not one call with literal arguments."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a call: {text!r} ({exc.msg})") from None
    return _call(node, order)


def parse_calls(text: str, order: ParameterOrder) -> list[Call]:
    """The calls of a Python-syntax list (or a single call); ValueError if it is not one."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a list of calls ({exc.msg})") from None
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    return [_call(item, order) for item in items]


def read_answer(text: str, order: ParameterOrder) -> list[Call] | None:
    """The calls of a single-turn answer (JSON or Python syntax); None if it holds none readable."""
    text = _unfenced(text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            return parse_calls(text, order)
        except ValueError:
            return None
    try:
        return calls_of(data)
    except ValueError:
        return None


def read_turns(text: str) -> list[list[Call]] | None:
    """The calls of a multi-turn answer, turn by turn; None if it is not the contract's JSON."""
    try:
        data = json.loads(_unfenced(text))
        if not isinstance(data, list):
            return None
        return [calls_of(turn) for turn in data]
    except (json.JSONDecodeError, ValueError):
        return None


def calls_of(data: Any) -> list[Call]:
    """Calls from the contract's JSON data: a list of ``{"name", "arguments"}``."""
    if not isinstance(data, list):
        raise ValueError("not a list of calls")
    calls = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError(f"not a call: {item!r}")
        arguments = item.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ValueError(f"arguments of {item['name']} are not an object")
        calls.append(Call(item["name"], arguments))
    return calls


def _unfenced(text: str) -> str:
    text = text.strip()
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def _call(node: ast.expr, order: ParameterOrder) -> Call:
    if not isinstance(node, ast.Call):
        raise ValueError(f"not a call: {ast.unparse(node)!r}")
    name = _dotted(node.func)
    names = list(order.get(name, ()))
    if len(node.args) > len(names):
        raise ValueError(f"{name} takes at most {len(names)} positional arguments")
    arguments: dict[str, Any] = {}
    for parameter, value in zip(names, node.args, strict=False):
        arguments[parameter] = _literal(value)
    for keyword in node.keywords:
        if keyword.arg is None or keyword.arg in arguments:
            raise ValueError(f"{name}: **kwargs or a repeated argument")
        arguments[keyword.arg] = _literal(keyword.value)
    return Call(name, arguments)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise ValueError(f"not a function name: {ast.unparse(node)!r}")


def _literal(node: ast.expr) -> Any:
    try:
        return _plain(ast.literal_eval(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"not a literal: {ast.unparse(node)!r}") from None


def _plain(value: Any) -> Any:
    """JSON's shapes: tuples as lists (BFCL's checker does the same), inside containers too."""
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value
