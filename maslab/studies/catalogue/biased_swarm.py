"""Bias amplification along role DAGs: the Gini of each agent's choice probabilities, by topology.

Li, Gao, Wang, "Aligned Agents, Biased Swarm: Measuring Bias Amplification in Multi-Agent
Systems", arXiv 2604.08963 (ICLR 2026); code github.com/weizhihao1/MAS-Bias. The one figure held
(``biased_swarm.yaml``) is the research notes' approximate GPT-4o-mini chain value, from a
secondary digest; the notes give no table of the paper's numbers.

Grid: ``dag_pipeline`` at each topology preset (``chain`` (the Judge, Doctor, Engineer,
Summarizer mix), ``chain_plain``, ``chain_persona``, ``chain_function``: 4 agents; ``spindle``: 7;
``parallel`` and ``ffn``: 6; ``iteration``: the FFN unit 4 times, 24) and a single agent
(``single``: ``vanilla``, one call on the scenario) × Discrim-Eval-Open, implicit
(``discrim_eval_open``) and explicit (``discrim_eval_open_explicit``) demographics, measured by
``choice_bias``.

Analysis, per model and scenario set. Everything rests on the measured Gini coefficient of each
agent position's probability vector (:class:`~maslab.bench.evaluation.Score` ``details``; the
score's ``correct`` is no verdict and a run's accuracy is meaningless): per task, the mean
over its repeats; over tasks, the mean with a 95% percentile bootstrap interval (tasks
resampled, 2,000 draws, paired across whatever the figure compares). Tables: the Gini of the
first and the final agent, the final agent's rise over the first (whose sign the paper says is
positive in every topology) and over the single agent, paired by task; the amplification as
the paper defines it, relative Gini, mean Gini at a position over mean Gini of agent 1 (of the
final agent here; beside it the same ratio against the single agent's mean Gini); and the
relative Gini at every position (the iterated FFN's by iteration and role).

Deviations: the prompts and personas are maslab's (``dag_pipeline``); the paper has no
single-agent baseline apart from its agent 1, so the single agent is maslab's control, and it
is ``vanilla`` rather than a one-node ``dag_pipeline`` (a sweep cannot give ``dag_pipeline`` its
own ``nodes``: the config override cannot descend into a field whose default is None), so it has
no persona and, with ``--native``, no JSON response format where a node has one; the
paper's different-model setting (``--model-role``), its trigger-injection experiment and its
variance, entropy and KL curves are not in the report (``bias_summary`` gives the last three
per run).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from maslab.studies.base import (
    Analysis,
    Cell,
    Row,
    Study,
    StudyOptions,
    StudyRuns,
    Table,
    common_options,
    register_study,
)
from maslab.studies.estimates import Estimate, sign_verdict, value_verdict
from maslab.studies.figures import PaperFigures

if TYPE_CHECKING:
    from maslab.store.records import ResultRecord

FFN_ROLES = ("Judge", "Doctor", "Engineer", "Lawyer", "Merchant", "Summarizer")
"""The paper's six FFN roles in node order, which each iteration of the ``iteration`` topology
runs once (as ``dag_pipeline``'s presets order them: a study knows a method by its runs only)."""

SINGLE = "single"
TOPOLOGIES = ("chain", "chain_plain", "chain_persona", "chain_function", "spindle", "parallel",
              "ffn", "iteration")  # fmt: skip
LABELS = (SINGLE, *TOPOLOGIES)
ITERATION = "iteration"
BENCHMARKS = ("discrim_eval_open", "discrim_eval_open_explicit")
RELATIVE = "relative_gini"
PAPER_TOPOLOGY = {t: "chain" for t in TOPOLOGIES if t.startswith("chain")}
"""The paper's row each of our topologies is compared with (the notes name no chain variant)."""
RESAMPLES = 2000
SEED = 0
RISES = 1.0
"""The sign of the paper's finding that the Gini grows from the first agent to the last."""


@dataclass(frozen=True)
class PositionGini:
    """One run's measured Gini by agent position: ``by_position[k][task]`` is the mean over
    the task's repeats of position ``k``'s Gini (1-based); ``replies`` agent replies measured,
    ``unread`` of them unreadable (the default 0.33/0.33/0.34 stood in), ``unmeasured`` samples
    with nothing to measure (errored, or no agent reply)."""

    by_position: dict[int, dict[str, float]]
    replies: int = 0
    unread: int = 0
    unmeasured: int = 0

    @property
    def final(self) -> int:
        """The last position: the topology's final agent."""
        return max(self.by_position, default=0)

    def at(self, position: int) -> dict[str, float]:
        return self.by_position.get(position, {})


def position_ginis(records: Iterable[ResultRecord]) -> PositionGini:
    """The measured Gini of every position of ``records`` (a run's), each task's repeats
    averaged; never their ``correct`` (a measurement is no verdict)."""
    sums: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    replies = unread = unmeasured = 0
    for record in records:
        rows = record.score.details.get("positions", []) if record.score is not None else []
        if not rows:
            unmeasured += 1
            continue
        for row in rows:
            sums[int(row["position"])][record.task_id].append(float(row["gini"]))
            replies += 1
            unread += not row.get("parsed", True)
    by_position = {
        k: {task: sum(values) / len(values) for task, values in tasks.items()}
        for k, tasks in sorted(sums.items())
    }
    return PositionGini(by_position, replies, unread, unmeasured)


def _resampled_means(columns: Sequence[Sequence[float]]) -> np.ndarray:
    """Each column's mean in each of :data:`RESAMPLES` resamples of the tasks, the same tasks
    drawn for every column (they are paired by task): shape (columns, resamples)."""
    data = np.asarray(columns, dtype=float)
    rng = np.random.default_rng(SEED)
    draws = rng.integers(0, data.shape[1], size=(RESAMPLES, data.shape[1]))
    means: np.ndarray = data[:, draws].mean(axis=2)
    return means


def _estimate(value: float, draws: np.ndarray, n: int) -> Estimate:
    low, high = np.quantile(draws, [0.025, 0.975])
    return Estimate(value, float(low), float(high), n)


def _paired(a: dict[str, float], b: dict[str, float]) -> tuple[list[float], list[float]]:
    shared = sorted(a.keys() & b.keys())
    return [a[t] for t in shared], [b[t] for t in shared]


def mean_gini(values: dict[str, float]) -> Estimate | None:
    """The mean over tasks of ``values`` (task -> Gini) with its bootstrap interval."""
    if not values:
        return None
    column = list(values.values())
    return _estimate(float(np.mean(column)), _resampled_means([column])[0], len(column))


def gini_rise(a: dict[str, float], b: dict[str, float]) -> Estimate | None:
    """Mean ``a`` − mean ``b`` over the tasks both have, paired by task, with its interval."""
    x, y = _paired(a, b)
    if not x:
        return None
    gaps = [p - q for p, q in zip(x, y, strict=True)]
    return _estimate(float(np.mean(gaps)), _resampled_means([gaps])[0], len(gaps))


def gini_ratio(a: dict[str, float], b: dict[str, float]) -> Estimate | None:
    """The paper's relative Gini: mean ``a`` / mean ``b`` over the tasks both have, with a
    bootstrap interval that resamples tasks in pairs; None without shared tasks or when mean
    ``b`` is 0 (no ratio: nothing to amplify)."""
    x, y = _paired(a, b)
    if not x or sum(y) <= 0:
        return None
    means = _resampled_means([x, y])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = means[0] / means[1]
    ratios = ratios[~np.isnan(ratios)]  # resamples whose both means are 0 have no ratio
    return _estimate(sum(x) / sum(y), ratios, len(x))


@register_study("biased-swarm")
class BiasedSwarm(Study):
    title = "Aligned agents, biased swarm: bias amplification by topology"
    source = "Li, Gao, Wang, Aligned Agents, Biased Swarm, arXiv 2604.08963 (ICLR 2026)"
    figures = "biased_swarm.yaml"
    question = (
        "Does the Gini of the agents' choice probabilities grow from the first agent of a role "
        "DAG to its last, and how far above a single agent's does the final agent's land, by "
        "topology?"
    )

    def sweep(self, options: StudyOptions, out: Path) -> dict[str, Any]:
        return {
            **common_options(options, out),
            "methods": [
                {"name": "vanilla", "label": SINGLE},
                *(
                    {"name": "dag_pipeline", "label": t, "config": {"topology": t}}
                    for t in TOPOLOGIES
                ),
            ],
            "benchmarks": list(BENCHMARKS),
        }

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        assert figures is not None
        paper_model = against or figures.models()[0]
        tables: list[Table] = []
        notes: list[str] = []
        for model in runs.models:
            for benchmark in BENCHMARKS:
                measured = {
                    label: position_ginis(run.records)
                    for label in LABELS
                    if (run := runs.get(benchmark, label, model)) is not None and run.records
                }
                if not measured:
                    continue
                where = f"{benchmark}, {model}"
                tables.append(_gini_table(measured, where))
                tables.append(_amplification_table(measured, where, figures, paper_model))
                tables.append(_position_table(measured, where))
                if (iterated := measured.get(ITERATION)) is not None and iterated.by_position:
                    tables.append(_iteration_table(iterated, where))
                notes.extend(_reading_notes(measured, where))
        return runs.analysis(tables, notes)


def _absent(m: PositionGini | None) -> str:
    """Why a run has no figures: not run, or nothing in it measured."""
    return "not run" if m is None else "nothing measured"


def _unpaired(single: PositionGini | None) -> str:
    """Why a comparison with the single agent has no figure (its Gini aside)."""
    if single is None or not single.by_position:
        return f"single: {_absent(single)}"
    return "no task in common with single"


def _shared(a: dict[str, float], b: dict[str, float]) -> bool:
    return bool(a.keys() & b.keys())


def _rows(measured: dict[str, PositionGini]) -> list[tuple[str, PositionGini | None]]:
    return [(label, measured.get(label)) for label in LABELS]


def _gini_table(measured: dict[str, PositionGini], where: str) -> Table:
    single = measured.get(SINGLE)
    rows = []
    for label, m in _rows(measured):
        if m is None or not m.by_position:
            rows.append(Row(label, (Cell(note=_absent(m)),) * 4))
            continue
        first, final = m.at(1), m.at(m.final)
        if label == SINGLE:
            one = Cell(note="one agent")
            rows.append(Row(label, (Cell(mean_gini(first)), Cell(mean_gini(final)), one, one)))
            continue
        rise = gini_rise(final, first)
        over_single = gini_rise(final, single.at(single.final)) if single else None
        rows.append(Row(label, (
            Cell(mean_gini(first)),
            Cell(mean_gini(final)),
            Cell(rise, verdict=sign_verdict(rise, RISES)) if rise is not None
            else Cell(note="no tasks"),
            Cell(over_single) if over_single is not None else Cell(note=_unpaired(single)),
        )))  # fmt: skip
    return Table(
        f"Gini by topology on {where}",
        ("first agent", "final agent", "final − first", "final − single agent"),
        tuple(rows),
        what="Gini × 100 of each agent's choice probabilities (0 even, 100 all on one person), "
        "mean over tasks; differences paired by task",
        notes=(
            "Verdicts on final − first: the paper finds the Gini rising with depth in every "
            "topology (a direction, no number, in the research notes).",
        ),
    )


def _amplification_table(
    measured: dict[str, PositionGini], where: str, figures: PaperFigures, paper_model: str
) -> Table:
    single = measured.get(SINGLE)
    rows = []
    for label, m in _rows(measured):
        if label == SINGLE:
            continue
        topology = PAPER_TOPOLOGY.get(label, label)
        paper = figures.value(RELATIVE, model=paper_model, topology=topology)
        if m is None or not m.by_position:
            rows.append(Row(label, (Cell(paper=paper, note=_absent(m)), Cell(note=_absent(m)))))
            continue
        relative = gini_ratio(m.at(m.final), m.at(1))
        if relative is None:
            first = Cell(paper=paper, note="no ratio: the first agent's Gini is 0")
        else:
            verdict = value_verdict(relative, paper) if paper is not None else None
            first = Cell(relative, paper, verdict)
        over = gini_ratio(m.at(m.final), single.at(single.final)) if single else None
        if over is not None:
            second = Cell(over)
        elif single is not None and _shared(m.at(m.final), single.at(single.final)):
            second = Cell(note="no ratio: the single agent's Gini is 0")
        else:
            second = Cell(note=_unpaired(single))
        rows.append(Row(label, (first, second)))
    return Table(
        f"Bias amplification on {where}",
        ("relative Gini (final ÷ first)", "final ÷ single agent"),
        tuple(rows),
        what="mean Gini of the final agent over that of agent 1 (the paper's relative Gini), "
        "and over the single agent's; 1 = no amplification",
        against=f"the paper's {paper_model}",
        percent=False,
        notes=(
            "The paper's chain value is approximate and second-hand (see the notes below), and "
            "the notes name neither its chain variant nor its scenario set: it stands beside "
            "every chain variant on both sets.",
        ),
    )


def _position_table(measured: dict[str, PositionGini], where: str) -> Table:
    """The relative Gini at each position of the topologies but the iterated one."""
    shown = {label: m for label, m in measured.items() if label not in (SINGLE, ITERATION)}
    positions = max((m.final for m in shown.values()), default=0)
    rows = []
    for label, m in _rows(shown):
        if m is not None and m.by_position:
            first = m.at(1)
            cells = [_relative(m.at(k), first) if k <= m.final else Cell(note="")
                     for k in range(1, positions + 1)]  # fmt: skip
            rows.append(Row(label, tuple(cells)))
    return Table(
        f"Relative Gini by agent position on {where}",
        tuple(str(k) for k in range(1, positions + 1)),
        tuple(rows),
        what="mean Gini at each position (in node order) over that of position 1",
        percent=False,
    )


def _iteration_table(m: PositionGini, where: str) -> Table:
    """The relative Gini of the iterated FFN, one row per iteration, one column per role."""
    unit = len(FFN_ROLES)
    first = m.at(1)
    rows = [
        Row(f"iteration {t + 1}", tuple(_relative(m.at(t * unit + k), first)
                                         for k in range(1, unit + 1)))
        for t in range(m.final // unit)
    ]  # fmt: skip
    return Table(
        f"Relative Gini across iterations on {where}",
        FFN_ROLES,
        tuple(rows),
        what="mean Gini of each agent of the iterated FFN over that of the first Judge",
        percent=False,
    )


def _relative(at: dict[str, float], first: dict[str, float]) -> Cell:
    ratio = gini_ratio(at, first)
    return Cell(ratio) if ratio is not None else Cell(note="no ratio")


def _reading_notes(measured: dict[str, PositionGini], where: str) -> list[str]:
    """What the figures rest on, where it is not every reply read: unreadable replies, and
    samples with nothing measured."""
    notes = []
    for label, m in measured.items():
        if m.unread:
            notes.append(
                f"{label} on {where}: {m.unread} of {m.replies} agent replies unreadable, "
                "counted as 0.33/0.33/0.34 (Gini 0.01), as the paper does"
            )
        if m.unmeasured:
            notes.append(f"{label} on {where}: {m.unmeasured} samples with nothing to measure")
    return notes
