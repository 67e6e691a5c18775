"""How long the ``maslab`` command takes to start: ``maslab --help``, ``maslab list methods
--brief`` and ``import maslab.cli``, each the median of several fresh processes, and the
modules ``import maslab.cli`` took longest to import (``python -X importtime``).

    python perf/startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "maslab --help": [sys.executable, "-m", "maslab.cli", "--help"],
    "maslab list methods --brief": [
        sys.executable,
        "-m",
        "maslab.cli",
        "list",
        "methods",
        "--brief",
    ],
    "import maslab.cli": [sys.executable, "-c", "import maslab.cli"],
}


def wall(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def slowest_imports(count: int = 8) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the slowest imports under ``maslab.cli``."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import maslab.cli"],
                         capture_output=True, text=True, check=True).stderr  # fmt: skip
    rows = []
    for line in out.splitlines()[1:]:
        _, cumulative, name = (
            part.strip() for part in line.removeprefix("import time:").split("|")
        )
        if name.startswith("maslab"):
            rows.append((int(cumulative), name))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    for name, command in COMMANDS.items():
        print(f"{name:30s} {wall(command, args.runs):.3f} s (median of {args.runs})")
    print("slowest maslab imports under `import maslab.cli` (cumulative):")
    for micros, name in slowest_imports():
        print(f"  {micros / 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
