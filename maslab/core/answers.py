"""Pull a final answer out of a model's free-text reply, normalise it, and vote over replies.

Extraction order for every type but ``code``: the last ``\\boxed{...}``, else the span after the
last answer marker ("The answer is", "Final answer:", "answer:", "#### 18", "The correct choice
is", "Best option:"), else a type-specific fallback over the whole reply. A boxed or marker span
that yields nothing for the type (say, no number in it) falls through to the next step.
``code`` is the fenced Python block a grader would take: the last that defines the task's entry
point, else the last; never a block in another language.

:func:`strict_answer` reads the answer in the instructed form only (lm-eval's strict match, where
:func:`extract_answer` is its flexible extract): a boxed or marker span that is the answer itself,
never the fallback over the whole reply.
Everything here is pure and never evaluates text.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache, partial
from typing import Literal, NamedTuple

from maslab.errors import ConfigError

AnswerType = Literal["number", "choice", "math", "text", "code"]
Parser = Callable[[str], str | None]

_DEFAULT_LETTERS = "ABCDEFGHIJ"
_NOISE = " \t\r\n*$"  # stripped around boxed and marker spans
_MAX_FRACTION_PLACES = 6  # a fraction becomes a decimal only if it has at most this many places

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_MARKER = re.compile(
    # "####" only before something number- or LaTeX-like, so markdown headings are not markers;
    # "choice" and "option" only after correct, right, best, final or answer.
    r"####[ \t]*(?=[-+−$€£\d.(\\])"
    r"|\b(?:answer|(?:correct|right|best|final|answer)\s+(?:choice|option))"
    r"(?:\*\*)?(?:\s+is\b|\s*:)(?:\s*:)?",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?](?=\s)")
_LEADING_MATH = re.compile(r"\s*\**\s*(?:\$\$?|\\[(\[])(.+?)(?:\$\$?|\\[)\]])")
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([-−]?[\d.,]+)\s*\}\s*\{\s*([\d.,]+)\s*\}")
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-−]?)[$€£¥]?"
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)(?:/(?P<den>\d+))?"
)
_NUMBER_NOISE = re.compile(r"[\s,$€£¥%]")
_NUMERIC = re.compile(r"(?P<num>[-+]?(?:\d+(?:\.\d*)?|\.\d+))(?:/(?P<den>\d+(?:\.\d+)?))?")
_LONE_LETTER = re.compile(r"[(\[]?([A-Za-z])[)\]]?")
# A leading capital letter, unless it is the word "A" or "I" starting prose ("A train", "I think").
_LEADING_LETTER = re.compile(
    r"(?:(?i:option|choice)\s*)?[(\[]?(?![AI]\s+[a-z])([A-Z])(?![A-Za-z0-9])"
)
_LETTER_PATTERN = re.compile(
    r"\(([A-Z])\)"  # (C)
    r"|\b([A-Z])\)"  # C)
    r"|\*\*\(?([A-Z])[.)]?\*\*"  # **C**
    r"|\b(?i:option|choice)\s+\(?([A-Z])\b"  # option C
    r"|^[ \t]*([A-Z])[.)]?[ \t]*$",  # a line that is just "C"
    re.MULTILINE,
)
_FENCE = re.compile(r"^[ \t]*```([^\n]*)\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
_PYTHON_LABELS = {"python", "python3", "py", "py3"}
_DEFINES = r"^[ \t]*(?:(?:async[ \t]+)?def|class)[ \t]+{name}\b"  # a block defining a name
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")
_MATH_NOISE = re.compile(r"\\(?:left|right)(?![A-Za-z])|\\[!,]|\s+|\$")
_SMALL_FRAC = re.compile(r"\\[dt]frac")


def extract_answer(
    text: str,
    answer_type: AnswerType = "text",
    *,
    choices: Sequence[str] | None = None,
    entry_point: str | None = None,
) -> str | None:
    """The final answer in ``text`` as a string, or ``None`` if there is none.

    ``choices`` (option texts, lettered A, B, ... by position) only matters for ``"choice"``,
    ``entry_point`` (the function the code must define) only for ``"code"``.
    """
    if answer_type == "code":
        return _extract_code(text, entry_point)
    return _extract(text, answer_type, None if choices is None else tuple(choices))


@lru_cache(maxsize=4096)  # a reply is read by its method, its evaluator and its signals
def _extract(text: str, answer_type: AnswerType, choices: tuple[str, ...] | None) -> str | None:
    strategy = _strategy(answer_type, choices)
    answer = _in_spans(text, strategy.span)
    return answer if answer is not None else strategy.fallback(text)


def strict_answer(
    text: str, answer_type: AnswerType, *, choices: Sequence[str] | None = None
) -> str | None:
    """The answer ``text`` gives in the instructed form, or ``None`` if it gives none so.

    The last ``\\boxed{...}``, else the span after the last answer marker, as
    :func:`extract_answer` reads them, but only when the span is the answer itself: for
    ``"number"`` a number leads it (after its last ``=``), for ``"choice"`` an option letter
    ("C", "(C) Paris", "option C"; an option's full text is not its letter). No fallback over
    the whole reply: "it is around 64, but I cannot decide" has no strict answer. Every answer
    type but ``code``.
    """
    return _strict(text, answer_type, None if choices is None else tuple(choices))


@lru_cache(maxsize=4096)  # read by the evaluator and again by the signals
def _strict(text: str, answer_type: AnswerType, choices: tuple[str, ...] | None) -> str | None:
    return _in_spans(text, _strategy(answer_type, choices).strict)


def normalize_answer(answer: str, answer_type: AnswerType = "text") -> str:
    """Canonical form of ``answer`` so that equal answers compare equal."""
    if answer_type not in _NORMALIZERS:
        raise ConfigError(f"unknown answer type {answer_type!r}; use one of {list(_NORMALIZERS)}")
    return _NORMALIZERS[answer_type](answer)


@dataclass(frozen=True)
class Vote:
    """Outcome of :func:`majority_vote`; ``counts`` is keyed by normalised answer."""

    winner: str | None
    counts: dict[str, int]
    support: float


def majority_vote(answers: Sequence[str | None], answer_type: AnswerType = "text") -> Vote:
    """Most common answer by normalised form; ``None`` abstains, ties go to the earliest class.

    The winner is the first original answer of the winning class.
    """
    counts: dict[str, int] = {}
    first_seen: dict[str, str] = {}
    for answer in answers:
        if answer is None:
            continue
        key = normalize_answer(answer, answer_type)
        counts[key] = counts.get(key, 0) + 1
        first_seen.setdefault(key, answer)
    if not counts:
        return Vote(winner=None, counts={}, support=0.0)
    best = max(counts, key=counts.__getitem__)  # max keeps the first of equal counts
    return Vote(winner=first_seen[best], counts=counts, support=counts[best] / sum(counts.values()))


# --- locating a span --------------------------------------------------------------------------


def _last_boxed(text: str) -> str | None:
    """Content of the last closed ``\\boxed{...}``, nested braces included (one linear pass)."""
    openers = {match.end() - 1 for match in _BOXED.finditer(text)}
    if not openers:
        return None
    stack: list[int] = []
    last: tuple[int, int] | None = None
    for i, char in enumerate(text):
        if char == "{":
            stack.append(i)
        elif char == "}" and stack:
            start = stack.pop()
            if start in openers and (last is None or start > last[0]):
                last = (start, i)
    return text[last[0] + 1 : last[1]] if last else None


def _in_spans(text: str, parse: Parser) -> str | None:
    """What ``parse`` reads in the last boxed span, else in the last marker span."""
    for span in (_last_boxed(text), _marker_span(text)):
        if span is not None and (answer := parse(span)) is not None:
            return answer
    return None


def _marker_span(text: str) -> str | None:
    """What follows the last answer marker, up to the end of its line or sentence."""
    markers = list(_MARKER.finditer(text))
    if not markers:
        return None
    line = text[markers[-1].end() :].lstrip().split("\n", 1)[0]
    return _SENTENCE_END.split(line, maxsplit=1)[0]


def _clean(span: str) -> str:
    """Strip whitespace, ``*``, ``$``, one ``\\(...\\)`` / ``\\[...\\]`` and trailing periods."""
    span = span.strip(_NOISE).rstrip(_NOISE + ".")
    for opening, closing in (("\\(", "\\)"), ("\\[", "\\]")):
        span = span.removeprefix(opening).removesuffix(closing)
    return span.strip(_NOISE).rstrip(_NOISE + ".")


# --- per-type parsing -------------------------------------------------------------------------


class _Strategy(NamedTuple):
    """How one answer type is read: a boxed or marker span, the same span strictly (only when
    it is the answer in the instructed form), and the fallback over the whole reply."""

    span: Parser
    strict: Parser
    fallback: Parser


def _strategy(answer_type: str, choices: Sequence[str] | None) -> _Strategy:
    """How ``answer_type`` is read (every type but ``code``)."""
    if answer_type == "number":
        return _Strategy(_span_number, _leading_number, _last_number)
    if answer_type == "math":
        return _Strategy(_math_span, _math_span, _last_number)
    if answer_type == "text":
        return _Strategy(_text_span, _text_span, _last_line)
    if answer_type == "choice":
        letters = _DEFAULT_LETTERS if choices is None else string.ascii_uppercase[: len(choices)]
        return _Strategy(
            partial(_choice_in_span, letters=letters, choices=choices or ()),
            partial(_choice_letter, letters=letters),
            partial(_last_choice_letter, letters=letters),
        )
    raise ConfigError(f"unknown answer type {answer_type!r}; use one of {list(_NORMALIZERS)}")


def _plain_fractions(text: str) -> str:
    """``text`` with LaTeX fractions of numbers as "a/b" and ``{,}`` thousands commas as ","."""
    return _LATEX_FRAC.sub(r"\1/\2", text.replace("{,}", ","))


def _numbers(text: str) -> list[str]:
    """Numbers in ``text`` as written, minus thousands commas, currency and units."""
    return [_number_as_written(match) for match in _NUMBER.finditer(_plain_fractions(text))]


def _number_as_written(match: re.Match[str]) -> str:
    sign = "-" if match["sign"] else ""
    fraction = f"/{match['den']}" if match["den"] else ""
    return sign + match["num"].replace(",", "") + fraction


def _span_number(span: str) -> str | None:
    """First number after the span's last ``=`` (the whole span if it has none)."""
    numbers = _numbers(span.rsplit("=", 1)[-1])
    return numbers[0] if numbers else None


def _leading_number(span: str) -> str | None:
    """The number the span's part after its last ``=`` starts with (a LaTeX ``\\$`` or a
    currency sign before it allowed), as written; None if it starts with anything else."""
    tail = _clean(span.rsplit("=", 1)[-1]).removeprefix("\\$")
    match = _NUMBER.match(_plain_fractions(tail))
    return _number_as_written(match) if match else None


def _last_number(text: str) -> str | None:
    numbers = _numbers(text)
    return numbers[-1] if numbers else None


def _math_span(span: str) -> str | None:
    """The span verbatim, or only its leading ``$...$`` / ``\\(...\\)`` if it starts with one."""
    leading = _LEADING_MATH.match(span)
    return _clean(leading[1] if leading else span) or None


def _text_span(span: str) -> str | None:
    return _clean(_LATEX_TEXT.sub(r"\1", span)) or None


def _last_line(text: str) -> str | None:
    lines = [line for line in text.splitlines() if line.strip()]
    return (_clean(lines[-1]) or None) if lines else None


def _choice_in_span(span: str, letters: str, choices: Sequence[str]) -> str | None:
    """Letter named by a boxed/marker span: an option's full text, or a leading option letter
    (:func:`_choice_letter`)."""
    key = normalize_answer(_clean(_LATEX_TEXT.sub(r"\1", span)))
    for letter, option in zip(letters, choices, strict=False):
        if key == normalize_answer(option):
            return letter
    return _choice_letter(span, letters)


def _choice_letter(span: str, letters: str) -> str | None:
    """The option letter a boxed/marker span is, or starts with ("b", "(C) Paris", "option C").

    A lone letter may be lower-case ("answer: b"); otherwise only capitals count, and a bare "A"
    or "I" followed by a lower-case word is prose ("A train ...", "I think ..."), not an option.
    """
    span = _clean(_LATEX_TEXT.sub(r"\1", span))
    match = _LONE_LETTER.fullmatch(span) or _LEADING_LETTER.match(span)
    return match[1].upper() if match and match[1].upper() in letters else None


def _last_choice_letter(text: str, letters: str) -> str | None:
    """Last allowed letter written like "(C)", "C)", "**C**", "option C" or alone on a line."""
    # each branch of the pattern is one group: a match's last group is its letter
    found = [m[m.lastindex] for m in _LETTER_PATTERN.finditer(text) if m.lastindex]
    allowed = [letter for letter in found if letter in letters]
    return allowed[-1] if allowed else None


def _extract_code(text: str, entry_point: str | None) -> str | None:
    """The Python block a grader would take: of the fenced blocks in Python (or unlabelled),
    the last that defines ``entry_point``, else the last; with no fenced block at all, the whole
    text if it looks like Python code. A block in another language (```json, ```text) is never
    code."""
    fences = _FENCE.findall(text)
    blocks = [block for label, block in fences if _is_python(label) and block.strip()]
    if entry_point:
        defines = re.compile(_DEFINES.format(name=re.escape(entry_point)), re.M)
        blocks = [block for block in blocks if defines.search(block)] or blocks
    if blocks:
        return _trim_blank_lines(blocks[-1])
    if not fences and ("def " in text or "import " in text):
        return _trim_blank_lines(text)
    return None


def _is_python(label: str) -> bool:
    """Whether a fence's info string (```python title="x") names Python, or nothing."""
    words = label.split()
    return not words or words[0].lower() in _PYTHON_LABELS


def _trim_blank_lines(code: str) -> str:
    return _LEADING_BLANK_LINES.sub("", code.rstrip())


# --- normalisation ----------------------------------------------------------------------------


def _normalize_number(answer: str) -> str:
    """Canonical number ("1,234" -> "1234", "3/4" -> "0.75", "2/6" -> "1/3"), else lower-cased."""
    raw = _LATEX_FRAC.sub(r"\1/\2", answer.strip()).replace("−", "-")
    compact = _NUMBER_NOISE.sub("", raw).removesuffix(".")
    match = _NUMERIC.fullmatch(compact)
    if match is None:
        return answer.strip().lower()
    if match["den"] is None:
        return _decimal_str(Decimal(match["num"]))
    try:
        return _fraction_str(Fraction(match["num"]) / Fraction(match["den"]))
    except (ValueError, ZeroDivisionError):  # "x/0", or too many digits for an int
        return answer.strip().lower()


def _fraction_str(value: Fraction) -> str:
    """A short exact decimal if there is one, else the reduced "a/b"."""
    scaled = value * 10**_MAX_FRACTION_PLACES
    if scaled.denominator == 1:  # built from a string, so exact at any size
        return _decimal_str(Decimal(f"{scaled.numerator}e-{_MAX_FRACTION_PLACES}"))
    return f"{value.numerator}/{value.denominator}"


def _decimal_str(value: Decimal) -> str:
    """Plain notation without trailing zeros; zero is always "0"."""
    if value == 0:
        return "0"
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _normalize_choice(answer: str) -> str:
    return answer.strip().strip("()[]*.: ").upper()


def _normalize_math(answer: str) -> str:
    return _SMALL_FRAC.sub(r"\\frac", _MATH_NOISE.sub("", answer)).removesuffix(".")


def _normalize_text(answer: str) -> str:
    return " ".join(answer.lower().split()).strip(string.punctuation + " ")


def _normalize_code(answer: str) -> str:
    return "\n".join(line.rstrip() for line in answer.splitlines()).strip("\n")


_NORMALIZERS: dict[str, Callable[[str], str]] = {
    "number": _normalize_number,
    "choice": _normalize_choice,
    "math": _normalize_math,
    "text": _normalize_text,
    "code": _normalize_code,
}
