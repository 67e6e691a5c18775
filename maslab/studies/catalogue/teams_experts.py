"""Multi-agent teams hold experts back: a self-organising team with a stronger expert, under
the paper's conditions, against its members alone.

Pappu, El, Cao, di Nolfo, Sun, Cao, Zou, "Multi-Agent Teams Hold Experts Back", arXiv
2602.01011 (ICML 2026); the figures are v1's per-benchmark synergy gaps and the paper's signs,
as the project's research notes give them (``teams_experts.yaml``).

Grid: ``self_org_team`` (4 members, 4 rounds, round-robin turns, a majority vote over each
member's final answer) under No Information, Expert Not Mentioned and Reveal Expert, Best
Individual (the expert, ``member_1``, alone) and one other member alone, × MMLU-Pro,
GPQA-Diamond and MATH-500. The expert's model is a model role: ``--model-role member_1=SPEC``
(the method's agent name for its expert); without one the expert runs on the user's model, like
every member, and the gaps measure teamwork alone.

Analysis, per model of ours and benchmark, on the tasks all five cells ran: each cell's
accuracy; for each team, the team against its best and its average member alone (strong and
weak synergy) and the relative synergy gap, (best − team) / best; the identification gap,
f(Reveal Expert) − f(Expert Not Mentioned), the leveraging gap, f(Best Individual) −
f(Reveal Expert), and how much the second exceeds the first. The figures are
:mod:`maslab.analysis.synergy`'s (a positive gap is accuracy lost); their 95% intervals are
percentile bootstraps over tasks (seed 0, the best member held at the one chosen on all tasks),
as :func:`maslab.studies.estimates.difference` pairs two runs.

Deviations: the reveal note is maslab's own, not the paper's GEPA-tuned one. The three members
on the user's model share one individual run (same model, same prompt), where the paper ran
each alone; the at-least-one-correct oracle is therefore not reported. On these benchmarks
No Information and Expert Not Mentioned give every member the same prompts (the method's two
conditions differ only by the expert's private note, and these benchmarks have none): No
Information runs with the next seed, so that the response cache does not replay Expert Not
Mentioned into it, and their difference (reported) is sampling noise, a check on the
intervals. SimpleQA and HLE are not run (maslab has neither), nor the
paper's ranking and hidden-profile tasks, team sizes, random schedules, the random-member
answer or the adversarial variant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from maslab.analysis.stats import bootstrap_ci
from maslab.analysis.synergy import (
    ConditionGaps,
    Outcomes,
    Synergy,
    condition_gaps,
    synergy,
    task_scores,
)
from maslab.core.roles import agent_settings, numbered
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
from maslab.studies.estimates import Estimate, sign_verdict, value_verdict
from maslab.studies.figures import PaperFigures

if TYPE_CHECKING:
    from maslab.analysis.run_result import RunResult

METHOD = "self_org_team"
ROLE = "member"
MEMBERS, ROUNDS = 4, 4
EXPERT = "member_1"
"""The expert's agent name: ``--model-role member_1=SPEC`` gives it its own model."""
ALONE_MEMBER = "member_2"
"""The member whose individual run stands for every member on the user's model."""
NI, ENM, RE, BI = "no_information", "expert_not_mentioned", "reveal_expert", "best_individual"
ALONE = "member_alone"
TEAMS = (NI, ENM, RE)
CELLS = (*TEAMS, BI, ALONE)
NAMES = {
    NI: "No Information", ENM: "Expert Not Mentioned", RE: "Reveal Expert",
    BI: "Best Individual (the expert alone)", ALONE: "a member alone",
}  # fmt: skip
BENCHMARKS = ("mmlu_pro", "gpqa_diamond", "math500")
PAPER_GAP_BESIDE = ENM
"""The team the paper's relative synergy gaps are set beside (the notes do not say theirs)."""
DIFFERENCE = (-1.0, 1.0)
NOT_RUN = (
    "Not run: SimpleQA and HLE (text-only), which maslab does not have, and the paper's "
    "ranking and hidden-profile tasks."
)
SAME_PROMPTS = (
    "No Information and Expert Not Mentioned give every member the same prompts here (they "
    "differ only by the expert's private note, which these benchmarks do not have); No "
    "Information runs with the next seed, so it draws afresh, and their difference is sampling "
    "noise."
)
OWN_SEED = {NI: 1}
"""Cells run with the study's seed plus this: their prompts are another cell's, which the
response cache would otherwise replay."""


def cell_config(cell: str) -> dict[str, Any]:
    """The method's config for one cell of the grid."""
    condition, expert = (BI, ALONE_MEMBER) if cell == ALONE else (cell, EXPERT)
    return {"condition": condition, "expert": expert, "members": MEMBERS, "rounds": ROUNDS}


@dataclass(frozen=True)
class Findings:
    """One benchmark's figures on one model, over the tasks all five cells ran."""

    tasks: int
    synergy: dict[str, Synergy]
    """Each team (by condition) against the members alone."""
    gaps: ConditionGaps
    best_member: str
    """The member with the best individual accuracy (:attr:`Synergy.best_member`)."""
    versus_best: dict[str, Estimate]
    """Team − best member alone, by team."""
    versus_average: dict[str, Estimate]
    """Team − the average member alone, by team."""
    relative_gap: dict[str, Estimate | None]
    """(best − team) / best, by team; None when only the best member's accuracy is 0."""
    noise: Estimate
    """No Information − Expert Not Mentioned: the same prompts, drawn afresh."""
    identification: Estimate
    leveraging: Estimate
    leveraging_over_identification: Estimate


def members_of(outcomes: Mapping[str, Outcomes]) -> dict[str, Outcomes]:
    """Every member's individual outcomes: the expert's Best Individual run, and the one
    member-alone run for each member on the user's model."""
    return {
        name: outcomes[BI] if name == EXPERT else outcomes[ALONE]
        for name in numbered(ROLE, MEMBERS)
    }


def findings(outcomes: Mapping[str, Outcomes], seed: int = 0) -> Findings:
    """The figures of the five cells' outcomes (by cell label; every one over the same tasks)."""
    members = members_of(outcomes)
    by_team = {team: synergy(outcomes[team], members) for team in TEAMS}
    gaps = condition_gaps(outcomes[ENM], outcomes[RE], outcomes[BI])
    scores = {label: task_scores(outcomes[label]) for label in CELLS}
    tasks = sorted(scores[BI])
    per_task = {label: np.array([float(s[t]) for t in tasks]) for label, s in scores.items()}
    best = by_team[ENM].best_member  # the same for every team: the members do not change
    best_label = BI if best == EXPERT else ALONE
    share = {BI: 1 / MEMBERS, ALONE: (MEMBERS - 1) / MEMBERS}  # of the average member

    def estimate(exact: Fraction, weights: Mapping[str, float], bounds: tuple[float, float]
                 ) -> Estimate:  # fmt: skip
        return contrast(per_task, weights, exact, bounds, seed)

    versus_best, versus_average, relative = {}, {}, {}
    for team, found in by_team.items():
        versus_best[team] = estimate(found.team - found.best, {team: 1, best_label: -1}, DIFFERENCE)
        versus_average[team] = estimate(
            found.team - found.average,
            {team: 1, BI: -share[BI], ALONE: -share[ALONE]},
            DIFFERENCE,
        )
        relative[team] = relative_gap(per_task[best_label], per_task[team], found, seed)
    return Findings(
        tasks=len(tasks),
        synergy=by_team,
        gaps=gaps,
        best_member=best,
        versus_best=versus_best,
        versus_average=versus_average,
        relative_gap=relative,
        noise=estimate(by_team[NI].team - by_team[ENM].team, {NI: 1, ENM: -1}, DIFFERENCE),
        identification=estimate(gaps.identification_gap, {RE: 1, ENM: -1}, DIFFERENCE),
        leveraging=estimate(gaps.leveraging_gap, {BI: 1, RE: -1}, DIFFERENCE),
        leveraging_over_identification=estimate(
            gaps.leveraging_gap - gaps.identification_gap, {BI: 1, RE: -2, ENM: 1}, (-2.0, 2.0)
        ),
    )


def contrast(
    per_task: Mapping[str, np.ndarray],
    weights: Mapping[str, float],
    exact: Fraction,
    bounds: tuple[float, float],
    seed: int = 0,
) -> Estimate:
    """``exact`` (a weighted sum of the cells' accuracies) with the bootstrap interval over
    tasks of that weighted sum taken task by task."""
    combined = sum(w * per_task[label] for label, w in weights.items())
    assert isinstance(combined, np.ndarray)
    low, high = bootstrap_ci(combined.tolist(), seed=seed)
    return Estimate(float(exact), max(bounds[0], low), min(bounds[1], high), len(combined))


def relative_gap(
    best: np.ndarray, team: np.ndarray, found: Synergy, seed: int = 0
) -> Estimate | None:
    """The relative synergy gap of ``found`` with the bootstrap interval over tasks of
    (mean best − mean team) / mean best (best: the task scores of the member chosen on all
    tasks). None when it is undefined (the best member scored 0, the team did not); a resample
    in which that happens counts as −∞."""
    exact = found.relative_gap
    if exact is None:
        return None

    def ratio(sample: np.ndarray) -> float:
        index = sample.astype(int)
        b, t = float(best[index].mean()), float(team[index].mean())
        if b == 0:
            return 0.0 if t == 0 else -math.inf
        return (b - t) / b

    low, high = bootstrap_ci([float(i) for i in range(len(best))], ratio, seed=seed)
    low = -math.inf if math.isnan(low) else low  # a quantile between −∞ and a finite value
    return Estimate(float(exact), low, min(1.0, high), len(best))


def shared_outcomes(runs: Mapping[str, RunResult]) -> dict[str, list[Any]]:
    """Each run's records on the tasks every run has."""
    tasks = set.intersection(*({r.task_id for r in run.records} for run in runs.values()))
    return {label: [r for r in run.records if r.task_id in tasks] for label, run in runs.items()}


def expert_setting(run: RunResult) -> tuple[str, str]:
    """The expert's model and that of the member alone in ``run`` (its model roles settled as
    the agents' are)."""
    manifest = run.manifest
    chosen = {"model": manifest.model}
    expert = agent_settings(manifest.model_roles, EXPERT, ROLE, chosen)["model"]
    member = agent_settings(manifest.model_roles, ALONE_MEMBER, ROLE, chosen)["model"]
    return str(expert), str(member)


def paper_sign(figures: PaperFigures, figure: str) -> float | None:
    """+1 or −1: the sign the paper's figures give ``figure`` (a row with a ``sign`` key)."""
    for row in figures.rows:
        keys = row.keys
        if keys.get("figure") == figure and "sign" in keys:
            return {"positive": 1.0, "negative": -1.0}[keys["sign"]]
    return None


def _sign_text(sign: float | None) -> str:
    return "" if sign is None else f" (paper: {'> 0' if sign > 0 else '< 0'})"


def _signed(ours: Estimate | None, sign: float | None) -> Cell:
    if ours is None:
        return Cell(note="not run")
    return Cell(ours, verdict=sign_verdict(ours, sign) if sign is not None else None)


@register_study("teams-experts")
class TeamsExperts(Study):
    title = "Multi-agent teams hold experts back"
    source = "Pappu et al., Multi-Agent Teams Hold Experts Back, arXiv 2602.01011"
    figures = "teams_experts.yaml"
    question = (
        "Does a self-organising team with a stronger expert (--model-role member_1=SPEC) do as "
        "well as its expert alone, and is what it loses in finding the expert or in following it?"
    )

    def sweep(self, options: StudyOptions, out: Path) -> dict[str, Any]:
        return {
            **common_options(options, out),
            "methods": [
                {
                    "name": METHOD,
                    "label": cell,
                    "config": cell_config(cell),
                    **({"seed": options.seed + OWN_SEED[cell]} if cell in OWN_SEED else {}),
                }
                for cell in CELLS
            ],
            "benchmarks": list(BENCHMARKS),
        }

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        assert figures is not None
        tables: list[Table] = []
        notes: list[str] = [NOT_RUN, SAME_PROMPTS]
        for model in runs.models:
            done = {
                b: {c: run for c in CELLS if (run := runs.get(b, c, model)) and run.summary.n}
                for b in BENCHMARKS
            }
            found = {
                b: findings(shared_outcomes(cells)) for b, cells in done.items()
                if len(cells) == len(CELLS)
            }  # fmt: skip
            notes.extend(self._setting(model, done))
            tables.append(self._accuracies(done, model))
            tables.extend(self._synergy(found, figures, model))
            tables.append(self._gaps(found, figures, model))
        return runs.analysis(tables, notes)

    @staticmethod
    def _setting(model: str, done: dict[str, dict[str, RunResult]]) -> list[str]:
        """What the expert and the member alone ran on, for ``model``'s runs."""
        run = next((r for cells in done.values() for r in cells.values()), None)
        if run is None:
            return []
        expert, member = expert_setting(run)
        if expert == member:
            return [
                f"On {model} the expert ({EXPERT}) ran on {expert}, as every member did: no "
                f"stronger expert was given (--model-role {EXPERT}=SPEC), so the gaps measure "
                "teamwork alone, not a team holding a stronger expert back."
            ]
        return [f"On {model} the expert ({EXPERT}) ran on {expert}, the other members on {member}."]

    @staticmethod
    def _accuracies(done: dict[str, dict[str, RunResult]], model: str) -> Table:
        rows = [
            Row(NAMES[c], tuple(accuracy_cell(done[b].get(c), None) for b in BENCHMARKS))
            for c in CELLS
        ]
        return Table(f"Accuracy by condition on {model}", BENCHMARKS, tuple(rows))

    @staticmethod
    def _synergy(found: dict[str, Findings], figures: PaperFigures, model: str) -> list[Table]:
        below = paper_sign(figures, "team_minus_best_member")
        rows = []
        for team in TEAMS:
            rows.append(Row(
                f"{NAMES[team]}: team − best member{_sign_text(below)}",
                tuple(_signed(f.versus_best[team] if (f := found.get(b)) else None, below)
                      for b in BENCHMARKS),
            ))  # fmt: skip
            rows.append(Row(
                f"{NAMES[team]}: team − average member",
                tuple(_signed(f.versus_average[team] if (f := found.get(b)) else None, None)
                      for b in BENCHMARKS),
            ))  # fmt: skip
        other = [
            f"On {b} the best member alone was {f.best_member}, on the user's model, not the "
            "expert." for b, f in found.items() if f.best_member != EXPERT
        ]  # fmt: skip
        versus = Table(
            f"Team against its members on {model}", BENCHMARKS, tuple(rows),
            what="team − a member alone, percent points, paired by task (below 0: no strong or "
            "weak synergy)",
            against="the paper's sign: teams never reach strong synergy",
            notes=tuple(other),
        )  # fmt: skip
        gap_rows = []
        for team in TEAMS:
            cells = []
            for b in BENCHMARKS:
                paper = (
                    figures.value(b, figure="relative_synergy_gap")
                    if team == PAPER_GAP_BESIDE else None
                )  # fmt: skip
                f = found.get(b)
                if f is None:
                    cells.append(Cell(paper=paper, note="not run"))
                elif (ours := f.relative_gap[team]) is None:
                    cells.append(Cell(paper=paper, note="undefined: the best member scored 0"))
                else:
                    verdict = value_verdict(ours, paper) if paper is not None else None
                    cells.append(Cell(ours, paper, verdict))
            gap_rows.append(Row(NAMES[team], tuple(cells)))
        relative = Table(
            f"Relative synergy gap on {model}", BENCHMARKS, tuple(gap_rows),
            what="(best member − team) / best member, % (above 0: accuracy the team loses)",
            against=f"the paper's v1 gaps, set beside {NAMES[PAPER_GAP_BESIDE]} (its models)",
        )  # fmt: skip
        return [versus, relative]

    @staticmethod
    def _gaps(found: dict[str, Findings], figures: PaperFigures, model: str) -> Table:
        leveraging = paper_sign(figures, "leveraging_gap")
        more = paper_sign(figures, "leveraging_minus_identification")
        rows = (
            Row(
                f"{NAMES[NI]} − {NAMES[ENM]} (same prompts: noise)",
                tuple(_signed(f.noise if (f := found.get(b)) else None, None)
                      for b in BENCHMARKS),
            ),
            Row(
                f"identification gap: {NAMES[RE]} − {NAMES[ENM]}",
                tuple(_signed(f.identification if (f := found.get(b)) else None, None)
                      for b in BENCHMARKS),
            ),
            Row(
                f"leveraging gap: Best Individual − {NAMES[RE]}{_sign_text(leveraging)}",
                tuple(_signed(f.leveraging if (f := found.get(b)) else None, leveraging)
                      for b in BENCHMARKS),
            ),
            Row(
                f"leveraging − identification gap{_sign_text(more)}",
                tuple(_signed(f.leveraging_over_identification if (f := found.get(b)) else None,
                              more) for b in BENCHMARKS),
            ),
        )  # fmt: skip
        return Table(
            f"Finding the expert and following it on {model}", BENCHMARKS, rows,
            what="accuracy lost, percent points, paired by task",
            against="the paper's signs",
        )  # fmt: skip
