"""MASLab's Table 2: ten methods on ten benchmarks, on the user's model, beside the paper's.

Ye et al., "MASLab: A Unified and Comprehensive Codebase for LLM-based Multi-Agent Systems",
arXiv 2505.16988; the figures are Table 2 of the April 2025 draft (five models; see
``maslab_table2.yaml``).

Grid: Single (``vanilla``), CoT (``cot``), SC, AutoGen, LLM-Debate, MAD, AgentVerse, DyLAN,
MacNet and MAV (each at ``preset=maslab`` where maslab has MASLab's protocol) × MATH-500,
GSM-Hard, AQUA-RAT, AIME-2024, SciBench, GPQA-Diamond, MMLU, MedQA and MedMCQA.

Analysis, per model of ours: each method's accuracy per benchmark with its interval beside
the paper's for one of its models (``against``; by default its smallest, Qwen-2.5-7B), and
Avg-V, the mean over the benchmarks run (the paper's over the same ones); then each method's
gain over Single, paired by task, and whether the paper's sign holds; then Avg-R, the mean
rank over the benchmarks (lower is better), as the paper ranks.

Deviations: GPQA (the main set) is not run: maslab has GPQA-Diamond only. Answers are scored by
each benchmark's own evaluator, not by the paper's xVerify judge (``maslab score`` re-scores a
cell with ``--evaluator llm_judge --evaluator-option mode=xverify``).
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
from maslab.studies.estimates import difference, mean_of, sign_verdict, value_verdict
from maslab.studies.figures import PaperFigures

METHODS = ("vanilla", "cot", "self_consistency", "autogen", "llm_debate", "mad", "agentverse",
           "dylan", "macnet", "mav")  # fmt: skip
WITH_PRESET = {"self_consistency", "autogen", "llm_debate", "agentverse", "dylan", "macnet", "mav"}
BENCHMARKS = ("math500", "gsm_hard", "aqua_rat", "aime2024", "scibench", "gpqa_diamond", "mmlu",
              "medqa", "medmcqa")  # fmt: skip
NOT_RUN = {"gpqa": "GPQA's main set is not in maslab (GPQA-Diamond is)"}
SINGLE = "vanilla"
GAIN_BOUNDS = (-1.0, 1.0)
AVERAGE = "avg_v"


@register_study("maslab-table2")
class MaslabTable2(Study):
    title = "MASLab's Table 2 on your model"
    source = "Ye et al., MASLab, arXiv 2505.16988, Table 2"
    figures = "maslab_table2.yaml"
    question = (
        "Do MASLab's main results hold on this model: how far above Single each method lands, "
        "and which methods rank first?"
    )

    def sweep(self, options: StudyOptions, out: Path) -> dict[str, Any]:
        return {
            **common_options(options, out),
            "methods": [
                {"name": m, "config": {"preset": "maslab"}} if m in WITH_PRESET else m
                for m in METHODS
            ],
            "benchmarks": list(BENCHMARKS),
        }

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        assert figures is not None
        paper_model = against or figures.models()[-1]
        tables: list[Table] = []
        for model in runs.models:
            tables.append(self._accuracies(runs, figures, model, paper_model))
            tables.append(self._gains(runs, figures, model, paper_model))
        return runs.analysis(tables, (*NOT_RUN.values(), *self._ranks(runs, figures, paper_model)))

    def _accuracies(
        self, runs: StudyRuns, figures: PaperFigures, model: str, paper_model: str
    ) -> Table:
        rows = []
        for method in METHODS:
            cells = [
                accuracy_cell(runs.get(b, method, model), figures.value(b, model=paper_model,
                                                                         method=method))
                for b in BENCHMARKS
            ]  # fmt: skip
            rows.append(Row(method, (*cells, self._average(cells))))
        return Table(
            f"Accuracy on {model}", (*BENCHMARKS, "Avg-V"), tuple(rows),
            against=f"the paper's {paper_model}",
        )  # fmt: skip

    @staticmethod
    def _average(cells: list[Cell]) -> Cell:
        """Avg-V: our mean over the benchmarks run, the paper's over the same ones."""
        ran = [c for c in cells if c.ours is not None]
        if not ran:
            return Cell(note="not run")
        ours = mean_of([c.ours for c in ran if c.ours is not None])
        papers = [c.paper for c in ran if c.paper is not None]
        if len(papers) != len(ran):  # the paper has no figure for some benchmark run
            return Cell(ours, note="paper: no row")
        paper = sum(papers) / len(papers)
        return Cell(ours, paper, value_verdict(ours, paper))

    def _gains(self, runs: StudyRuns, figures: PaperFigures, model: str, paper_model: str) -> Table:
        rows = []
        for method in METHODS:
            if method == SINGLE:
                continue
            cells = []
            for b in BENCHMARKS:
                run, single = runs.get(b, method, model), runs.get(b, SINGLE, model)
                paper = _paper_gain(figures, b, paper_model, method)
                if run is None or single is None or not run.summary.n or not single.summary.n:
                    cells.append(Cell(paper=paper, note="not run"))
                    continue
                ours = difference(run, single)
                verdict = sign_verdict(ours, paper) if paper is not None else None
                cells.append(Cell(ours, paper, verdict))
            ran = [c.ours for c in cells if c.ours is not None]
            papers = [c.paper for c in cells if c.ours is not None and c.paper is not None]
            if ran and len(papers) == len(ran):
                mean, paper_mean = mean_of(ran, GAIN_BOUNDS), sum(papers) / len(papers)
                cells.append(Cell(mean, paper_mean, sign_verdict(mean, paper_mean)))
            elif ran:
                cells.append(Cell(mean_of(ran, GAIN_BOUNDS), note="paper: no row"))
            else:
                cells.append(Cell(note="not run"))
            rows.append(Row(method, tuple(cells)))
        return Table(
            f"Gain over Single on {model}", (*BENCHMARKS, "mean"), tuple(rows),
            what="method − Single, percent points, paired by task",
            against=f"the paper's {paper_model}",
        )  # fmt: skip

    def _ranks(self, runs: StudyRuns, figures: PaperFigures, paper_model: str) -> list[str]:
        """Avg-R: each method's mean rank over the benchmarks every method ran (ties share
        their mean rank), ours per model and the paper's over the same benchmarks."""
        lines = []
        for model in runs.models:
            ours = {
                b: {m: run.summary.accuracy for m in METHODS if (run := runs.get(b, m, model))}
                for b in BENCHMARKS
            }
            shared = [b for b in BENCHMARKS if len(ours[b]) == len(METHODS)]
            if not shared:
                continue
            paper = {
                b: {m: v for m in METHODS
                    if (v := figures.value(b, model=paper_model, method=m)) is not None}
                for b in shared
            }  # fmt: skip
            lines.append(
                f"Avg-R on {model} over {len(shared)} benchmarks (lower is better): "
                + _describe_ranks(_mean_ranks({b: ours[b] for b in shared}))
                + f"; the paper's {paper_model} over the same: "
                + _describe_ranks(_mean_ranks(paper))
            )
        return lines


def _paper_gain(figures: PaperFigures, benchmark: str, model: str, method: str) -> float | None:
    value = figures.value(benchmark, model=model, method=method)
    single = figures.value(benchmark, model=model, method=SINGLE)
    return None if value is None or single is None else value - single


def _mean_ranks(scores: dict[str, dict[str, float]]) -> dict[str, float]:
    """Each method's mean rank over the benchmarks (1: the most accurate; ties share the
    mean of their ranks), over the methods each benchmark has."""
    ranks: dict[str, list[float]] = {}
    for by_method in scores.values():
        ordered = sorted(by_method.values(), reverse=True)
        for method, value in by_method.items():
            first = ordered.index(value) + 1
            ties = ordered.count(value)
            ranks.setdefault(method, []).append(first + (ties - 1) / 2)
    return {m: sum(r) / len(r) for m, r in ranks.items()}


def _describe_ranks(ranks: dict[str, float]) -> str:
    return ", ".join(f"{m} {r:.1f}" for m, r in sorted(ranks.items(), key=lambda kv: kv[1]))
