"""``numeric``: the extracted number equals the gold number, exactly or within a relative tolerance.

Numbers are compared as exact fractions, so "18.0", "18", "$18" and "\\frac{36}{2}" are equal and
"0.5" equals "1/2"; ``rel_tol`` only matters for numbers that differ.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

from pydantic import Field, StrictFloat

from maslab.bench.evaluation import Evaluator, Score, gold_of, register_evaluator
from maslab.core.answers import extract_answer, normalize_answer, strict_answer
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.plugin_config import PluginConfig

DEFAULT_REL_TOL = 1e-6

# What normalize_answer(..., "number") makes of a number: "-12", "0.75", "1/3".
_CANONICAL_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")


@lru_cache(maxsize=4096)  # a gold answer is parsed at each of its task's samples
def parse_number(text: str) -> Fraction | None:
    """``text`` as an exact number (commas, currency, ``\\frac`` allowed), or None."""
    canonical = normalize_answer(text, "number")
    if not _CANONICAL_NUMBER.fullmatch(canonical):
        return None
    try:
        return Fraction(canonical)
    except ZeroDivisionError:
        return None


def numbers_equal(a: str, b: str, rel_tol: float = DEFAULT_REL_TOL) -> bool:
    """Whether both texts are numbers within ``rel_tol`` of each other (relative to the larger)."""
    x, y = parse_number(a), parse_number(b)
    return x is not None and y is not None and _close(x, y, rel_tol)


def _close(x: Fraction, y: Fraction, rel_tol: float) -> bool:
    return x == y or abs(x - y) <= _exact(rel_tol) * max(abs(x), abs(y))


_exact = lru_cache(maxsize=8)(Fraction)  # a tolerance as an exact fraction, made once


@register_evaluator("numeric")
class NumericEvaluator(Evaluator):
    """Numeric equality of the final number with the gold (commas, units, \\boxed{} handled)."""

    class Config(PluginConfig):
        rel_tol: StrictFloat = Field(
            DEFAULT_REL_TOL,
            ge=0,
            allow_inf_nan=False,
            description="how far apart, relative to the larger, two numbers may be and be equal",
        )

    config: Config

    def check_gold(self, task: Task) -> None:
        _gold_number(task)

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        """The last number the answer gives (flexible), and in its details the number it gives
        in the instructed form (strict: :meth:`Score.with_strict`)."""
        gold, expected = gold_of(task), _gold_number(task)
        extracted = extract_answer(answer, "number")
        strict = strict_answer(answer, "number")
        score = (
            Score.unparsable()
            if extracted is None
            else Score.graded(self._equal(extracted, expected), extracted, gold)
        )
        same = strict is not None and strict == extracted  # the same text: parsed once
        correct = score.correct if same else strict is not None and self._equal(strict, expected)
        return score.with_strict(strict, correct)

    def _equal(self, extracted: str, expected: Fraction) -> bool:
        found = parse_number(extracted)
        return found is not None and _close(found, expected, self.config.rel_tol)


def _gold_number(task: Task) -> Fraction:
    """The task's gold as a number, or a one-line ConfigError."""
    number = parse_number(gold := gold_of(task))
    if number is None:
        raise ConfigError(f"task {task.id}: gold {gold!r} is not a number")
    return number
