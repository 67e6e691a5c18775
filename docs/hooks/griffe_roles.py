"""A griffe extension for the API reference: the docstrings' Sphinx roles as links.

maslab's docstrings name other objects with Sphinx roles (``:class:`Context```,
``:func:`~maslab.sandbox.arun_python```). Markdown has no such roles, so before mkdocstrings
renders a docstring each role becomes a cross-reference that autorefs resolves when the target
is on a page of the site and leaves as plain code when it is not (an optional reference: no
warning). A name is resolved in the scope of the object whose docstring holds it; ``~`` shows
only its last part, as in Sphinx. A paragraph ending in ``::`` (reStructuredText's mark for the
literal block after it, which Markdown shows as code anyway) ends in one colon.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj|const):`(~?)([\w.]+)(\(\))?`")
LITERAL = re.compile(r"(?<=[^\s:])::\n(?=\s*\n)")


def _target(obj: griffe.Object, name: str) -> str | None:
    """The full path ``name`` stands for in ``obj``'s scope, or None."""
    if name.startswith("maslab."):
        return name
    head, _, rest = name.partition(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            resolved = scope.resolve(head)
        except (griffe.NameResolutionError, KeyError, ValueError):
            scope = scope.parent
            continue
        return f"{resolved}.{rest}" if rest else resolved
    return None


def _link(obj: griffe.Object, match: re.Match[str]) -> str:
    short, name, call = match.group(1), match.group(2), match.group(3) or ""
    shown = html.escape((name.rsplit(".", 1)[-1] if short else name) + call)
    target = _target(obj, name)
    if target is None:
        return f"<code>{shown}</code>"
    return f'<autoref identifier="{html.escape(target)}" optional><code>{shown}</code></autoref>'


class SphinxRoles(griffe.Extension):
    """Rewrites the roles in every docstring of a loaded package."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg, set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None and ":" in obj.docstring.value:
            value = ROLE.sub(lambda m: _link(obj, m), obj.docstring.value)
            obj.docstring.value = LITERAL.sub(":\n", value)
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, seen)  # type: ignore[arg-type]
