"""What the perf scripts share: the machine header, percentiles, the table and the JSON file."""

from __future__ import annotations

import cProfile
import io
import os
import platform
import pstats
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

import maslab


def machine() -> dict[str, Any]:
    """The machine a figure was taken on: cores (usable and total), Python, platform."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cores": usable,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "maslab": maslab.__version__,
    }


def print_machine(info: Mapping[str, Any]) -> None:
    print(
        f"machine: {info['cores']} usable cores ({info['cpu_count']} in all), "
        f"{info['implementation']} {info['python']}, {info['platform']}, maslab {info['maslab']}"
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest rank."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, p99 and maximum of ``values``."""
    return {
        "median": statistics.median(values),
        "p99": percentile(values, 99),
        "max": max(values),
    }


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> None:
    """``rows`` under ``columns`` (key, header); floats with one decimal, right-aligned."""
    cells = [
        [f"{row[key]:,.1f}" if isinstance(row[key], float) else str(row[key]) for key, _ in columns]
        for row in rows
    ]
    widths = [
        max(len(header), *(len(r[i]) for r in cells)) for i, (_, header) in enumerate(columns)
    ]
    print("  ".join(header.rjust(w) for (_, header), w in zip(columns, widths, strict=True)))
    for r in cells:
        print("  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)))


def write_json(path: str | None, data: Mapping[str, Any]) -> None:
    if path:
        Path(path).write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        print(f"JSON written to {path}")


def top_functions(profile: cProfile.Profile, count: int = 15) -> str:
    """The ``count`` functions with the most cumulative time, as pstats prints them."""
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(count)
    return out.getvalue()
