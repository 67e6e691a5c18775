"""Help derived from docstrings and descriptions reads as plain text in a terminal."""

from __future__ import annotations

import pytest
from pydantic.fields import FieldInfo

from maslab.cli import main
from maslab.cli.console import plain_text
from maslab.cli.run_flags import _arguments


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("within ``limits``", "within limits"),
        ("see :func:`~maslab.api.evaluate`", "see evaluate"),
        ("a :class:`maslab.Task` or :py:meth:`Task.load`", "a maslab.Task or Task.load"),
        ("``a`` and ``b``; `maslab list methods` stays", "a and b; `maslab list methods` stays"),
    ],
)
def test_rst_markup_becomes_plain_text(text, plain):
    assert plain_text(text) == plain


def test_a_flag_help_from_a_description_drops_rst_markup():
    field = FieldInfo(annotation=int, default=3, description="the ``N`` of :func:`~a.run`")
    assert _arguments("n", field)["help"] == "the N of run (default 3)"


def test_run_help_explains_the_common_flags(capsys):
    assert main(["run", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "--limit N score only the first N tasks (after the shuffle, if any)" in shown
    assert "the same seed replays a run from the cache (default 0)" in shown
    assert "--split SPLIT the benchmark split the run scores (default test)" in shown
    assert "--evaluator EVALUATOR the scoring protocol" in shown and "``" not in shown


def test_listed_docstrings_show_no_rst_markup(capsys):
    assert main(["list", "evaluators"]) == 0
    listed = capsys.readouterr().out
    assert "within limits" in listed and "``" not in listed
