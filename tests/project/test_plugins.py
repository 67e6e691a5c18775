"""Plugins: the example distribution installs, lists with its name and runs from the CLI; a
broken plugin is one warning; ``--import`` runs a method file without packaging it."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint, EntryPoints
from pathlib import Path

import orjson
import pytest

from maslab import Method, method, plugins
from maslab.cli import main
from maslab.registry import Registry

ROOT = Path(__file__).resolve().parents[2]
DIST = "maslab-example-plugin"


def python(site: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``python ARGV`` in a fresh interpreter that also sees the distributions in ``site``."""
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", "MASLAB_CACHE_DIR": str(cwd)}
    return subprocess.run(
        [sys.executable, *argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )


def cli(site: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return python(site, cwd, "-m", "maslab.cli", *argv)


def listings(site: Path, cwd: Path) -> dict[str, str]:
    """The output of ``maslab list WHAT`` for every WHAT, from one interpreter."""
    probe = (
        "from maslab.cli import main\n"
        "for what in ('methods', 'benchmarks', 'evaluators', 'tools', 'models'):\n"
        "    print('==', what, flush=True)\n"
        "    assert main(['list', what]) == 0\n"
    )
    done = python(site, cwd, "-c", probe)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    sections = re.split(r"^== (\w+)\n", done.stdout, flags=re.M)[1:]
    return dict(zip(sections[::2], sections[1::2], strict=True))


@pytest.fixture(autouse=True)
def wide_console(monkeypatch) -> None:
    """Room for every column, so each table row is one line whatever other tests registered
    (a narrow table folds long origins onto a second line)."""
    from maslab.cli.console import console

    monkeypatch.setattr(console, "width", 200)


def row(output: str, name: str) -> str:
    """The line of a ``maslab list`` table that starts with ``name``."""
    return next(line for line in output.splitlines() if line.split()[:1] == [name])


@pytest.fixture(scope="module")
def example_site(tmp_path_factory) -> Path:
    """examples/plugin installed into a private directory (offline, from a copy of the source,
    so the build leaves nothing in the checkout)."""
    work = tmp_path_factory.mktemp("example-plugin")
    source = shutil.copytree(ROOT / "examples" / "plugin", work / "source")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
         "--target", str(work / "site"), str(source)],
        check=True, capture_output=True, cwd=work,
    )  # fmt: skip
    return work / "site"


def test_the_example_plugin_lists_everything_with_its_distribution(example_site, tmp_path):
    listed = listings(example_site, tmp_path)
    for what, names in [
        ("methods", ["solve_and_check", "reflect_once"]),
        ("benchmarks", ["letter_count"]),
        ("evaluators", ["last_number"]),
        ("tools", ["count_letter"]),
        ("models", ["constant:<name>"]),
    ]:
        for name in names:
            assert DIST in row(listed[what], name)
        assert "bundled" in listed[what]
    assert "(no description)" in row(listed["methods"], "reflect_once")  # it has no docstring
    assert "offline: generated letter_count" in row(listed["benchmarks"], "letter_count")


def test_the_example_plugin_runs_from_the_cli(example_site, tmp_path):
    out = tmp_path / "letters"
    done = cli(example_site, tmp_path, "run", "--method", "solve_and_check", "--benchmark",
               "letter_count", "--model", "constant:There are 2.", "--limit", "5", "--out",
               str(out), "--no-cache", "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines()]
    assert len(results) == 5 and all(r["usage"]["calls"] == 2 for r in results)
    assert {r["score"]["correct"] for r in results} == {r["gold"] == "2" for r in results}
    assert orjson.loads((out / "manifest.json").read_bytes())["evaluator"] == "last_number"

    out = tmp_path / "arith"
    done = cli(example_site, tmp_path, "run", "--method", "reflect_once", "--benchmark", "arith",
               "--model", "scripted:echo", "--limit", "2", "--out", str(out), "--no-cache",
               "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "reflect_once · arith" in done.stdout and (out / "report.html").is_file()


def test_the_example_tool_serves_a_tool_using_method(example_site, tmp_path):
    probe = (
        "import asyncio\n"
        "from maslab import get_method\n"
        "from maslab.kit.tools import get_tools\n"
        "get_method('conductor')(tools=['count_letter'])\n"
        "(tool,) = get_tools(['count_letter'])\n"
        "print(asyncio.run(tool.run(word='strawberry', letter='r')))\n"
    )
    done = python(example_site, tmp_path, "-c", probe)
    assert done.returncode == 0 and done.stdout.strip() == "3", done.stderr


@pytest.fixture
def broken_site(tmp_path) -> Path:
    """A distribution whose method plugin raises on import."""
    site = tmp_path / "site"
    info = site / "broken_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[maslab.methods]\nbroken = broken_plugin\n")
    (site / "broken_plugin.py").write_text("raise RuntimeError('boom')\n")
    return site


def test_a_broken_plugin_is_one_warning_and_the_rest_works(broken_site, tmp_path):
    listed = cli(broken_site, tmp_path, "list", "methods")
    assert listed.returncode == 0 and "llm_debate" in listed.stdout
    (warning,) = listed.stderr.splitlines()
    assert warning == (
        "warning: plugin 'broken' (maslab.methods, from broken-plugin) not loaded: "
        "RuntimeError: boom"
    )
    done = cli(broken_site, tmp_path, "run", "--method", "vanilla", "--benchmark", "arith",
               "--model", "scripted:echo", "--limit", "1", "--out", str(tmp_path / "run"),
               "--no-cache", "--quiet")  # fmt: skip
    assert done.returncode == 0 and done.stderr.splitlines() == [warning]  # once per process


class NoDoc(Method):
    async def solve(self, task, ctx):
        raise NotImplementedError


def test_plugin_failures_are_warned_once_and_skipped(monkeypatch, caplog):
    points = [
        EntryPoint("missing", "no_such_module_xyz", "maslab.methods"),
        EntryPoint("not_a_class", "os:getcwd", "maslab.methods"),
        EntryPoint("zz_nodoc", f"{__name__}:NoDoc", "maslab.methods"),
    ]
    monkeypatch.setattr(plugins, "_installed_entry_points", lambda: EntryPoints(points))
    fresh = Registry("method", "maslab.methods")
    with caplog.at_level(logging.WARNING, logger="maslab.plugins"):
        assert fresh.names() == ["zz_nodoc"]
        assert fresh.get("zz_nodoc") is NoDoc
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2 and all("\n" not in m for m in messages)
    assert "plugin 'missing' (maslab.methods, from an unknown distribution) not loaded: " \
        "ModuleNotFoundError" in messages[0]  # fmt: skip
    assert "is not a method class" in messages[1]
    assert NoDoc.name == "zz_nodoc"  # registered under its entry point's name


def test_origin_names_bundled_code_and_modules():
    from maslab.methods.vanilla import Vanilla

    assert plugins.origin(Vanilla) == "bundled"
    assert plugins.origin(test_origin_names_bundled_code_and_modules) == f"module {__name__}"


@pytest.fixture
def registered_here(monkeypatch):
    """Undo what a test's ``--import`` registers and imports."""
    method.list_methods()
    monkeypatch.setattr(method._METHODS, "_classes", dict(method._METHODS._classes))
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def readme_method() -> str:
    """The code of the docs' "Write a method" page (its Method API section)."""
    page = (ROOT / "docs" / "guide" / "write-a-method.md").read_text()
    section = page.split("## The Method API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_import_runs_the_readme_method_from_a_file(registered_here, tmp_path, capsys):
    source = tmp_path / "my_first_method.py"
    source.write_text(readme_method())
    out = tmp_path / "run"
    assert main(["run", "--import", str(source), "--method", "solve_then_judge",
                 "--benchmark", "arith", "--model", "scripted:echo", "--limit", "2",
                 "--out", str(out), "--no-cache", "--quiet"]) == 0  # fmt: skip
    assert len((out / "results.jsonl").read_bytes().splitlines()) == 2
    capsys.readouterr()
    assert main(["list", "methods", "--import", str(source)]) == 0  # the same file twice: fine
    assert "module my_first_method" in row(capsys.readouterr().out, "solve_then_judge")


def test_import_takes_a_dotted_name_from_the_current_directory(
    registered_here, tmp_path, monkeypatch, capsys
):
    package = tmp_path / "lab_methods_xyz"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "echo.py").write_text(
        readme_method().replace('"solve_then_judge"', '"dotted_method"')
    )
    monkeypatch.chdir(tmp_path)
    assert main(["list", "methods", "--import", "lab_methods_xyz.echo"]) == 0
    assert "module lab_methods_xyz.echo" in row(capsys.readouterr().out, "dotted_method")


def test_list_copes_with_plugin_code_that_fails(monkeypatch, capsys):
    from maslab.bench import benchmark
    from maslab.bench.benchmark import Benchmark
    from maslab.kit import tools

    def failing() -> tools.Tool:
        raise RuntimeError("no tool today")

    class NeedsOptions(Benchmark):
        def __init__(self, path: str) -> None:
            super().__init__()

    from maslab.cli.console import console

    monkeypatch.setattr(console, "_width", 200)  # rows unwrapped
    benchmark.list_benchmarks()
    monkeypatch.setitem(benchmark._BENCHMARKS._classes, "zz_needs_options", NeedsOptions)
    monkeypatch.setitem(tools._FACTORIES, "zz_failing", failing)
    assert main(["list", "tools"]) == 0
    assert "(its factory fails: RuntimeError: no tool today)" in capsys.readouterr().out
    assert main(["list", "benchmarks"]) == 0
    listed = row(capsys.readouterr().out, "zz_needs_options")
    assert "data unknown (TypeError:" in listed and f"module {__name__}" in listed


IMPORT_MISTAKES = {
    "a file that exits": (
        "import sys\nsys.exit(0)\n",
        "maslab: error: --import {file}: it exits while it is imported (sys.exit(0)); import "
        "nothing that exits",
    ),
    "a file that takes a bundled method's name": (
        "from maslab import Method, register_method\n\n\n"
        "@register_method('vanilla')\nclass Mine(Method):\n"
        "    async def solve(self, task, ctx):\n        raise NotImplementedError\n",
        "maslab: error: --import {file}: method name 'vanilla' is taken by Vanilla",
    ),
}


@pytest.mark.parametrize("case", IMPORT_MISTAKES.values(), ids=IMPORT_MISTAKES.keys())
def test_an_import_that_exits_or_takes_a_bundled_name_is_one_line(case, tmp_path):
    """In a fresh process, where the bundled method of that name is not imported yet: it used
    to exit 0 having run nothing, or to replace the bundled method in ``run`` alone."""
    source, message = case
    file = tmp_path / "mine.py"
    file.write_text(source)
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "maslab.cli", "run", "--import", str(file), "--method", "vanilla",
         "--benchmark", "arith", "--model", "scripted:echo", "--limit", "1", "--out", str(out),
         "--no-cache", "--quiet"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [message.format(file=file)]
    assert not out.exists()
