"""A study's directory: its ``study.json`` (the study, the models run so far, the options
every model ran with) and its sweep's runs beneath (``<benchmark>/<method>/<model>``), so an
interrupted study resumes where it stopped and a second model adds a column.

``study.json`` is replaced atomically under the directory's lock (``study.lock``): two
``maslab study run`` on one directory add their models one after the other; the runs
themselves are each locked by their own store.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from maslab.config_files import validation_message
from maslab.errors import ConfigError
from maslab.harness.sweep import Cell, Sweep
from maslab.store.run_store import existing_run, write_atomically
from maslab.studies.base import Study, StudyOptions, StudyRuns, get_study
from maslab.version import __version__

STUDY_FILE = "study.json"
STUDY_LOCK = "study.lock"
STUDIES_DIR = Path("runs/studies")


class StudyRecord(BaseModel):
    """``study.json``: which study, the models run so far, and the options they all ran with."""

    model_config = ConfigDict(extra="forbid")

    study: str
    models: list[str]
    limit: int | None = None
    repeats: int = 1
    model_roles: list[str] = []
    seed: int = 0
    benchmark: str | None = None
    maslab_version: str = __version__

    def options(self, models: tuple[str, ...] | None = None) -> StudyOptions:
        """The options of the record, for ``models`` (by default all it has run)."""
        return StudyOptions(
            models=tuple(self.models) if models is None else models,
            limit=self.limit,
            repeats=self.repeats,
            model_roles=tuple(self.model_roles),
            seed=self.seed,
            benchmark=self.benchmark,
        )


def default_dir(name: str) -> Path:
    return STUDIES_DIR / name


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold the study directory's lock: one writer of what the study keeps there at a time."""
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / STUDY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_record(out: Path) -> StudyRecord:
    """The ``study.json`` of ``out``; a one-line ConfigError when ``out`` holds no study."""
    try:
        return StudyRecord.model_validate(orjson.loads((out / STUDY_FILE).read_bytes()))
    except FileNotFoundError:
        raise ConfigError(f"{out} holds no study (no {STUDY_FILE}): maslab study run") from None
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise ConfigError(
            f"{out / STUDY_FILE}: not a study record ({exc})".split("\n")[0]
        ) from None


def record_models(out: Path, name: str, options: StudyOptions) -> StudyRecord:
    """Add ``options.models`` to the study in ``out`` (a new record if it has none); a one-line
    ConfigError when ``out`` holds another study, or the same with other options (its runs
    would not be comparable)."""
    with locked(out):
        path = out / STUDY_FILE
        wanted = StudyRecord(study=name, models=list(options.models), limit=options.limit,
                             repeats=options.repeats, model_roles=list(options.model_roles),
                             seed=options.seed, benchmark=options.benchmark)  # fmt: skip
        if not path.exists():
            write_atomically(path, orjson.dumps(wanted.model_dump(), option=orjson.OPT_INDENT_2))
            return wanted
        held = read_record(out)
        if held.study != name:
            raise ConfigError(f"{out} holds the study {held.study}, not {name}: use another --out")
        keys = ("limit", "repeats", "model_roles", "seed", "benchmark")
        if differ := [k for k in keys if getattr(held, k) != getattr(wanted, k)]:
            was = ", ".join(f"{k}={getattr(held, k)}" for k in differ)
            raise ConfigError(f"{out} holds {name} run with {was}: run it so, or use another --out")
        models = list(dict.fromkeys([*held.models, *options.models]))
        record = held.model_copy(update={"models": models, "maslab_version": __version__})
        write_atomically(path, orjson.dumps(record.model_dump(), option=orjson.OPT_INDENT_2))
        return record


def study_sweep(study: Study, options: StudyOptions, out: Path) -> Sweep:
    """The study's sweep for ``options``, checked as a sweep file is."""
    try:
        return Sweep.model_validate(study.sweep(options, out))
    except ValidationError as exc:
        raise ConfigError(validation_message(exc, f"study {study.name}")) from None


def cell_dir(cell: Cell) -> Path:
    assert cell.config.out is not None  # a sweep's cells always have their directory
    return Path(cell.config.out)


def collect(out: Path) -> tuple[Study, StudyRecord, StudyRuns]:
    """The study in ``out``, its record and the runs of its sweep found there (every model it
    has run)."""
    from maslab.analysis.run_result import RunResult

    record = read_record(out)
    study = get_study(record.study)()
    runs, missing = {}, []
    for cell in study_sweep(study, record.options(), out).cells():
        key = (cell.benchmark_label or cell.benchmark, cell.label, cell.model)
        try:
            runs[key] = RunResult.read(existing_run(cell_dir(cell)))
        except ConfigError:
            missing.append(str(cell))
    found = StudyRuns(runs, tuple(record.models), tuple(missing), out, record.options())
    return study, record, found
