"""``choice``: the option letter named in the answer equals the gold letter."""

from __future__ import annotations

import string

from maslab.bench.evaluation import Evaluator, Score, gold_of, register_evaluator
from maslab.core.answers import extract_answer, normalize_answer, strict_answer
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.errors import ConfigError


@register_evaluator("choice")
class ChoiceEvaluator(Evaluator):
    """Multiple choice: the chosen letter (or an option's full text) against the gold letter.

    Its details hold the strict verdict too: the letter in the instructed form only
    (:meth:`Score.with_strict`)."""

    def check_gold(self, task: Task) -> None:
        gold = normalize_answer(gold_of(task), "choice")
        letters = string.ascii_uppercase[: len(task.choices or ()) or None]
        if len(gold) != 1 or gold not in letters:
            raise ConfigError(f"task {task.id}: gold {task.gold!r} is not an option letter")

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        self.check_gold(task)
        gold = normalize_answer(gold_of(task), "choice")
        extracted = extract_answer(answer, "choice", choices=task.choices)
        strict = strict_answer(answer, "choice", choices=task.choices)
        score = (
            Score.unparsable()
            if extracted is None
            else Score.graded(extracted == gold, extracted, gold)
        )
        return score.with_strict(strict, strict == gold)
