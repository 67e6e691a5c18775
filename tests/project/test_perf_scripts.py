"""Every perf/ script still runs: each one as a user runs it (``python perf/NAME.py``, from the
repo root) at its smallest, writing its figures with ``--json``. Only that it exits 0 and that
the JSON holds the figures it promises is checked, never a figure itself (timings are noise).

A new script needs an entry in ``SMOKE``: the test of a script without one fails, naming it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parents[2]
PERF = ROOT / "perf"

# modules in perf/ that are not measurements of their own
NOT_SCRIPTS = {
    "benchkit.py": "the library the scripts share",
    "prefix.py": "the prefix-reuse arithmetic prefix_reuse.py scores with",
    "maslab_style.py": "the driver sweep_vs_bound.py runs (both its methods) in a process",
}

# script -> (its smallest arguments that still take every path, split at spaces; figures its
# JSON must hold besides the machine's). A figure is a dotted path into the JSON, a number
# indexing a list: "runs.1.wall_s" asks for a second row with a wall_s.
SMOKE: dict[str, tuple[str, list[str]]] = {
    "bootstrap_memory.py": (
        "--sizes 100 --resamples 20",
        ["sizes.0.old_peak_mb", "sizes.0.new_peak_mb", "sizes.0.same"],
    ),
    "client_overhead.py": (
        "--calls 8 --cap 4 --latency 0.01",
        ["transports.1.client_cpu_ms_per_call", "transports.1.bound_ratio", "settings.bound_s"],
    ),
    "code_scoring.py": (
        "--tasks 2 --concurrency 2",
        ["scorings.1.ms_per_task", "scorings.1.ratio", "scorings.0.passed"],
    ),
    "math_pool.py": (
        "--checks 5 --workers 1 2",
        ["pools.1.checks_per_s", "pools.1.speed_up", "pools.0.correct"],
    ),
    "overhead.py": (
        "--tasks 3 --calls 10 --cache --profile",
        ["runs.1.wall_us", "runs.0.sample_median_us", "call.median_us", "profile.llm_debate"],
    ),
    "prefix_reuse.py": (  # one method per benchmark the script gives methods
        "--tasks 1 --methods vanilla,mapcoder,relay --compare {before}",
        ["methods.2.reused_share", "methods.0.reused_token_share", "methods.0.before"],
    ),
    "ray_sweep.py": (  # its limiter part starts a Ray of its own: 25 s more at its smallest
        "--only sweep --latency 0.01 --cap 4 --limit 1",
        ["sweep.runs.1.window_over_bound", "sweep.runs.1.tree_cpu_s", "sweep.records_identical"],
    ),
    "report_size.py": (
        "--tasks 1",
        ["report.bytes", "report.svg_bytes", "report.plot_bytes"],
    ),
    "startup.py": (
        "--runs 1",
        ["commands.0.wall_s", "commands.2.wall_s", "imports.0.ms"],
    ),
    "scale.py": (
        "--tasks 5 --concurrency 8 --latency 0.01",
        ["run.engine_ratio", "run.memory_at", "run.errors", "run.after.resume.requests"],
    ),
    "scheduler.py": (
        "--tasks 4 --cap 2 --latency 0.01 --methods self_refine --admit 1 all",
        ["cells.3.ratio", "cells.3.latency_p95_s", "cells.3.first_result_s"],
    ),
    "store_scale.py": (
        "--samples 20",
        ["traces_bytes", "steps.maslab report RUN.peak_rss_mb", "steps.maslab show RUN.wall_s"],
    ),
    "sweep_cells.py": (
        "--latency 0.01 --cap 8 --limit 1 --max-cells 4",
        ["runs.0.model_window_s", "runs.0.window_over_sum", "runs.0.peak_in_flight"],
    ),
    "sweep_vs_bound.py": (
        "--tasks 2 --cap 4 --latency 0.01",
        [
            "methods.llm_debate.engine_ratio",
            "methods.self_consistency.maslab_style.ratio_to_engine",
            "methods.self_consistency.replay.requests",
        ],
    ),
    "throughput.py": (
        "--calls 8 --cap 4 --profile",
        ["rows.5.calls_per_s", "rows.0.cpu_us", "server.served", "profile"],
    ),
    "tool_loop.py": (
        "--episodes 2 --steps 3",
        ["paths.3.wall_ms", "paths.3.cpu_ms", "paths.1.model_ms"],
    ),
    "viewer_open.py": (
        "--samples 20",
        ["open_s", "peak_rss_mb", "steps"],
    ),
}

# an earlier prefix_reuse.py --json file, for its --compare ("{before}" in the arguments)
BEFORE = {"methods": [{"method": "vanilla", "reused_share": 0.5}]}

SCRIPTS = sorted(path.name for path in PERF.glob("*.py") if path.name not in NOT_SCRIPTS)


def _figure(data: Any, path: str) -> Any:
    """The value at ``path`` (dotted; numbers index lists) in ``data``; KeyError if absent."""
    for key in path.split("."):
        if isinstance(data, list):
            if not key.isdigit() or int(key) >= len(data):
                raise KeyError(path)
            data = data[int(key)]
        elif isinstance(data, dict) and key in data:
            data = data[key]
        else:
            raise KeyError(path)
    return data


def test_every_smoke_entry_names_a_script() -> None:
    assert sorted(SMOKE.keys() - SCRIPTS) == []
    assert all((PERF / name).exists() for name in NOT_SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_perf_script_runs(script: str, tmp_path: Path) -> None:
    if script not in SMOKE:
        pytest.fail(f"perf/{script} has no entry in SMOKE (tests/project/test_perf_scripts.py)")
    if script == "ray_sweep.py" and importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed (pip install -e '.[dev]')")
    line, figures = SMOKE[script]
    args = line.split()
    if "{before}" in args:
        before = tmp_path / "before.json"
        before.write_text(json.dumps(BEFORE))
        args = [arg.format(before=before) for arg in args]
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, f"perf/{script}", *args, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # a hang, not a measure of speed
    )
    assert done.returncode == 0, f"perf/{script} exited {done.returncode}:\n{done.stderr}"
    data = json.loads(out.read_text())
    assert _figure(data, "machine.cores")
    missing = []
    for path in figures:
        try:
            _figure(data, path)
        except KeyError:
            missing.append(path)
    assert missing == [], f"perf/{script}'s JSON lacks {missing}"


@pytest.mark.parametrize(
    "script", sorted(name for name, (line, _) in SMOKE.items() if "--latency" in line.split())
)
def test_a_latency_of_zero_is_a_usage_error(script: str) -> None:
    """The figures are ratios to a bound of calls x latency: 0 s is refused in one line, not
    with a ZeroDivisionError's traceback at the end of the measurement."""
    done = subprocess.run(
        [sys.executable, f"perf/{script}", "--latency", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "argument --latency: 0 is not above 0" in done.stderr.splitlines()[-1]
