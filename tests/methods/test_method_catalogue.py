"""Every bundled method says its category, paper and LLM calls per task, and the method table
of docs/methods.md and ``maslab list methods`` say exactly the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from maslab.cli import main
from maslab.core.method import get_method, list_methods
from maslab.plugins import origin

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "methods.md").read_text(encoding="utf-8")
BUNDLED = [name for name in list_methods() if origin(get_method(name)) == "bundled"]


def _table(heading: str) -> dict[str, list[str]]:
    """The rows of the first table after ``heading``, by their first cell, ``\\|`` unescaped."""
    section = PAGE.split(heading, 1)[1]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            if rows:
                break
            continue
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        for name in re.findall(r"`([^`]+)`", cells[0]):
            rows[name] = cells[1:]
    return rows


def test_the_catalogue_covers_the_bundled_methods():
    assert len(BUNDLED) >= 20
    assert sorted(_table("# Methods\n")) == sorted(BUNDLED)
    assert set(_table("| method | roles (agents reachable by name) |")) == set(BUNDLED)


@pytest.mark.parametrize("name", BUNDLED)
def test_each_method_states_category_paper_and_calls(name, capsys):
    cls = get_method(name)
    assert cls.paper and cls.category and cls.calls, f"{name} lacks paper, category or calls"
    assert _table("# Methods\n")[name] == [cls.paper, cls.category, cls.calls]
    assert main(["list", "methods"]) == 0
    # without whitespace: the table folds long words where its columns are narrow (a method
    # imported from a long path earlier in the session widens the origin column)
    listed = "".join(capsys.readouterr().out.split())
    for fact in (cls.paper, cls.category, f"LLM calls per task: {cls.calls}"):
        assert "".join(fact.split()) in listed


def test_a_narrow_terminal_folds_long_words_instead_of_cutting_them(capsys, monkeypatch):
    from maslab.cli.console import console

    monkeypatch.setattr(console, "width", 48)
    assert main(["list", "methods"]) == 0
    listed = "".join(capsys.readouterr().out.split())
    assert "constraint/verifier/selector" in listed and "…" not in listed


MASLAB_TABLE = (  # MASLab's Table 1, in its order (MATRIX, row 23, is left out: docs say why)
    "vanilla", "cot", "camel", "autogen", "self_consistency", "agentverse", "llm_debate",
    "gptswarm", "dylan", "mad", "self_refine", "macnet", "adas", "aflow", "mav", "mas_gpt",
    "metagpt", "chatdev", "mapcoder", "evomac", "macm", "medagents",
)  # fmt: skip
DESIGNERS = ("agentprune", "agentdropout", "g_designer", "evoagent", "mas_zero", "masrouter")


def test_every_method_of_maslabs_table_and_the_designers_is_bundled_and_listed():
    assert len(MASLAB_TABLE) == 22 and set(MASLAB_TABLE + DESIGNERS) <= set(BUNDLED)
    section = PAGE.split("## MASLab's table", 1)[1].split("\n## ", 1)[0]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| "))
    assert sorted(re.findall(r"`([a-z_0-9]+)`", rows)) == sorted(MASLAB_TABLE)
    assert "MATRIX" in rows and all(f"`{name}`" in section for name in DESIGNERS)
