"""Tool use: one model calling functions alone against two multi-agent ways of doing it, on
BFCL v4's multi-turn tasks, per category.

The methods' papers: BFCL's single-model baseline (``tool_agent``, ReAct: Yao et al., arXiv
2210.03629; BFCL: Patil et al., "The Berkeley Function Calling Leaderboard", ICML 2025), a
planner and an executor (``planner_executor``, Octo-planner: arXiv 2406.18082) and a conductor
over specialists (``conductor``). BFCL's leaderboard ranks models, not these methods, so the
study holds no paper's figures: it measures the question on the user's model.

Grid: the three methods × BFCL multi-turn in its four categories (``base``, ``long_context``,
``miss_func``, ``miss_param``), scored by ``bfcl_state`` (the calls replayed turn by turn on
fresh environments; BFCL's state and response checks).

Analysis, per model: each method's accuracy per category with its interval, with calls and
tool calls per sample; then each multi-agent method against the single agent, paired by task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from maslab.studies.base import (
    Analysis,
    Cell,
    Row,
    Study,
    StudyOptions,
    StudyRuns,
    Table,
    accuracy_cell,
    common_options,
    register_study,
)
from maslab.studies.estimates import difference
from maslab.studies.figures import PaperFigures

METHODS = ("tool_agent", "planner_executor", "conductor")
SINGLE = "tool_agent"
CATEGORIES = ("base", "long_context", "miss_func", "miss_param")


def label(category: str) -> str:
    return f"bfcl_{category}"


@register_study("tool-use")
class ToolUse(Study):
    title = "Tool use: one agent against planner-executor and conductor"
    source = "BFCL v4 multi-turn (Patil et al., ICML 2025); a question of maslab's own"
    question = (
        "On BFCL's multi-turn tasks, does splitting the work between a planner and an executor, "
        "or a conductor and specialists, beat one model calling the functions itself?"
    )

    def sweep(self, options: StudyOptions, out: Path) -> dict[str, Any]:
        return {
            **common_options(options, out),
            "methods": list(METHODS),
            "benchmarks": [
                {"name": "bfcl_multi_turn", "options": {"category": c}, "label": label(c)}
                for c in CATEGORIES
            ],
        }

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        tables: list[Table] = []
        for model in runs.models:
            tables.append(self._accuracies(runs, model))
            tables.append(self._gains(runs, model))
        return runs.analysis(tables)

    def _accuracies(self, runs: StudyRuns, model: str) -> Table:
        rows = []
        for method in METHODS:
            found = [runs.get(label(c), method, model) for c in CATEGORIES]
            cells = [accuracy_cell(run, None) for run in found]
            done = [run for run in found if run is not None and run.summary.n]
            samples = sum(run.summary.n for run in done)
            calls = sum(run.summary.mean_calls * run.summary.n for run in done)
            tools = sum(r.tool_calls for run in done for r in run.records)
            per = (f"{calls / samples:.1f} calls, {tools / samples:.1f} tool calls"
                   if samples else "not run")  # fmt: skip
            rows.append(Row(method, (*cells, Cell(note=per))))
        return Table(
            f"BFCL multi-turn on {model}", (*CATEGORIES, "per sample"), tuple(rows),
            what="accuracy, % (bfcl_state)",
        )  # fmt: skip

    def _gains(self, runs: StudyRuns, model: str) -> Table:
        rows = []
        for method in METHODS:
            if method == SINGLE:
                continue
            cells = []
            for c in CATEGORIES:
                run, single = runs.get(label(c), method, model), runs.get(label(c), SINGLE, model)
                if run is None or single is None or not run.summary.n or not single.summary.n:
                    cells.append(Cell(note="not run"))
                else:
                    cells.append(Cell(difference(run, single)))
            rows.append(Row(f"{method} − {SINGLE}", tuple(cells)))
        return Table(
            f"Against the single agent on {model}", CATEGORIES, tuple(rows),
            what="percent points, paired by task",
        )  # fmt: skip
