"""What a study is: a grid of runs (a sweep), an analysis of them, and the paper's figures.

A study class names its paper (``source``) and its figures file (``figures``, YAML beside its
module; :mod:`maslab.studies.figures`), builds its sweep for the user's models
(:meth:`Study.sweep`: the sweep file's content, see :mod:`maslab.harness.sweep`) and analyses
the runs that sweep made (:meth:`Study.analyse`), giving :class:`Table` s whose cells hold our
estimate beside the paper's value and the verdict between them. Studies register by name, as
methods do (:func:`register_study`); the bundled ones live in :mod:`maslab.studies.catalogue`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from maslab.registry import Registry
from maslab.studies.estimates import Estimate, Verdict
from maslab.studies.figures import PaperFigures, load_figures

if TYPE_CHECKING:
    from maslab.analysis.run_result import RunResult
    from maslab.llm.pool import ModelPool


@dataclass(frozen=True)
class StudyOptions:
    """What the user chose for a study's runs: the ``models`` (one column each), at most
    ``limit`` tasks per benchmark, ``repeats`` attempts at each, ``model_roles`` (NAME=SPEC)
    for the methods that take them, the ``seed``, the ``benchmark`` of a study that runs on one
    (None: its default, :attr:`Study.benchmark`), and the ``endpoints`` file of the models'
    aliases (not part of what the study is: give it again on each run)."""

    models: tuple[str, ...]
    limit: int | None = None
    repeats: int = 1
    model_roles: tuple[str, ...] = ()
    seed: int = 0
    benchmark: str | None = None
    endpoints: str | None = None


@dataclass(frozen=True)
class Cell:
    """One figure of a table: ours (None: not run, or not yet), the paper's (None: it has
    none for this setting) and the verdict between them (None when either is missing)."""

    ours: Estimate | None = None
    paper: float | None = None
    verdict: Verdict | None = None
    note: str = ""


@dataclass(frozen=True)
class Row:
    label: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Table:
    """A table of the study's report: ``columns`` over ``rows``; ``what`` says what its
    figures are (accuracy in percent, a difference...) and ``against`` which of the paper's
    figures its cells hold."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    what: str = "accuracy, %"
    against: str = ""
    notes: tuple[str, ...] = ()
    percent: bool = True


@dataclass(frozen=True)
class Analysis:
    """What a study found: its tables, what its runs cost, and notes (settings it could not
    run, and why)."""

    tables: tuple[Table, ...]
    calls: int = 0
    tokens: int = 0
    samples: int = 0
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class StudyRuns:
    """The runs of a study's sweep found on disk, by (benchmark label, method label, model);
    a cell not run yet is absent."""

    runs: Mapping[tuple[str, str, str], RunResult]
    models: tuple[str, ...]
    missing: tuple[str, ...] = field(default=())
    """The cells that have no run yet (``benchmark/method/model``)."""
    out: Path = Path()
    """The study's directory (what a study keeps beside its runs is there)."""
    options: StudyOptions = StudyOptions(models=())
    """The options every model of the study ran with."""

    def get(self, benchmark: str, method: str, model: str) -> RunResult | None:
        return self.runs.get((benchmark, method, model))

    def analysis(self, tables: Sequence[Table], notes: Sequence[str] = ()) -> Analysis:
        """The study's finding: ``tables`` and ``notes``, with the calls, tokens and samples of
        every run, in all."""
        calls = tokens = samples = 0
        for run in self.runs.values():
            s = run.summary
            calls += round(s.mean_calls * s.n)
            tokens += round(s.mean_tokens * s.n)
            samples += s.n
        return Analysis(tuple(tables), calls, tokens, samples, tuple(notes))


class Study:
    """A study: subclass it, set the class attributes, write :meth:`sweep` and :meth:`analyse`,
    and register it with :func:`register_study`."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    source: ClassVar[str] = ""
    """The paper (or the question) the study answers, as cited."""
    figures: ClassVar[str | None] = None
    """Its figures file, beside its module (None: a study with no paper's figures)."""
    question: ClassVar[str] = ""
    """What the study asks, in a sentence."""
    benchmark: ClassVar[str | None] = None
    """The default benchmark of a study that runs on one, which ``--benchmark`` replaces;
    None: the study's grid fixes its benchmarks."""
    default_repeats: ClassVar[int] = 1
    """The repeats of each task unless ``--repeats`` says otherwise."""
    methods: ClassVar[tuple[str, ...]] = ()
    """A study on one benchmark: the methods its default :meth:`sweep` runs there."""

    def benchmark_of(self, options: StudyOptions) -> str:
        """The one benchmark the study runs on: the user's choice, else its default."""
        chosen = options.benchmark or self.benchmark
        assert chosen is not None, f"{self.name} fixes its benchmarks"
        return chosen

    def sweep(self, options: StudyOptions, out: Path) -> dict[str, Any]:
        """The sweep file's content (a mapping, as YAML would give it) for ``options``, its
        runs under ``out``; by default, a study on one benchmark's: its :attr:`methods` there."""
        if not self.methods:
            raise NotImplementedError
        return {
            **common_options(options, out),
            "methods": list(self.methods),
            "benchmarks": [self.benchmark_of(options)],
        }

    async def after_runs(
        self, out: Path, runs: StudyRuns, options: StudyOptions, models: ModelPool
    ) -> None:
        """What the study does with its finished runs before they are analysed (a reader's
        verdicts on samples, with ``models``), kept in ``out`` and resumable; by default
        nothing."""

    def analyse(
        self, runs: StudyRuns, figures: PaperFigures | None, against: str | None = None
    ) -> Analysis:
        """The study's tables from its runs (and the paper's figures, if it has a file),
        ``against`` naming the paper's setting its figures are compared with (a model of the
        paper's; None: the study's choice)."""
        raise NotImplementedError

    @classmethod
    def paper_figures(cls) -> PaperFigures | None:
        """The paper's figures, read from the study's figures file."""
        if cls.figures is None:
            return None
        return load_figures(Path(inspect.getfile(cls)).with_name(cls.figures))


def common_options(options: StudyOptions, out: Path) -> dict[str, Any]:
    """The sweep keys every study sets from the user's options."""
    return {
        "out": str(out),
        "models": list(options.models),
        "limit": options.limit,
        "repeats": options.repeats,
        "seed": options.seed,
        **({"model_roles": list(options.model_roles)} if options.model_roles else {}),
        **({"endpoints": options.endpoints} if options.endpoints else {}),
    }


def accuracy_cell(run: RunResult | None, paper: float | None) -> Cell:
    """Our accuracy on ``run`` beside the paper's value, and the verdict."""
    if run is None or not run.summary.n:
        return Cell(paper=paper, note="not run")
    ours = Estimate.accuracy(run)
    from maslab.studies.estimates import value_verdict

    return Cell(ours, paper, value_verdict(ours, paper) if paper is not None else None)


def labels(entries: Sequence[Mapping[str, Any] | str]) -> list[str]:
    """The labels of a sweep's method or benchmark entries (their names unless labelled)."""
    return [e if isinstance(e, str) else str(e.get("label") or e["name"]) for e in entries]


_STUDIES: Registry[type[Study]] = Registry("study", "maslab.studies.catalogue", "maslab.studies")
register_study = _STUDIES.register


def get_study(name: str) -> type[Study]:
    return _STUDIES.get(name)


def list_studies() -> list[str]:
    return _STUDIES.names()
