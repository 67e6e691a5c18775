"""BFCL's single-turn ground truth as an answer (test helper, not tests)."""

from __future__ import annotations

import json
from typing import Any

from maslab.core.task import Task


def single_answer(task: Task) -> list[dict[str, Any]]:
    """The first possible answer as calls: an option of ``""`` omits an optional parameter."""
    parameters = {tool["name"]: tool["parameters"] for tool in task.tools}
    calls = []
    for possible in json.loads(task.gold):
        ((name, options),) = possible.items()
        schema = parameters[name]
        arguments = {}
        for key, values in options.items():
            given = [value for value in values if value != ""]
            optional = "" in values and key not in schema["required"]
            if given and key in schema["properties"] and not optional:
                arguments[key] = _first(given[0])
        calls.append({"name": name, "arguments": arguments})
    return calls


def _first(value: Any) -> Any:
    """A possible object holds lists of possible values per key: take the first of each."""
    if isinstance(value, dict):
        return {key: values[0] for key, values in value.items() if values and values[0] != ""}
    if isinstance(value, list):
        return [_first(item) if isinstance(item, dict) else item for item in value]
    return value
