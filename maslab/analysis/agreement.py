"""How often two evaluators agree on the same answers: counts, percent agreement, Cohen's kappa."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from maslab.bench.evaluation import Evaluator, Score
from maslab.core.task import Task
from maslab.errors import ConfigError

_ANSWER_CHARS = 120


@dataclass(frozen=True)
class Disagreement:
    """One answer the two evaluators scored differently."""

    task_id: str
    answer: str
    gold: str | None
    score_a: Score
    score_b: Score


@dataclass(frozen=True)
class Agreement:
    """The 2x2 table of correct/wrong verdicts of evaluators a and b over ``n`` answers."""

    both_correct: int
    both_wrong: int
    only_a: int
    only_b: int
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def n(self) -> int:
        return self.both_correct + self.both_wrong + self.only_a + self.only_b

    @property
    def percent_agreement(self) -> float:
        """Share of answers with the same verdict, in percent (100 for no answers)."""
        return float(100 * self._observed())

    @property
    def kappa(self) -> float:
        """Cohen's kappa; 1.0 whenever agreement is perfect (including no answers)."""
        observed = self._observed()
        if observed == 1:
            return 1.0
        a_yes = Fraction(self.both_correct + self.only_a, self.n)
        b_yes = Fraction(self.both_correct + self.only_b, self.n)
        expected = a_yes * b_yes + (1 - a_yes) * (1 - b_yes)  # < 1 unless agreement is perfect
        return float((observed - expected) / (1 - expected))

    def _observed(self) -> Fraction:
        return Fraction(self.both_correct + self.both_wrong, self.n) if self.n else Fraction(1)


async def compare_evaluators(
    pairs: Sequence[tuple[Task, str]], a: Evaluator, b: Evaluator, *, concurrency: int = 8
) -> Agreement:
    """Score every ``(task, answer)`` with both evaluators and tabulate their verdicts.

    Evaluator errors propagate: an agreement computed over the answers that happened to score
    would not be the agreement over ``pairs``.

    Args:
        pairs: Tasks and the answers to score against them.
        a: One evaluator.
        b: The other.
        concurrency: How many answers score at once.
    """
    if concurrency < 1:
        raise ConfigError(f"concurrency must be at least 1, got {concurrency}")
    limit = asyncio.Semaphore(concurrency)

    async def both(task: Task, answer: str) -> tuple[Score, Score]:
        async with limit:
            return await asyncio.gather(a.score(task, answer), b.score(task, answer))

    scores = await asyncio.gather(*(both(task, answer) for task, answer in pairs))
    counts = {(True, True): 0, (False, False): 0, (True, False): 0, (False, True): 0}
    disagreements = []
    for (task, answer), (score_a, score_b) in zip(pairs, scores, strict=True):
        counts[score_a.correct, score_b.correct] += 1
        if score_a.correct != score_b.correct:
            disagreements.append(Disagreement(task.id, answer, task.gold, score_a, score_b))
    return Agreement(
        both_correct=counts[True, True],
        both_wrong=counts[False, False],
        only_a=counts[True, False],
        only_b=counts[False, True],
        disagreements=disagreements,
    )


def format_agreement(agreement: Agreement, name_a: str, name_b: str) -> str:
    """Plain-text summary: the 2x2 table, agreement and kappa, then each disagreeing answer."""
    rows = [
        ("", f"{name_b} correct", f"{name_b} wrong"),
        (f"{name_a} correct", str(agreement.both_correct), str(agreement.only_a)),
        (f"{name_a} wrong", str(agreement.only_b), str(agreement.both_wrong)),
    ]
    width = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        f"{name_a} vs {name_b}: {agreement.n} answers, "
        f"agreement {agreement.percent_agreement:.1f}%, Cohen's kappa {agreement.kappa:.3f}",
        "",
        *(
            f"{row[0]:<{width[0]}}  {row[1]:>{width[1]}}  {row[2]:>{width[2]}}".rstrip()
            for row in rows
        ),
    ]
    if agreement.disagreements:
        lines += ["", f"Disagreements ({len(agreement.disagreements)}):"]
    for d in agreement.disagreements:
        lines.append(
            f"- {d.task_id}  gold={d.gold!r}  {name_a}: {_verdict(d.score_a)}  "
            f"{name_b}: {_verdict(d.score_b)}"
        )
        lines.append(f"    answer: {_shorten(d.answer)}")
    return "\n".join(lines)


def _verdict(score: Score) -> str:
    word = "correct" if score.correct else "wrong"
    return f"{word} ({'unparsed' if score.unparsed else repr(score.extracted)})"


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _ANSWER_CHARS else flat[: _ANSWER_CHARS - 1] + "…"
