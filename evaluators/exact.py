"""``exact``: the extracted text answer equals the gold after text normalisation."""

from __future__ import annotations

from maslab.bench.evaluation import Evaluator, Score, gold_of, register_evaluator
from maslab.core.answers import extract_answer, normalize_answer
from maslab.core.context import Context
from maslab.core.task import Task


@register_evaluator("exact")
class ExactEvaluator(Evaluator):
    """Normalised text match: case, spacing and surrounding punctuation are ignored."""

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        gold = gold_of(task)
        extracted = extract_answer(answer, "text")
        if extracted is None:
            return Score.unparsable()
        correct = normalize_answer(extracted, "text") == normalize_answer(gold, "text")
        return Score.graded(correct, extracted, gold)
