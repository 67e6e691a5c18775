"""``exact``: the extracted text answer equals the gold after text normalisation."""

from __future__ import annotations

from maslab.bench.evaluation import Evaluator, Score, gold_of, register_evaluator
from maslab.core.answers import extract_answer, normalize_answer, strict_answer
from maslab.core.context import Context
from maslab.core.task import Task


@register_evaluator("exact")
class ExactEvaluator(Evaluator):
    """Normalised text match: case, spacing and surrounding punctuation are ignored."""

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        """The text answer as extracted (flexible), and in its details the one given in the
        instructed form (strict: :meth:`Score.with_strict`)."""
        gold = gold_of(task)
        extracted = extract_answer(answer, "text")
        strict = strict_answer(answer, "text")
        score = (
            Score.unparsable()
            if extracted is None
            else Score.graded(_same_text(extracted, gold), extracted, gold)
        )
        return score.with_strict(strict, strict is not None and _same_text(strict, gold))


def _same_text(answer: str, gold: str) -> bool:
    return normalize_answer(answer, "text") == normalize_answer(gold, "text")
