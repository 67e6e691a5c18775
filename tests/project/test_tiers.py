"""The suite's two tiers: ``pytest -m "not system"`` (the unit tier) starts no process, and the
guard in conftest.py fails a unit test that does (see its ``_unit_tests_start_no_process``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# pytest's -rA summary: one line per outcome of each test (a call, an error at its teardown)
LINE = re.compile(r"^(PASSED|FAILED|ERROR) test_inner\.py::(\w+)", re.M)
INNER_TESTS = """
import asyncio
import multiprocessing
import subprocess
import sys

import pytest

PASS = [sys.executable, "-c", "pass"]


def test_unit_subprocess():
    subprocess.run(PASS, check=True)


def test_unit_swallowing_the_refusal():
    try:
        subprocess.run(PASS, check=False)
    except Exception:
        pass


def test_unit_asyncio_subprocess():
    async def start():
        process = await asyncio.create_subprocess_exec(*PASS)
        await process.wait()

    asyncio.run(start())


def test_unit_multiprocessing():
    process = multiprocessing.get_context("spawn").Process(target=print)
    process.start()
    process.join()


def test_unit_without_a_process():
    assert sum(range(4)) == 6


@pytest.mark.system
def test_system_subprocess():
    subprocess.run(PASS, check=True)
"""


def test_the_system_marker_is_registered(pytestconfig):
    assert any(line.startswith("system:") for line in pytestconfig.getini("markers"))


@pytest.mark.system
def test_a_unit_test_starting_a_process_fails_and_a_system_test_may(tmp_path: Path):
    shutil.copy(Path(__file__).parents[1] / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    system: starts processes\n")
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", "test_inner.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    outcomes: dict[str, set[str]] = {}
    for outcome, name in LINE.findall(run.stdout):
        outcomes.setdefault(name, set()).add(outcome)
    refused = {"FAILED", "ERROR"}  # the start raises, and the test fails at its teardown too
    assert outcomes == {
        "test_unit_subprocess": refused,
        "test_unit_swallowing_the_refusal": {"PASSED", "ERROR"},  # caught at the teardown
        "test_unit_asyncio_subprocess": refused,
        "test_unit_multiprocessing": refused,
        "test_unit_without_a_process": {"PASSED"},
        "test_system_subprocess": {"PASSED"},
    }, run.stdout
    assert "mark this test `system`" in run.stdout
