"""The cost-accuracy frontier: every general method on one benchmark, and which of them no
other beats on both accuracy and cost.

A question of our own, after MASLab's remark that its paper compares methods' token
consumption too (Ye et al., arXiv 2505.16988; the figure was not available for review, so the
study holds no paper's figures).

Grid: the methods that answer a question with text (no tools, no code, no collaborative game,
no optimisation step) × one benchmark (``--benchmark``, by default ``arith``).

Analysis, per model: each method's accuracy with its interval, its tokens and calls per sample,
and whether it lies on the Pareto frontier by tokens (no method is at least as accurate with
fewer tokens) and by calls. A frontier drawn through point estimates can hide methods whose
accuracy is within the interval of a cheaper one: the table says, for each method off the
frontier, the cheaper method that beats it and whether that difference is detected (paired by
task).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from maslab.analysis.run_result import RunResult

METHODS = (
    "vanilla", "cot", "self_consistency", "self_refine", "reflexion", "spp", "llm_debate",
    "mad", "exchange_of_thought", "free_discussion", "camel", "autogen", "agentverse",
    "self_org_team", "mixture_of_agents", "mav", "macnet", "dylan", "macm",
)  # fmt: skip
"""The methods that answer a question in text with no tools, no code and no optimisation."""

Cost = Callable[["RunResult"], float]
COSTS: dict[str, Cost] = {
    "tokens": lambda run: run.summary.mean_tokens,
    "calls": lambda run: run.summary.mean_calls,
}


def frontier(points: dict[str, tuple[float, float]]) -> set[str]:
    """The names on the Pareto frontier of ``points`` (name -> (accuracy, cost)): those no
    other point dominates, at least as accurate and at most as costly, better in one."""
    return {
        name
        for name, (accuracy, cost) in points.items()
        if not any(
            a >= accuracy and c <= cost and (a, c) != (accuracy, cost)
            for other, (a, c) in points.items()
            if other != name
        )
    }


@register_study("cost-frontier")
class CostFrontier(Study):
    title = "The cost-accuracy frontier"
    source = "a question of maslab's own (after MASLab's token comparison, arXiv 2505.16988)"
    question = (
        "Which methods buy their accuracy cheapest on this model and benchmark, in tokens and in "
        "calls, and which cost more for no accuracy a cheaper one lacks?"
    )
    benchmark = "arith"
    methods = METHODS

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        benchmark = self.benchmark_of(runs.options)
        tables = [self._table(runs, benchmark, model) for model in runs.models]
        return runs.analysis(tables)

    def _table(self, runs: StudyRuns, benchmark: str, model: str) -> Table:
        done = {m: run for m in METHODS if (run := runs.get(benchmark, m, model)) and run.summary.n}
        on = {
            name: frontier({m: (run.summary.accuracy, cost(run)) for m, run in done.items()})
            for name, cost in COSTS.items()
        }
        rows = []
        for method in sorted(done, key=lambda m: done[m].summary.mean_tokens):
            run = done[method]
            s = run.summary
            rows.append(Row(method, (
                Cell(Estimate.accuracy(run)),
                Cell(note=f"{s.mean_tokens:,.0f}"),
                Cell(note=f"{s.mean_calls:.1f}"),
                Cell(note=self._standing(method, done, on["tokens"], COSTS["tokens"])),
                Cell(note=self._standing(method, done, on["calls"], COSTS["calls"])),
            )))  # fmt: skip
        return Table(
            f"Cost and accuracy on {model}, {benchmark}",
            ("accuracy", "tokens / sample", "calls / sample", "by tokens", "by calls"),
            tuple(rows), what="accuracy, %; cost per sample; standing on each frontier",
        )  # fmt: skip

    @staticmethod
    def _standing(method: str, done: dict[str, RunResult], on: set[str], cost: Cost) -> str:
        """'frontier', or the cheapest method on the frontier that dominates it, with whether
        the accuracy difference is detected (an interval that excludes zero)."""
        if method in on:
            return "frontier"
        run = done[method]
        better = [
            m for m in on
            if done[m].summary.accuracy >= run.summary.accuracy and cost(done[m]) <= cost(run)
        ]  # fmt: skip
        cheapest = min(better, key=lambda m: cost(done[m]))
        gap = difference(done[cheapest], run)
        detected = "detected" if gap.low > 0 else "within noise"
        return f"beaten by {cheapest} ({100 * gap.value:+.1f} points, {detected})"
