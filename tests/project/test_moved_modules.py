"""The flat layout's module paths still import, as the very modules that took their place."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from maslab.moved import MOVED


@pytest.mark.parametrize(("old", "new"), MOVED.items())
def test_an_old_path_imports_the_module_that_took_its_place(old, new):
    assert importlib.import_module(old) is importlib.import_module(new)


@pytest.mark.system
def test_names_the_old_readme_imported_still_import_in_a_fresh_process():
    code = (
        "from maslab.roles import numbered\n"
        "from maslab.bridge import run_with_llm\n"
        "from maslab.synergy import condition_gaps, synergy\n"
        "from maslab.testing import ScriptedModel\n"
        "from maslab.testing.scripted import ScriptedModel as Scripted\n"
        "from maslab.answers import extract_answer\n"
        "from maslab.results import RunStore\n"
        "import maslab.core.roles as new\n"
        "assert numbered is new.numbered and ScriptedModel is Scripted\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
