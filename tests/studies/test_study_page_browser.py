"""A study's page in a real headless Chromium: MASLab's Table 2 laid out for two models (our
figures, the paper's and the verdicts in every cell) fits a page 1400 pixels wide, the verdicts
are coloured by kind, and a screenshot shows something (content, not pixels)."""

from __future__ import annotations

import pytest
from browser import WIDTH, Browser, check_screenshot, find_chromium, window

from maslab.studies.base import Analysis, Cell, Row, Table
from maslab.studies.catalogue.maslab_table2 import BENCHMARKS, METHODS, MaslabTable2
from maslab.studies.estimates import Estimate, value_verdict
from maslab.studies.report import write_page
from maslab.studies.running import StudyRecord

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(find_chromium() is None, reason="no chromium binary"),
]

MODELS = ("openai:qwen2.5-7b-instruct@localhost", "openai:llama-3.1-8b-instruct@gpu-node-a")


def analysis() -> Analysis:
    """Table 2's accuracies for two models, ours spread around the paper's Qwen-2.5-7B."""
    figures = MaslabTable2.paper_figures()
    assert figures is not None
    tables = []
    for shift, model in zip((-0.12, 0.0), MODELS, strict=True):
        rows = []
        for i, method in enumerate(METHODS):
            cells = []
            for j, bench in enumerate(BENCHMARKS):
                paper = figures.value(bench, model="Qwen-2.5-7B-Instruct", method=method)
                value = min(max((paper or 0.5) + shift + 0.01 * ((i + j) % 5), 0.0), 1.0)
                ours = Estimate(value, max(value - 0.06, 0), min(value + 0.06, 1), 200)
                cells.append(Cell(ours, paper, value_verdict(ours, paper) if paper else None))
            rows.append(Row(method, (*cells, Cell(note="not run"))))
        tables.append(Table(f"Accuracy on {model}", (*BENCHMARKS, "Avg-V"), tuple(rows),
                            against="the paper's Qwen-2.5-7B-Instruct"))  # fmt: skip
    return Analysis(tuple(tables), calls=123_456, tokens=98_765_432, samples=18_000)


async def test_the_study_page_in_chromium(tmp_path):
    record = StudyRecord(study="maslab-table2", models=list(MODELS), limit=200)
    page = write_page(tmp_path, MaslabTable2(), record, analysis(), ("mmlu/mav/" + MODELS[1],))
    async with Browser.start(tmp_path / "profile") as browser:
        await window(browser, 1400)
        await browser.goto(page.as_uri())
        widths = await browser.evaluate(
            "[...document.querySelectorAll('table')].map(t => [t.getBoundingClientRect().right,"
            " document.documentElement.scrollWidth])"
        )
        assert len(widths) == 2 and all(right <= 1400 and page <= 1400 for right, page in widths)
        colours = await browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('.v')].map(v =>"
            " [v.innerText, getComputedStyle(v).backgroundColor]))"
        )
        assert {"inside", "lower"} <= colours.keys()
        assert colours["inside"] != colours["lower"]  # a verdict's kind shows at a glance
        text = await browser.text("body")
        assert "Ye et al., MASLab" in text and "Table 2 of the April 2025 draft" in text
        assert "not run yet: mmlu/mav/" in text and "123,456 calls" in text
        await window(browser, WIDTH)
        check_screenshot(await browser.screenshot())
        assert await browser.evaluate("document.title") == "maslab-table2 · maslab study"
