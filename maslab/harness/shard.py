"""Splitting a run into shards (``maslab run --shard i/N``) and merging them back
(``maslab merge``), so a sweep spreads over machines without Ray (a Slurm job array).

Shards are numbered 1 to N. The run's task list (after ``--limit`` and any shuffle) is dealt
round-robin: its k-th task (counting from 0) goes to shard ``k mod N + 1``. Each shard is a
normal run directory whose manifest holds ``shard: [i, N]`` and its own task ids; every random
draw is keyed by (run seed, task, repeat, draw), so a task's sample is the same in a shard as
in the whole run. :func:`merge` streams the shards' results and traces, line by line, into one
run directory, as if one run had written them, with the scorings (``maslab score``) and failure
attributions (``maslab attribute``) made in the shards: it builds it beside its place and moves
it there once complete, so a merge cut short leaves no run that reads as valid.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TypeVar

import orjson

from maslab.errors import ConfigError
from maslab.llm.registry import options_identity
from maslab.store import trace_index
from maslab.store.run_store import (
    ATTRIBUTIONS,
    LEARNED_STATE,
    OPTIMIZATION,
    RESULTS,
    SCORINGS,
    SUPERSEDED,
    TRACES,
    Key,
    Manifest,
    RunStore,
    existing_run,
    write_atomically,
)

Shard = tuple[int, int]
T = TypeVar("T")

log = logging.getLogger(__name__)


def parse_shard(text: str, flag: str = "--shard") -> Shard:
    """``"i/N"`` as (i, N), 1 <= i <= N; a one-line :class:`ConfigError` otherwise."""
    i, slash, n = text.partition("/")
    try:
        shard = int(i), int(n)
    except ValueError:
        shard = (0, 0)
    if not slash or not 1 <= shard[0] <= shard[1]:
        raise ConfigError(f"{flag} {text}: expected i/N with 1 <= i <= N, e.g. 2/4")
    return shard


def shard_tasks(tasks: Sequence[T], shard: Shard) -> list[T]:
    """Shard ``i`` of ``N``'s tasks: every N-th from the (i-1)-th on."""
    i, n = shard
    return list(tasks[i - 1 :: n])


def shard_out(out: Path, shard: Shard) -> Path:
    """A shard's default directory, beside the whole run's."""
    return out.with_name(f"{out.name}-shard-{shard[0]}-of-{shard[1]}")


def _interleave(shards: dict[int, list[str]], n: int) -> list[str]:
    """The whole run's task ids in their order, from each present shard's (round-robin)."""
    longest = max(map(len, shards.values()))
    return [
        shards[i][j] for j in range(longest) for i in range(1, n + 1) if j < len(shards.get(i, ()))
    ]


def _check(
    stores: list[RunStore], partial: bool
) -> tuple[list[tuple[RunStore, Manifest]], int, list[int]]:
    """The shards with their manifests in shard order, N, and the shards missing; a one-line
    error unless they are the shards of one run (all of them, unless ``partial``)."""
    manifests = [store.manifest() for store in stores]
    shards: list[Shard] = []
    for store, manifest in zip(stores, manifests, strict=True):
        if manifest.shard is None:
            raise ConfigError(f"{store.dir} is not a shard (its run had no --shard)")
        shards.append(manifest.shard)
    first, base, n = manifests[0], stores[0].dir, shards[0][1]
    for store, manifest, shard in zip(stores[1:], manifests[1:], shards[1:], strict=False):
        differ = first.identity_differences(manifest)
        differ += [k for k in ("limit", "repeats") if getattr(manifest, k) != getattr(first, k)]
        if shard[1] != n:
            differ.append("shard count")
        if differ:
            raise ConfigError(
                f"{store.dir} and {base} are not shards of one run ({', '.join(differ)} differ)"
            )
    seen: dict[int, Path] = {}
    for store, (i, _) in zip(stores, shards, strict=True):
        if i in seen:
            raise ConfigError(f"{seen[i]} and {store.dir} are both shard {i}/{n}")
        seen[i] = store.dir
    missing = [i for i in range(1, n + 1) if i not in seen]
    if missing and not partial:
        raise ConfigError(
            f"shard{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} of {n} missing; "
            "give every shard, or --partial to merge those given"
        )
    ordered = sorted(zip(shards, stores, manifests, strict=True), key=lambda each: each[0][0])
    return [(store, manifest) for _, store, manifest in ordered], n, missing


def _check_out(out: Path, identity: dict[str, object]) -> None:
    """Refuse an ``out`` that holds anything but an earlier merge of the same run."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; name a directory")
    if not out.exists() or not any(out.iterdir()):
        return
    store = RunStore(out)
    same = False
    if store.manifest_path.exists():
        manifest = store.manifest()
        same = manifest.merged_from is not None and manifest.identity() == identity
    if not same:
        raise ConfigError(f"--out {out} is not empty and holds no merge of this run; use another")


def _copy(source: Path, planned: set[Key], into: IO[bytes], index: IO[bytes] | None) -> None:
    """Append ``source``'s whole lines for ``planned`` keys to ``into`` (and, for traces, their
    places to ``index``); a final line cut short is dropped, a line that is no record skipped
    with a warning."""
    if not source.exists():
        return
    with source.open("rb") as f:
        for number, line in enumerate(f, 1):
            if not line.endswith(b"\n"):
                break
            key = trace_index.trace_key(line)
            if key is None:
                if line.strip():
                    log.warning("warning: %s line %d skipped: not a record", source, number)
                continue
            if key not in planned:
                continue
            if index is not None:
                index.write(trace_index.index_line(key, into.tell(), len(line)))
            into.write(line)


def merge(directories: Sequence[str | Path], out: str | Path, *, partial: bool = False) -> Path:
    """Merge the shard directories into ``out``, a run directory like one run's (see the
    module's docstring); returns ``out``. Merging again into the same ``out`` rewrites it. A
    ``partial`` merge's manifest lists the shards missing (``missing_shards``): its task ids are
    the merged shards' only."""
    shards, n, missing = _check([existing_run(d) for d in directories], partial)
    stores, manifests = [store for store, _ in shards], [manifest for _, manifest in shards]
    for store in stores:
        if any((store.dir / name).exists() for name in (OPTIMIZATION, LEARNED_STATE)):
            raise ConfigError(f"{store.dir} has an optimisation step: shards cannot merge it")
    _check_scorings(stores)
    out = Path(out)
    _check_out(out, manifests[0].identity())
    out.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".merging", dir=out.parent))
    building.chmod(0o755)  # as a run directory is made, not mkdtemp's private 0o700
    try:
        _write_merge(shards, n, missing, building)
        _put_in_place(building, out)
    finally:
        shutil.rmtree(building, ignore_errors=True)  # what a failed merge left
    return out


def _check_scorings(stores: Sequence[RunStore]) -> None:
    """A one-line :class:`ConfigError` when two shards hold scorings under one label by
    different evaluators or options (a label is one scoring of the merged run)."""
    seen: dict[str, tuple[str, dict[str, object], Path]] = {}
    for store in stores:
        for scoring in store.scorings():
            by = (scoring.evaluator, options_identity(scoring.evaluator_options))
            first = seen.setdefault(scoring.label, (*by, store.dir))
            if first[:2] != by:
                raise ConfigError(
                    f"scoring {scoring.label!r} is {first[0]} with {first[1]} in {first[2]} but "
                    f"{by[0]} with {by[1]} in {store.dir}: score one shard again under another "
                    "--label before merging"
                )


def _write_merge(
    shards: list[tuple[RunStore, Manifest]], n: int, missing: list[int], out: Path
) -> None:
    """Write the merged run into the empty directory ``out``."""
    stores, manifests = [store for store, _ in shards], [manifest for _, manifest in shards]
    task_ids = _interleave({m.shard[0]: m.task_ids or [] for m in manifests if m.shard}, n)
    merged = manifests[0].model_copy(
        update={
            # the lines are copied as they are: the newest of their formats is the merge's
            "format_version": max(m.format_version for m in manifests),
            "shard": None,
            "task_ids": task_ids,
            "tasks": len(task_ids),
            "merged_from": [str(store.dir) for store in stores],
            "missing_shards": missing,
        }
    )
    write_atomically(
        out / "manifest.json", orjson.dumps(merged.model_dump(), option=orjson.OPT_INDENT_2)
    )
    traces = out / TRACES
    with (
        (out / RESULTS).open("wb") as results,
        traces.open("wb") as trace_file,
        trace_index.index_path(traces).open("wb") as index,
        (out / SUPERSEDED).open("wb") as superseded,
        (out / SCORINGS).open("wb") as scorings,
        (out / ATTRIBUTIONS).open("wb") as attributions,
    ):
        for store, manifest in shards:
            planned = manifest.planned() or set()
            _copy(store.dir / RESULTS, planned, results, None)
            _copy(store.dir / SUPERSEDED, planned, superseded, None)
            _copy(store.dir / TRACES, planned, trace_file, index)
            _copy(store.dir / SCORINGS, planned, scorings, None)
            _copy(store.dir / ATTRIBUTIONS, planned, attributions, None)
    for optional in (SUPERSEDED, SCORINGS, ATTRIBUTIONS):
        if not (out / optional).stat().st_size:
            (out / optional).unlink()


def _put_in_place(built: Path, out: Path) -> None:
    """Move the finished merge ``built`` to ``out``, replacing an earlier merge there: a reader
    finds the old merge, briefly nothing, or the new one; never a merge half-written."""
    if not out.exists():
        built.rename(out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".replaced", dir=out.parent))
    out.replace(old / out.name)
    built.rename(out)
    shutil.rmtree(old, ignore_errors=True)
