"""What a regular install puts in site-packages: maslab and nothing named generically."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a clean copy of the sources (a stale build/ could add old files)."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source)
    for folder in ("maslab", "methods", "benchmarks", "evaluators"):
        shutil.copytree(
            ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(source)],
        check=True, capture_output=True, cwd=out,
    )  # fmt: skip
    (built,) = out.glob("maslab-*.whl")
    return built


def test_the_wheel_holds_only_the_maslab_package(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"maslab"}
    for folder in ("methods", "benchmarks", "evaluators"):
        assert f"maslab/{folder}/__init__.py" in names
    assert "maslab/methods/llm_debate.py" in names
    assert "maslab/methods/goagent/policy.py" in names  # a method that is a package
    source = Path(__file__).resolve().parents[2] / "maslab"
    for module in source.rglob("*.py"):  # every module of maslab/, subpackages too
        if "__pycache__" not in module.parts:
            assert f"maslab/{module.relative_to(source).as_posix()}" in names


def test_an_installed_copy_imports_the_plugin_folders_under_maslab(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
         str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    installed = {p.name for p in target.iterdir() if not p.name.endswith(".dist-info")}
    assert installed - {"bin"} == {"maslab"}  # bin/ holds the console script
    probe = (
        "import maslab.methods, maslab.benchmarks, maslab.evaluators\n"
        "from maslab.methods.llm_debate import LLMDebate\n"
        "from maslab.methods.goagent import GoAgent\n"
        "from maslab import get_method\n"
        "print(maslab.methods.__file__)\n"
        "print(get_method('llm_debate') is LLMDebate and get_method('goagent') is GoAgent)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0].startswith(str(target))
    assert out[1] == "True"


def test_the_editable_install_maps_the_folders_of_this_checkout():
    import maslab.benchmarks
    import maslab.evaluators
    import maslab.methods

    for module, folder in [(maslab.methods, "methods"), (maslab.benchmarks, "benchmarks"),
                           (maslab.evaluators, "evaluators")]:  # fmt: skip
        assert Path(module.__file__).resolve() == ROOT / folder / "__init__.py"
