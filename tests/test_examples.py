"""The examples run as a user would run them (against the scripted model)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_quickstart_notebook_executes_headlessly(monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MASLAB_MODEL", "scripted:echo")
    notebook = nbformat.read(EXAMPLES / "quickstart.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute(
        cwd=str(EXAMPLES.parent)
    )
    outputs = "".join(
        out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", [])
    )
    assert "votes:" in outputs and "calls=6" in outputs
    assert "[round 1] debater_2" in outputs and "flowchart" in outputs
    assert outputs.count("arith-test-") == 3


@pytest.mark.parametrize("script", ["quickstart.py", "debate_over_http.py"])
def test_example_scripts_run(script):
    env = {**os.environ, "MASLAB_MODEL": "scripted:echo"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, env=env,
        timeout=120, check=True,
    )  # fmt: skip
    assert result.stdout.count("calls") == 3 or "server:" in result.stdout
