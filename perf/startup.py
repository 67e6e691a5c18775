"""How long the ``maslab`` command takes to start: ``maslab --help``, ``maslab list methods
--brief`` and ``import maslab.cli``, each the median of several fresh processes, and the
modules ``import maslab.cli`` took longest to import (``python -X importtime``).

    python perf/startup.py [--runs 7] [--json PATH]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from typing import Any

from benchkit import arguments, command_env, print_machine, print_table, write_json

COMMANDS = {
    "maslab --help": ["-m", "maslab.cli", "--help"],
    "maslab list methods --brief": ["-m", "maslab.cli", "list", "methods", "--brief"],
    "import maslab.cli": ["-c", "import maslab.cli"],
}


def wall(arguments: list[str], runs: int) -> float:
    """The median wall time of ``runs`` fresh interpreters running ``arguments``."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, *arguments], capture_output=True, check=True, env=command_env()
        )
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def slowest_imports(count: int = 8) -> list[dict[str, Any]]:
    """The slowest imports of ``maslab`` modules under ``import maslab.cli``, cumulative."""
    argv = [sys.executable, "-X", "importtime", "-c", "import maslab.cli"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=command_env())
    rows: list[dict[str, Any]] = []
    for line in out.stderr.splitlines()[1:]:
        fields = line.removeprefix("import time:").split("|")
        _, cumulative, name = (part.strip() for part in fields)
        if name.startswith("maslab"):
            rows.append({"module": name, "ms": int(cumulative) / 1000})
    return sorted(rows, key=lambda row: -row["ms"])[:count]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per command")
    args = parser.parse_args()
    machine = print_machine()
    commands = [{"command": name, "wall_s": wall(arguments, args.runs)}
                for name, arguments in COMMANDS.items()]  # fmt: skip
    print_table(commands, [("command", "command"), ("wall_s", "median wall (s)", "{:.3f}")])
    imports = slowest_imports()
    print("slowest maslab imports under `import maslab.cli` (cumulative):")
    print_table(imports, [("module", "module"), ("ms", "ms", "{:.1f}")])
    write_json(args.json, {"machine": machine, "runs": args.runs, "commands": commands,
                           "imports": imports})  # fmt: skip


if __name__ == "__main__":
    main()
