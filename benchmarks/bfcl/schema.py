"""BFCL's function docs as standard JSON schema function specs.

BFCL writes its parameter schemas in a dialect of JSON schema: ``"dict"`` for an object,
``"float"`` for a number, ``"tuple"`` for an array, ``"any"`` for a value it checks as a string,
and an ``"optional"`` flag beside ``"required"``. :func:`function_spec` translates a doc once into
``{"name", "description", "parameters"}`` with ``parameters`` a JSON schema object; the
AST checker reads the translated schema, so the spec the agents see is the one they are scored by.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from maslab.errors import ConfigError

# BFCL's type names -> JSON schema's ("any" as BFCL checks it: a string)
TYPES = {
    "dict": "object",
    "object": "object",
    "float": "number",
    "number": "number",
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "tuple": "array",
    "any": "string",
}
# keys kept as they are: JSON schema's own meaning
_KEPT = ("description", "enum", "default", "format", "maximum", "minimum", "minItems", "maxItems")


def function_spec(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The standard spec of one BFCL function doc (its ``response`` schema is left out)."""
    parameters = translate(doc.get("parameters") or {"type": "dict", "properties": {}})
    parameters.setdefault("properties", {})
    parameters.setdefault("required", [])
    if parameters.get("type") != "object":
        raise ConfigError(f"function {doc.get('name')!r}: parameters are not an object schema")
    return {
        "name": str(doc["name"]),
        "description": str(doc.get("description", "")),
        "parameters": parameters,
    }


def translate(schema: Mapping[str, Any]) -> dict[str, Any]:
    """One BFCL schema node (and the nodes under it) in standard JSON schema."""
    kind = schema.get("type")
    if kind not in TYPES:
        raise ConfigError(f"unknown BFCL parameter type {kind!r}")
    out: dict[str, Any] = {"type": TYPES[kind]}
    out.update((key, schema[key]) for key in _KEPT if key in schema)
    if "properties" in schema:
        out["properties"] = {name: translate(node) for name, node in schema["properties"].items()}
    if "required" in schema:
        out["required"] = list(schema["required"])
    if "items" in schema:
        out["items"] = translate(schema["items"])
    return out
