"""``maslab export``: the samples of one run or several as one flat table (CSV, Parquet or JSON
lines), the rows of each run's :meth:`maslab.RunResult.to_pandas` (which begin with the columns
that say which run a row is of), written to ``samples.<format>`` in the run directory (of one
run), to ``-o FILE`` (whose suffix names the format unless ``--format`` does) or to stdout
(``-o -``).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path
from typing import Any

import orjson

from maslab.cli.commands import about
from maslab.cli.console import console, output_file
from maslab.cli.reading import SCORING_HELP
from maslab.errors import ConfigError


def _csv(rows: list[dict[str, Any]]) -> bytes:
    from maslab.analysis.run_result import SAMPLE_COLUMNS

    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(SAMPLE_COLUMNS))
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue().encode()


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    from maslab.analysis.run_result import SAMPLE_COLUMNS

    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("writing parquet needs pyarrow: pip install 'maslab[hf]'") from None
    types = {str: pa.string(), int: pa.int64(), float: pa.float64(), bool: pa.bool_()}
    schema = pa.schema([(name, types[kind]) for name, kind in SAMPLE_COLUMNS.items()])
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buffer)
    return buffer.getvalue()


_WRITERS = {"csv": _csv, "parquet": _parquet, "jsonl": _jsonl}
FORMATS = tuple(_WRITERS)


def _format(args: argparse.Namespace) -> str:
    """--format, else the output file's suffix, else csv."""
    if args.format:
        return args.format
    if args.output is None or str(args.output) == "-":
        return "csv"
    suffix = args.output.suffix.lstrip(".")
    if suffix not in FORMATS:
        raise ConfigError(
            f"{args.output}: cannot tell the format from the name; add --format {'|'.join(FORMATS)}"
        )
    return suffix


def cmd_export(args: argparse.Namespace) -> int:
    from maslab.analysis.frames import load_runs
    from maslab.store.run_store import write_atomically

    runs = load_runs(args.runs, args.scoring)
    if args.output is None and len(runs) > 1:
        raise ConfigError(
            f"{len(runs)} runs make one table: name its file with -o FILE (or -o - for stdout)"
        )
    fmt = _format(args)
    rows = runs.to_records()
    data = _WRITERS[fmt](rows)
    if str(args.output) == "-":
        sys.stdout.buffer.write(data)
        return 0
    path = args.output or runs[0].dir / f"samples.{fmt}"
    output_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)
    of = f" of {len(runs)} runs" if len(runs) > 1 else ""
    console.print(f"{len(rows)} samples{of} written to {path}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help=about("export"))
    p.add_argument("runs", type=Path, nargs="+", metavar="RUN", help="run directories")
    p.add_argument(
        "--format", choices=FORMATS, help="default: from the output file's name, else csv"
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="file to write, '-' for stdout (default, for one run: samples.<format> in its "
        "directory)",
    )
    p.add_argument("--scoring", metavar="LABEL", help=f"{SCORING_HELP}, in each run")
    p.set_defaults(func=cmd_export)
