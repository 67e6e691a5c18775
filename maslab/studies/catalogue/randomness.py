"""Randomness in agentic evals: how far one run's pass@1 moves from one repeat to the next,
and how many tasks and repeats a claimed difference between methods needs.

After "On Randomness in Agentic Evals", a seed paper of this project; its text and figures
were not available for review, so the study holds no paper's figures and compares nothing
with them: it measures, on the user's model, what that paper asks.

Grid: Single (``vanilla``), self-consistency and LLM Debate × one benchmark (``--benchmark``,
by default ``arith``), with five repeats unless ``--repeats`` says otherwise. Each repeat of a
task draws afresh (its own streams, keyed by seed, task and repeat), so a repeat stands for one
single-run evaluation.

Analysis, per model: each method's accuracy over all repeats with its interval, and the
single-run pass@1 of each repeat (lowest, highest, spread, standard deviation); then each
method against Single: the difference over all repeats, paired by task, and the tasks a
comparison would need to detect that difference with power 0.8 at one repeat and at this
study's repeats (:mod:`maslab.analysis.power`, from Single's variance split between and within
tasks; two bounds: methods that find the same tasks hard, or unrelated difficulties).
"""

from __future__ import annotations

import statistics
from typing import Any

from maslab.analysis.power import Variance, tasks_needed
from maslab.studies.base import (
    Analysis,
    Cell,
    Row,
    Study,
    StudyRuns,
    Table,
    register_study,
)
from maslab.studies.estimates import Estimate, difference
from maslab.studies.figures import PaperFigures

METHODS = ("vanilla", "self_consistency", "llm_debate")
SINGLE = "vanilla"


@register_study("randomness")
class Randomness(Study):
    title = "Randomness in agentic evals"
    source = "after 'On Randomness in Agentic Evals' (not available for review: no figures held)"
    question = (
        "How much does a single run's pass@1 move between reruns, and how many tasks and repeats "
        "does a claimed difference between two methods need?"
    )
    benchmark = "arith"
    methods = METHODS
    default_repeats = 5

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        benchmark = self.benchmark_of(runs.options)
        tables: list[Table] = []
        for model in runs.models:
            done = {m: r for m in METHODS if (r := runs.get(benchmark, m, model)) and r.summary.n}
            tables.append(_spread(done, model))
            if SINGLE in done:
                tables.append(_needs(done, model))
        return runs.analysis(tables)


def _spread(done: dict[str, Any], model: str) -> Table:
    rows = []
    for method, run in done.items():
        per_repeat = run.summary.per_repeat
        sd = statistics.stdev(per_repeat) if len(per_repeat) > 1 else 0.0
        rows.append(Row(method, (
            Cell(Estimate.accuracy(run)),
            Cell(note=f"{100 * min(per_repeat):.1f}"),
            Cell(note=f"{100 * max(per_repeat):.1f}"),
            Cell(note=f"{100 * (max(per_repeat) - min(per_repeat)):.1f}"),
            Cell(note=f"{100 * sd:.1f}"),
            Cell(note=str(len(per_repeat))),
        )))  # fmt: skip
    return Table(
        f"Single-run pass@1 on {model}",
        ("all repeats", "lowest repeat", "highest repeat", "spread", "sd", "repeats"),
        tuple(rows), what="accuracy, %; each repeat's pass@1, percent points",
    )  # fmt: skip


def _needs(done: dict[str, Any], model: str) -> Table:
    single = done[SINGLE]
    repeats = len(single.summary.per_repeat)
    try:
        variance = Variance.of(single.records)
    except ValueError:  # one repeat: no split of the variance
        variance = Variance.assumed(single.summary.accuracy, 0.0)
    rows = []
    for method, run in done.items():
        if method == SINGLE:
            continue
        gap = difference(run, single)
        needs = []
        for k in sorted({1, repeats}):
            if gap.value == 0:
                needs.append(Cell(note="no difference to detect"))
                continue
            need = tasks_needed(variance, gap.value, k)
            needs.append(Cell(note=f"{need.tasks_shared:,} to {need.tasks_unrelated:,} tasks"))
        rows.append(Row(f"{method} − {SINGLE}", (Cell(gap), *needs)))
    columns = ("difference", *(f"tasks needed at {k} repeat{'s' * (k > 1)}"
                               for k in sorted({1, repeats})))  # fmt: skip
    return Table(
        f"What a difference needs on {model}", columns, tuple(rows),
        what="percent points, paired by task; tasks for power 0.8 at α = 0.05, from Single's "
        "variance (same tasks hard to unrelated difficulties)",
    )  # fmt: skip
