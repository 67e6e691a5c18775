"""Time and peak memory of ``bootstrap_ci`` against the one-array bootstrap it replaced.

Values are per-task differences in {-1, 0, 1} (as ``compare`` pairs them); each size runs the
old bootstrap (inline below, one ``(n_resamples, n)`` index array) and the batched one, with
``tracemalloc`` (which sees numpy's allocations) measuring the peak beyond the input.

    python perf/bootstrap_memory.py [--sizes 1000 10000 50000] [--resamples 2000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

from maslab.stats import bootstrap_ci

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 50_000])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rows = []
    print(f"{args.resamples} resamples; time in s, peak memory in MB (tracemalloc)")
    print(f"{'pairs':>8}  {'old s':>7}  {'old MB':>8}  {'new s':>7}  {'new MB':>7}  same")
    for n in args.sizes:
        values = np.random.default_rng(n).integers(-1, 2, size=n).astype(float)
        old = measure(old_bootstrap_ci, values, args.resamples)
        new = measure(new_bootstrap_ci, values, args.resamples)
        same = old["interval"] == new["interval"]
        rows.append({"pairs": n, "resamples": args.resamples, "old": old, "new": new, "same": same})
        print(
            f"{n:>8,}  {old['seconds']:7.2f}  {old['peak_mb']:8.1f}  "
            f"{new['seconds']:7.2f}  {new['peak_mb']:7.1f}  {same}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
