"""Defensive parsing of structured model output. Never evaluates text as code.

Models often write LaTeX inside JSON strings without escaping it: ``"\\sqrt{2}"`` is invalid
JSON, and ``"\\times"`` is valid but reads as a tab and "imes". So, before decoding, a backslash
inside a string stays a literal backslash when it starts no valid escape, when it starts ``\\b``,
``\\f`` or ``\\r`` before a letter, or when it starts ``\\n`` or ``\\t`` and the letters after
it spell a LaTeX command (``\\neq``, ``\\theta``, ``\\text...``). Any other ``\\n`` and ``\\t``
stay a newline and a tab (``"one\\ntwo"``). Math answers come first: a new line that starts with
such a name's rest (``"x = 0\\nu = 1"``) reads as LaTeX (``\\nu``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ValidationError

M = TypeVar("M", bound=BaseModel)


def as_text(value: object) -> str:
    """A reply's field as text: a string stripped; a list as its items' texts joined with ", "
    (``[14]``: "14"); any other value as JSON writes it (``true``, ``2.5``); empty for a
    missing (null) one. Never Python's own spelling ("True", "[14]", "None")."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return ", ".join(text for text in map(as_text, value) if text)
    return json.dumps(value, ensure_ascii=False)


def as_flag(value: object) -> bool:
    """A reply's yes/no field: true for ``true`` and for the strings true, yes and 1 (any case,
    any surrounding space); anything else is false."""
    if isinstance(value, str):
        return value.strip().lower() in {"true", "yes", "1"}
    return value is True


Text = Annotated[str, BeforeValidator(as_text)]
"""A field of a model's JSON reply read with :func:`as_text`."""
Flag = Annotated[bool, BeforeValidator(as_flag)]
"""A field of a model's JSON reply read with :func:`as_flag`."""

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
# A backslash and what JSON would make of it; group 1 holds a control escape and the letters
# after it, which may be a LaTeX command instead.
_ESCAPE = re.compile(r'\\(?:["\\/]|u[0-9a-fA-F]{4}|([bfnrt][A-Za-z]*))?', re.S)
_RELATIONS = (  # negated with an n prefix: \nleq, \nsubseteq, ...
    "approx", "cong", "equiv", "exists", "geq", "geqq", "geqslant", "gtr", "leftarrow",
    "Leftarrow", "leftrightarrow", "Leftrightarrow", "leq", "leqq", "leqslant", "less", "mid",
    "parallel", "prec", "preceq", "rightarrow", "Rightarrow", "shortmid", "shortparallel", "sim",
    "subset", "subseteq", "subseteqq", "succ", "succeq", "supset", "supseteq", "supseteqq",
    "triangleleft", "trianglelefteq", "triangleright", "trianglerighteq", "vdash", "vDash",
    "Vdash", "VDash",
)  # fmt: skip
# LaTeX commands whose name starts with n or t (JSON's \n and \t); "\n" + any other word is prose.
_N_T_COMMANDS = frozenset({
    "nabla", "natural", "ne", "nearrow", "neg", "negmedspace", "negthickspace", "negthinspace",
    "neq", "newcommand", "newline", "ni", "noindent", "nolimits", "nonumber", "norm",
    "normalsize", "not", "notin", "nu", "nwarrow", "tag", "tan", "tanh", "tau", "tbinom", "tfrac",
    "therefore", "theta", "thickapprox", "thicksim", "thickspace", "thinspace", "tilde", "times",
    "tiny", "to", "top", "triangle", "triangledown", "triangleleft", "trianglelefteq", "triangleq",
    "triangleright", "trianglerighteq", "tt", "twoheadleftarrow", "twoheadrightarrow",
    *(f"n{relation}" for relation in _RELATIONS),
})  # fmt: skip


def _is_latex(word: str) -> bool:
    """Whether a control escape and the letters after it (``word``) read as a LaTeX command."""
    if word[0] in "bfr":  # backspace, form feed or carriage return before a letter: never meant
        return len(word) > 1
    return word in _N_T_COMMANDS or word.startswith("text")


def _literal_backslash(match: re.Match[str]) -> str:
    escape = match[0]
    if escape == "\\" or (match[1] and _is_latex(match[1])):
        return "\\" + escape
    return escape


def _repair(candidate: str) -> str:
    """``candidate`` with every backslash that is LaTeX rather than a JSON escape doubled."""
    return _STRING.sub(lambda s: _ESCAPE.sub(_literal_backslash, s[0]), candidate)


def _candidates(text: str) -> list[str]:
    """Fenced blocks first, then every balanced {...} span not inside another, in order."""
    return [m.group(1) for m in _FENCE.finditer(text)] + _spans(text)


def _spans(text: str) -> list[str]:
    """Every balanced {...} span of ``text`` not inside another, in order.

    Braces inside string literals do not count; an unclosed ``{`` (prose) hides nothing after it.
    """
    spans: list[tuple[int, int]] = []
    opened: list[int] = []
    in_string = escaped = False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"' and opened:
            in_string = True
        elif char == "{":
            opened.append(i)
        elif char == "}" and opened:
            start = opened.pop()
            while spans and spans[-1][0] > start:  # spans nested in this one
                spans.pop()
            spans.append((start, i + 1))
    return [text[start:end] for start, end in spans]


def _objects(candidates: list[str]) -> Iterator[dict[str, Any]]:
    """Every JSON object that ``candidates`` decode to, in order."""
    for candidate in map(_repair, candidates):
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                value = json.loads(attempt, strict=False)  # raw newlines in strings allowed
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                yield value
                break


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (fenced or inline; trailing commas tolerated), or None."""
    return next(_objects(_candidates(text)), None)


def parse_model(text: str, schema: type[M]) -> M | None:
    """The first JSON object in ``text`` that validates against ``schema``, or None."""
    for value in _objects(_candidates(text)):
        try:
            return schema.model_validate(value)
        except ValidationError:
            continue
    return None


def parse_models(text: str, schema: type[M]) -> list[M]:
    """Every JSON object in ``text`` that validates against ``schema``, in order: those in its
    fenced blocks if it has any, else those written inline (a JSON list of them, or one after
    another); the objects of a list or a fence count one by one."""
    blocks = [m.group(1) for m in _FENCE.finditer(text)] or [text]
    found = []
    for value in _objects([span for block in blocks for span in _spans(block)]):
        try:
            found.append(schema.model_validate(value))
        except ValidationError:
            continue
    return found
