"""Time and peak memory of ``bootstrap_ci`` against the one-array bootstrap it replaced.

Values are per-task differences in {-1, 0, 1} (as ``compare`` pairs them); each size runs the
old bootstrap (inline below, one ``(n_resamples, n)`` index array) and the batched one, with
``tracemalloc`` (which sees numpy's allocations) measuring the peak beyond the input.

    python perf/bootstrap_memory.py [--sizes 1000 10000 50000] [--resamples 2000] [--json PATH]
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from benchkit import arguments, print_machine, print_table, write_json

from maslab.analysis.stats import bootstrap_ci

Interval = tuple[float, float]


def old_bootstrap_ci(values: np.ndarray, n_resamples: int, seed: int = 0) -> Interval:
    """The previous ``bootstrap_ci`` with its default statistic (the mean), as a reference."""
    rng = np.random.default_rng(seed)
    samples = values[rng.integers(0, values.size, size=(n_resamples, values.size))]
    stats = [np.mean(sample) for sample in samples]
    alpha = (1 - 0.95) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return (float(lo), float(hi))


def new_bootstrap_ci(values: np.ndarray, n_resamples: int) -> Interval:
    return bootstrap_ci(values, n_resamples=n_resamples)


def measure(run: Callable[[np.ndarray, int], Interval], values: np.ndarray, resamples: int) -> dict:
    tracemalloc.start()
    start = time.perf_counter()
    interval = run(values, resamples)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"seconds": seconds, "peak_mb": peak / 2**20, "interval": interval}


COLUMNS = [
    ("pairs", "pairs", "{:,}"), ("old_seconds", "old s", "{:.2f}"),
    ("old_peak_mb", "old MB", "{:.1f}"), ("new_seconds", "new s", "{:.2f}"),
    ("new_peak_mb", "new MB", "{:.1f}"), ("same", "same"),
]  # fmt: skip


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    info = print_machine()
    print(f"{args.resamples} resamples; time in s, peak memory in MB (tracemalloc)")
    rows = []
    for n in args.sizes:
        values = np.random.default_rng(n).integers(-1, 2, size=n).astype(float)
        row: dict[str, Any] = {"pairs": n, "resamples": args.resamples}
        for name, run in (("old", old_bootstrap_ci), ("new", new_bootstrap_ci)):
            row |= {f"{name}_{k}": v for k, v in measure(run, values, args.resamples).items()}
        row["same"] = row["old_interval"] == row["new_interval"]
        rows.append(row)
    print_table(rows, COLUMNS)
    write_json(args.json, {"machine": info, "resamples": args.resamples, "sizes": rows})


if __name__ == "__main__":
    main()
