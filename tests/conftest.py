"""Shared fixtures, and the two tiers of the suite.

A test marked ``system`` starts a process (a subprocess, the sandbox, Ray, a browser, a llama.cpp
server, a perf script) or takes seconds; the rest, the unit tier (``pytest -m "not system"``),
runs in well under a minute. :func:`_unit_tests_start_no_process` keeps it that way: in a test not
marked ``system``, starting a process fails the test.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing.util
import os
import platform
import subprocess
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

# System tests in files whose own text this conftest leaves alone (they are edited elsewhere):
# file name -> the names of its system tests (parameters left off), or None for every test.
SYSTEM_TESTS: dict[str, frozenset[str] | None] = {
    # runs the example scripts, the notebook and the README's blocks
    "test_examples.py": None,
    # BFCL end to end over every task of whole categories (seconds each)
    "test_tool_agent_bfcl.py": None,
    # a sweep of the tool-using methods over BFCL, its report in Chromium
    "test_tool_sweep_browser.py": None,
    "test_bfcl_data.py": frozenset(
        {"test_every_single_turn_category_loads_with_valid_tool_schemas"}
    ),
    "test_conductor_tools.py": frozenset(
        {"test_replaying_the_ground_truth_scores_every_multi_turn_task_right"}
    ),
    # builds a wheel, installs it in a fresh venv
    "test_packaging.py": frozenset(
        {
            "test_the_wheel_holds_only_the_maslab_package",
            "test_an_installed_copy_imports_the_plugin_folders_under_maslab",
        }
    ),
    # install the example plugin, run `maslab` in a subprocess
    "test_plugins.py": frozenset(
        {
            "test_the_example_plugin_lists_everything_with_its_distribution",
            "test_the_example_plugin_runs_from_the_cli",
            "test_the_example_tool_serves_a_tool_using_method",
            "test_a_broken_plugin_is_one_warning_and_the_rest_works",
            "test_an_import_that_exits_or_takes_a_bundled_name_is_one_line",
        }
    ),
}


@pytest.fixture
def shared_data() -> Path:
    """The real benchmark files beside the checkout; skips when they are absent (fresh clones)."""
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture
def bfcl_wheel() -> Path:
    """BFCL's wheel in the user's data cache (`maslab data fetch bfcl`); skips when absent."""
    from maslab.benchmarks.bfcl.wheel import WHEEL

    if not WHEEL.path.is_file():
        pytest.skip("BFCL's wheel is not in the data cache: run `maslab data fetch bfcl`")
    return WHEEL.path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the system tests of :data:`SYSTEM_TESTS`."""
    for item in items:
        names = SYSTEM_TESTS.get(item.path.name, frozenset())
        if names is None or getattr(item, "originalname", item.name) in names:
            item.add_marker(pytest.mark.system)


@functools.cache
def _git_commit() -> str | None:
    """What a run records as the checkout's commit (``git rev-parse HEAD``), asked once."""
    from maslab.harness.runner import _git_commit

    return _git_commit()


@functools.cache
def _probe_once() -> None:
    """What this process asks once and remembers, starting a process to find out, asked before
    the first unit test (as the first run of a session would): ``uname -p`` (the OpenAI SDK's
    platform headers) and which sandbox isolation works here (a run's manifest records it)."""
    from maslab.sandbox import protections

    platform.processor()
    protections()
    _git_commit()


def _callers(depth: int = 6) -> str:
    """Where a refused process start came from: the calls before it, innermost first."""
    frames = traceback.extract_stack(limit=depth + 2)[:-2]
    return " < ".join(f"{f.name} ({Path(f.filename).name}:{f.lineno})" for f in reversed(frames))


class ProcessInUnitTest(RuntimeError):
    """A test outside the system tier tried to start a process."""


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    """In a test not marked ``system``, starting a process (``subprocess``, ``asyncio``'s
    subprocesses, ``os.fork``/``os.system``/``os.posix_spawn``, ``multiprocessing``) raises
    :class:`ProcessInUnitTest`; should the code under test swallow that, the test fails anyway."""
    if request.node.get_closest_marker("system") is not None:
        yield
        return
    from maslab.harness import runner

    _probe_once()  # before processes are refused
    tried: list[str] = []

    def refuse(what: str) -> Callable[..., None]:
        def refused(*args: object, **kwargs: object) -> None:
            tried.append(f"{what}, from {_callers()}")
            raise ProcessInUnitTest(
                f"{request.node.nodeid} started a process ({what}): mark this test `system` "
                "(@pytest.mark.system), or keep processes out of it"
            )

        return refused

    with pytest.MonkeyPatch.context() as patch:
        # a run's manifest records the checkout's commit, asked of git: here every run gets
        # the answer git gave once, without starting git again
        patch.setattr(runner, "_git_commit", _git_commit)
        patch.setattr(subprocess.Popen, "__init__", refuse("subprocess.Popen"))
        patch.setattr(asyncio, "create_subprocess_exec", refuse("asyncio.create_subprocess_exec"))
        patch.setattr(asyncio, "create_subprocess_shell", refuse("asyncio.create_subprocess_shell"))
        patch.setattr(multiprocessing.util, "spawnv_passfds", refuse("multiprocessing"))
        for name in ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                patch.setattr(os, name, refuse(f"os.{name}"))
        yield
    if tried:
        pytest.fail(
            f"{request.node.nodeid} started a process ({', '.join(tried)}): mark this test "
            "`system` (@pytest.mark.system)",
            pytrace=False,
        )
