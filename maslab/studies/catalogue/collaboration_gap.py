"""The Collaboration Gap: the user's model alone and in pairs on split mazes, beside the paper.

Davidson, Fourney, Amershi, West, Horvitz, Kamar, "The Collaboration Gap", arXiv 2511.02687
(November 2025); the figures it holds are those the project's research notes give (see
``collaboration_gap.yaml``).

Grid, on the ``collab_maze`` benchmark (6x6 mazes, 30% walls, shortest path 7 to 9 steps, two
partial maps whose union is the maze), every cell scored by the ``collab_maze`` evaluator:

- the user's model alone, with the full maze (``collab_pair`` ``mode=solo_full``) and with both
  partial maps (``solo_distributed``), each with the paper's one critic step;
- the user's model paired with a copy of itself (``collab_pair``, the homogeneous pair).

With a partner model (one of ``--model-role weak=SPEC``: a weaker partner, ``strong=SPEC``: a
stronger one, or ``agent_2=SPEC``: a partner taken as the weaker), also: the partner alone (both
solo settings) and with itself; the two heterogeneous pairs, strong model first and weak model
first (``collab_pair`` with ``agent_1`` or ``agent_2`` on the partner); and relay inference
(``relay``), the strong primer (the strong model speaks first for K turns, then the weak one
takes its side) and the strong recovery (the weak pair for K turns, then the strong model takes
the first side), at the paper's K in {2, 4, 6, 8}.

Analysis, per model of ours, on the paper's weighted outcome (a − b)/a, unclamped (negative
for a walk that ends farther from the goal than it began), each figure with a bootstrap 95%
interval over mazes:

- the outcome (and the binary success) of every setting, a homogeneous pair's beside the
  paper's for the same model when the paper has it, else for ``against`` (by default
  gpt-4.1-mini);
- the collaboration gap: how much lower a pair scores than its members alone, the members'
  mean solo outcome − the pair's, paired by maze, against each solo setting; the sign of a
  homogeneous pair's gap against the paper's direction (pairs below their members alone);
- the speaking order: strong first − weak first, against the paper's o3 + gpt-4.1-mini;
- relay inference: each relay's outcome and its difference from the weak pair and from the
  strong-first pair; the strong primer at K=2 against the paper's direction (it lifts the weak
  pair).

Deviations: the notes give no formula for the gap, nor the paper's solo figures, so gap
magnitudes are not compared, only the direction the notes state. Moves are agreed live by MOVE
lines and the route is read by a parser, not by the paper's gpt-4.1 grader (see
``collab_pair``); relay continues its own first K turns instead of frozen earlier rollouts. One
partner model (the paper paired 32), the main 6x6 setting only (no maze-size or density
ablation); by default 100 mazes per cell (the paper: at least 100 rollouts solo and homogeneous,
50 per heterogeneous pairing). A sample that errored counts as outcome 0 (no progress).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from maslab.core.roles import parse_model_roles
from maslab.errors import ConfigError
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
    from maslab.store.records import ResultRecord

BENCHMARK = "collab_maze"
SOLOS = ("solo_full", "solo_distributed")
SOLO_NAMES = {"solo_full": "solo-full", "solo_distributed": "solo-distributed"}
PAIR = "pair"
PARTNER = "partner_"  # the prefix of the partner's own cells
STRONG_FIRST, WEAK_FIRST = "pair_strong_first", "pair_weak_first"
K_VALUES = (2, 4, 6, 8)
VARIANTS = {"strong_primer": "primer", "strong_recovery": "recovery"}
STRENGTH_KEYS = {STRONG_FIRST: "agent_2", WEAK_FIRST: "agent_1"}
"""The role a mixed pair gives the partner when the user's model is the strong one (a relay:
``weak``)."""
PARTNER_ROLES = {"weak": True, "strong": False, "agent_2": True}
"""The roles that name the partner, and whether the user's model is then the strong one."""
DEFAULT_AGAINST = "gpt-4.1-mini"
HOMOGENEOUS_COLUMN = "pair"
ORDER_ROW = {"strong": "o3", "weak": "gpt-4.1-mini"}
PAPER_GAP_SIGN = 1.0
"""The direction of the gap the notes state ("most models are much lower in collaboration than
solo"); they give no solo figures, so no magnitude."""
PAPER_PRIMER_SIGN = 1.0
"""The direction of the K=2 strong primer over the weak pair the notes state ("even K=2
greatly improves B+B outcomes"); no figure."""


def relay_label(variant: str, k: int) -> str:
    return f"relay_{VARIANTS[variant]}_k{k}"


@dataclass(frozen=True)
class Partner:
    """The second model: its role entry (``model`` and any sampling fields), and whether the
    user's model is the strong one of the two."""

    entry: Mapping[str, Any]
    model_is_strong: bool

    @property
    def spec(self) -> str:
        return str(self.entry["model"])


def partner_of(model_roles: Sequence[str]) -> Partner | None:
    """The partner the options' ``NAME=SPEC`` entries name (None: none); a one-line
    ConfigError for a name that is not one of :data:`PARTNER_ROLES`, or for two partners."""
    roles = parse_model_roles(model_roles)
    if unknown := sorted(roles.keys() - PARTNER_ROLES.keys()):
        raise ConfigError(
            f"collaboration-gap: --model-role {unknown[0]} is not one it takes; give the partner "
            "model as weak=SPEC (a weaker partner), strong=SPEC (a stronger one) or agent_2=SPEC "
            "(taken as the weaker)"
        )
    if len(roles) > 1:
        raise ConfigError(
            f"collaboration-gap: one partner model, by one of weak, strong or agent_2; got "
            f"{', '.join(sorted(roles))}"
        )
    if not roles:
        return None
    name, entry = next(iter(roles.items()))
    if "model" not in entry:
        raise ConfigError(f"collaboration-gap: --model-role {name}=SPEC names no model")
    return Partner(entry, PARTNER_ROLES[name])


# --- the weighted outcome and the gap -------------------------------------------------------


def weighted_outcome(record: ResultRecord) -> float:
    """The paper's weighted outcome (a − b)/a of one sample, unclamped, as the evaluator
    records it (``details["outcome"]``), else its clamped score; 0 (no progress) for a sample
    with no score."""
    if record.score is None:
        return 0.0
    return float(record.score.details.get("outcome", record.score.value))


def task_outcomes(records: Sequence[ResultRecord]) -> dict[str, float]:
    """Each task's mean weighted outcome over its repeats."""
    by_task: dict[str, list[float]] = {}
    for record in records:
        by_task.setdefault(record.task_id, []).append(weighted_outcome(record))
    return {task: sum(values) / len(values) for task, values in by_task.items()}


def combination(terms: Sequence[tuple[float, Sequence[ResultRecord]]]) -> Estimate | None:
    """Σ weight × outcome over the runs in ``terms``, per task on the tasks all of them ran,
    its mean over those tasks with a bootstrap 95% interval (None: no task in common)."""
    from maslab.analysis.stats import bootstrap_ci

    outcomes = [(weight, task_outcomes(records)) for weight, records in terms]
    shared = sorted(set.intersection(*(set(o) for _, o in outcomes)))
    if not shared:
        return None
    values = [sum(weight * o[task] for weight, o in outcomes) for task in shared]
    low, high = bootstrap_ci(values)
    return Estimate(sum(values) / len(values), low, high, len(values))


def outcome(records: Sequence[ResultRecord]) -> Estimate | None:
    """The mean weighted outcome of a run's records, with its interval."""
    return combination([(1.0, records)])


def gap(members: Sequence[Sequence[ResultRecord]], pair: Sequence[ResultRecord]) -> Estimate | None:
    """The collaboration gap: the members' mean outcome alone − the pair's, paired by task
    (positive: the pair does worse than its members alone)."""
    share = 1.0 / len(members)
    return combination([*((share, m) for m in members), (-1.0, pair)])


def difference(a: Sequence[ResultRecord], b: Sequence[ResultRecord]) -> Estimate | None:
    """``a``'s weighted outcome − ``b``'s, paired by task."""
    return combination([(1.0, a), (-1.0, b)])


def model_name(spec: str) -> str:
    """The model's name in a spec: 'openai:gpt-4.1-mini@http://...' -> 'gpt-4.1-mini'."""
    return spec.split(":", 1)[-1].split("@", 1)[0].lower()


# --- the study ------------------------------------------------------------------------------


@register_study("collaboration-gap")
class CollaborationGap(Study):
    title = "The Collaboration Gap on your model"
    source = "Davidson et al., The Collaboration Gap, arXiv 2511.02687"
    figures = "collaboration_gap.yaml"
    question = (
        "How much worse does this model do on a maze when it must solve it with a partner "
        "(a copy of itself, or another model) than alone, does it matter who speaks first, and "
        "does relay inference close the gap?"
    )

    def sweep(self, options: StudyOptions, out: Path) -> dict[str, Any]:
        partner = partner_of(options.model_roles)
        common = {k: v for k, v in common_options(options, out).items() if k != "model_roles"}
        methods: list[dict[str, Any]] = [
            *({"name": "collab_pair", "label": s, "config": {"mode": s}} for s in SOLOS),
            {"name": "collab_pair", "label": PAIR},
        ]
        if partner is not None:
            methods += _partner_cells(partner)
        return {**common, "methods": methods, "benchmarks": [BENCHMARK]}

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        assert figures is not None
        tables: list[Table] = []
        notes: list[str] = []
        for model in runs.models:
            found = {
                label: run
                for label in _labels()
                if (run := runs.get(BENCHMARK, label, model)) is not None and run.summary.n
            }
            sides = _sides(model, found)
            tables.append(_outcomes(found, figures, against, sides))
            tables.append(_gaps(found, sides))
            if sides.partner is None:
                notes.append(
                    f"{model}: no partner model, so no heterogeneous pairs, speaking order or "
                    "relay inference. Add them by running the study in another --out with "
                    "--model-role weak=SPEC (a weaker partner), strong=SPEC (a stronger one) or "
                    "agent_2=SPEC (taken as the weaker)."
                )
                continue
            tables.append(_order(found, figures, sides))
            tables.append(_relay(found, sides))
            notes += _strength_check(found, sides)
        notes.append(
            "The weighted outcome is (a − b)/a: a the shortest path, b the distance from where "
            "the route stopped to the goal (1 at the goal, negative farther away than the "
            "start); ×100 in the tables. Intervals are bootstrap 95% over mazes."
        )
        return runs.analysis(tables, notes)


def _partner_cells(partner: Partner) -> list[dict[str, Any]]:
    entry = dict(partner.entry)
    first, second = ("agent_2", "agent_1") if partner.model_is_strong else ("agent_1", "agent_2")
    relay_role = "weak" if partner.model_is_strong else "strong"
    return [
        *(
            {"name": "collab_pair", "label": PARTNER + s, "config": {"mode": s},
             "model_roles": {"agent": entry}}
            for s in SOLOS
        ),
        {"name": "collab_pair", "label": PARTNER + PAIR, "model_roles": {"agent": entry}},
        {"name": "collab_pair", "label": STRONG_FIRST, "model_roles": {first: entry}},
        {"name": "collab_pair", "label": WEAK_FIRST, "model_roles": {second: entry}},
        *(
            {"name": "relay", "label": relay_label(variant, k),
             "config": {"variant": variant, "swap_after": k}, "model_roles": {relay_role: entry}}
            for variant in VARIANTS
            for k in K_VALUES
        ),
    ]  # fmt: skip


def _labels() -> list[str]:
    base = [*SOLOS, PAIR]
    return [
        *base, *(PARTNER + label for label in base), STRONG_FIRST, WEAK_FIRST,
        *(relay_label(v, k) for v in VARIANTS for k in K_VALUES),
    ]  # fmt: skip


@dataclass(frozen=True)
class _Sides:
    """Who is who in a model's column: the model, its partner (None: none) and which of the
    two is strong, read from the runs' model roles."""

    model: str
    partner: str | None
    model_is_strong: bool

    @property
    def strong(self) -> str:
        return self.model if self.model_is_strong or self.partner is None else self.partner

    @property
    def weak(self) -> str:
        return self.partner if self.model_is_strong and self.partner else self.model


def _sides(model: str, found: Mapping[str, RunResult]) -> _Sides:
    """The partner and the strength order, from the roles the partner cells ran with: a
    mixed pair or a relay says which side the partner took (else the model counts as strong)."""
    partner, model_is_strong = None, True
    for label, run in found.items():
        roles = run.manifest.model_roles
        if not roles:
            continue
        key, entry = next(iter(roles.items()))
        partner = partner or str(entry["model"])
        if label in STRENGTH_KEYS or label.startswith("relay_"):
            return _Sides(model, partner, key == STRENGTH_KEYS.get(label, "weak"))
    return _Sides(model, partner, model_is_strong)


def _pair_name(first: str, second: str) -> str:
    return f"{first} + {second}" if first != second else f"{first} with itself"


def _paper_model(spec: str, figures: PaperFigures, against: str | None) -> str:
    """The paper's model to set beside ``spec``: ``against`` if given, else the paper's model
    of the same name, else :data:`DEFAULT_AGAINST`."""
    if against is not None:
        return against
    name = model_name(spec)
    return next((m for m in figures.models() if m.lower() == name), DEFAULT_AGAINST)


def _value_cell(run: RunResult | None, paper: float | None, verdict: bool = True) -> Cell:
    if run is None:
        return Cell(paper=paper, note="not run")
    ours = outcome(run.records)
    if ours is None:
        return Cell(paper=paper, note="no samples")
    judged = value_verdict(ours, paper) if paper is not None and verdict else None
    return Cell(ours, paper, judged)


def _estimate_cell(ours: Estimate | None, paper_sign: float | None = None) -> Cell:
    if ours is None:
        return Cell(note="not run")
    return Cell(ours, verdict=sign_verdict(ours, paper_sign) if paper_sign is not None else None)


def _order_paper(figures: PaperFigures, sides: _Sides) -> tuple[float | None, float | None, bool]:
    """The paper's strong-first and weak-first outcomes (o3 + gpt-4.1-mini), and whether our
    two models are those (then their values are judged, not only set beside ours)."""
    first = figures.value("strong_first", **ORDER_ROW)
    then = figures.value("weak_first", **ORDER_ROW)
    same = (
        model_name(sides.strong) == ORDER_ROW["strong"]
        and model_name(sides.weak) == ORDER_ROW["weak"]
    )
    return first, then, same


def _outcomes(
    found: Mapping[str, RunResult], figures: PaperFigures, against: str | None, sides: _Sides
) -> Table:
    rows: list[Row] = []
    owners = [("", sides.model)] + ([(PARTNER, sides.partner)] if sides.partner else [])
    for prefix, spec in owners:
        for solo in SOLOS:
            run = found.get(prefix + solo)
            rows.append(Row(f"{spec} {SOLO_NAMES[solo]}", (_value_cell(run, None),
                                                            accuracy_cell(run, None))))  # fmt: skip
        run = found.get(prefix + PAIR)
        paper = figures.value(HOMOGENEOUS_COLUMN, model=_paper_model(spec, figures, against))
        rows.append(Row(_pair_name(spec, spec), (_value_cell(run, paper),
                                                 accuracy_cell(run, None))))  # fmt: skip
    if sides.partner:
        first, then, same = _order_paper(figures, sides)
        for label, pair, paper in (
            (STRONG_FIRST, (sides.strong, sides.weak), first),
            (WEAK_FIRST, (sides.weak, sides.strong), then),
        ):
            run = found.get(label)
            rows.append(Row(f"{_pair_name(*pair)} ({pair[0]} first)",
                            (_value_cell(run, paper, same), accuracy_cell(run, None))))  # fmt: skip
    paper_models = sorted({_paper_model(spec, figures, against) for _, spec in owners if spec})
    return Table(
        f"Alone and in pairs: {sides.model}", ("weighted outcome", "success"), tuple(rows),
        what="weighted outcome ×100, success %",
        against=f"the paper's {', '.join(paper_models)} (pairs with itself)"
        + ("; o3 + gpt-4.1-mini (mixed pairs)" if sides.partner else ""),
    )  # fmt: skip


def _gaps(found: Mapping[str, RunResult], sides: _Sides) -> Table:
    rows: list[Row] = []
    pairs: list[tuple[str, str, list[str]]] = [(_pair_name(sides.model, sides.model), PAIR, [""])]
    if sides.partner:
        both = ["", PARTNER]
        pairs += [
            (_pair_name(sides.partner, sides.partner), PARTNER + PAIR, [PARTNER]),
            (f"{_pair_name(sides.strong, sides.weak)} ({sides.strong} first)", STRONG_FIRST, both),
            (f"{_pair_name(sides.weak, sides.strong)} ({sides.weak} first)", WEAK_FIRST, both),
        ]
    for name, label, members in pairs:
        homogeneous = len(members) == 1
        cells = []
        for solo in SOLOS:
            runs = [found.get(prefix + solo) for prefix in members]
            pair = found.get(label)
            if pair is None or any(r is None for r in runs):
                cells.append(Cell(note="not run"))
                continue
            ours = gap([r.records for r in runs if r is not None], pair.records)
            cells.append(_estimate_cell(ours, PAPER_GAP_SIGN if homogeneous else None))
        rows.append(Row(name, tuple(cells)))
    return Table(
        f"Collaboration gap: {sides.model}", tuple(f"vs {SOLO_NAMES[s]}" for s in SOLOS),
        tuple(rows),
        what="members' mean outcome alone − the pair's, ×100, paired by maze (positive: the pair "
        "does worse)",
        against="the paper's direction for pairs with itself (below the model alone; the notes "
        "give no solo figures)",
    )  # fmt: skip


def _order(found: Mapping[str, RunResult], figures: PaperFigures, sides: _Sides) -> Table:
    first, then, same = _order_paper(figures, sides)
    strong_first, weak_first = found.get(STRONG_FIRST), found.get(WEAK_FIRST)
    if strong_first is None or weak_first is None:
        diff = Cell(paper=_minus(first, then), note="not run")
    else:
        ours = difference(strong_first.records, weak_first.records)
        paper = _minus(first, then)
        diff = (
            Cell(note="no shared mazes", paper=paper)
            if ours is None
            else Cell(ours, paper, sign_verdict(ours, paper) if paper is not None else None)
        )
    row = Row(
        _pair_name(sides.strong, sides.weak),
        (_value_cell(strong_first, first, same), _value_cell(weak_first, then, same), diff),
    )
    return Table(
        f"Who speaks first: {sides.model}", ("strong first", "weak first", "strong − weak first"),
        (row,), what="weighted outcome ×100; the difference paired by maze",
        against="the paper's o3 + gpt-4.1-mini",
    )  # fmt: skip


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _relay(found: Mapping[str, RunResult], sides: _Sides) -> Table:
    weak_pair = found.get(PARTNER + PAIR if sides.model_is_strong else PAIR)
    strong_first = found.get(STRONG_FIRST)
    rows = []
    for variant, short in VARIANTS.items():
        for k in K_VALUES:
            run = found.get(relay_label(variant, k))
            cells = [_value_cell(run, None)]
            for base, sign in ((weak_pair, PAPER_PRIMER_SIGN), (strong_first, None)):
                if run is None or base is None:
                    cells.append(Cell(note="not run"))
                    continue
                judged = sign if variant == "strong_primer" and k == 2 else None
                cells.append(_estimate_cell(difference(run.records, base.records), judged))
            rows.append(Row(f"strong {short}, K={k}", tuple(cells)))
    return Table(
        f"Relay inference: {sides.model}",
        ("weighted outcome", f"− {_pair_name(sides.weak, sides.weak)}",
         f"− {sides.strong} first + {sides.weak}"),
        tuple(rows),
        what=f"weighted outcome ×100 and differences paired by maze; strong {sides.strong}, weak "
        f"{sides.weak}; primer: strong first for K turns, then weak; recovery: the weak pair for "
        "K turns, then strong on the first side",
        against="the paper's direction for the primer at K=2 (above the weak pair; no figure)",
    )  # fmt: skip


def _strength_check(found: Mapping[str, RunResult], sides: _Sides) -> list[str]:
    """A note when the measured solo outcomes order the two models the other way round."""
    mine, theirs = found.get(SOLOS[0]), found.get(PARTNER + SOLOS[0])
    if mine is None or theirs is None or sides.partner is None:
        return []
    ours, partner = outcome(mine.records), outcome(theirs.records)
    if ours is None or partner is None:
        return []
    if (ours.value < partner.value) == sides.model_is_strong and ours.value != partner.value:
        return [
            f"{sides.model}: the study took {sides.strong} as the strong model, but "
            f"{sides.weak} scores higher solo-full ({100 * max(ours.value, partner.value):.1f} "
            f"against {100 * min(ours.value, partner.value):.1f}); give the partner as the other "
            "of weak=SPEC or strong=SPEC to swap them."
        ]
    return []
