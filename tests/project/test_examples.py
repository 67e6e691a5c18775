"""The examples run as a user would run them (against the scripted model)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PAGES = [EXAMPLES.parent / "README.md", *sorted((EXAMPLES.parent / "docs").rglob("*.md"))]
README_BLOCKS = [
    block
    for page in PAGES
    for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)
]
# runs a README or docs block as written: a block with a top-level await as a notebook cell
# does (in a running event loop), any other as a script
CELL_OR_SCRIPT = """
import ast, asyncio, inspect, sys
source = open(sys.argv[1], encoding="utf-8").read()
code = compile(source, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
namespace = {"__name__": "__main__"}
if code.co_flags & inspect.CO_COROUTINE:
    async def cell():
        await eval(code, namespace)
    asyncio.run(cell())
else:
    exec(code, namespace)
"""


def test_quickstart_notebook_executes_headlessly(monkeypatch, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MASLAB_MODEL", "scripted:echo")
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    notebook = nbformat.read(EXAMPLES / "quickstart.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute(
        cwd=str(tmp_path)  # the run directory goes under runs/ here
    )
    outputs = "".join(
        out.get("text", "") + out.get("data", {}).get("text/plain", "")
        for cell in notebook.cells
        for out in cell.get("outputs", [])
    )
    data = [out.get("data", {}) for cell in notebook.cells for out in cell.get("outputs", [])]
    pictures = [shown["image/svg+xml"] for shown in data if "image/svg+xml" in shown]
    assert "votes:" in outputs and "calls=6" in outputs
    assert "[round 1] debater_2" in outputs
    assert len(pictures) == 1 and "debater_1" in pictures[0]  # the topology, drawn
    assert "<RunResult llm_debate · arith · scripted:echo" in outputs and "3 of 3 done" in outputs
    assert outputs.count("arith-test-") == 6  # the table, then the resumed run's samples
    assert "resumed True" in outputs
    [run] = (tmp_path / "runs" / "arith").iterdir()
    assert (run / "report.html").is_file()


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("quickstart.py", ["one question: votes", "<RunResult llm_debate · arith", "report: "]),
        ("debate_over_http.py", ["server:"]),
    ],
)
def test_example_scripts_run(script, expected, tmp_path):
    env = {**os.environ, "MASLAB_MODEL": "scripted:echo", "MASLAB_CACHE_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, env=env,
        timeout=120, check=True, cwd=tmp_path,
    )  # fmt: skip
    assert all(text in result.stdout for text in expected), result.stdout
    assert result.stdout.count("arith-test-") == 3 or script != "quickstart.py"
    if script == "quickstart.py":  # the one question is a number question: numbers are voted on
        assert re.search(r"one question: votes \{'\d+': 3\}", result.stdout), result.stdout


@pytest.mark.parametrize(
    "block", README_BLOCKS, ids=[f"block{i}" for i in range(len(README_BLOCKS))]
)
def test_readme_python_blocks_run_as_written(block, tmp_path):
    source = block.replace('"local:smollm2-135m"', '"scripted:echo"')  # the demo model is slow
    assert '"local:' not in source
    (tmp_path / "block.py").write_text(source, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-c", CELL_OR_SCRIPT, "block.py"], capture_output=True, text=True,
        env={**os.environ, "MASLAB_CACHE_DIR": str(tmp_path / "cache")}, cwd=tmp_path,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_readme_shows_a_script_and_a_notebook_run():
    runs = [b for b in README_BLOCKS if "evaluate(" in b]
    assert any("await maslab.aevaluate(" in b for b in runs)
    assert any("maslab.evaluate(" in b and "await" not in b for b in runs)
