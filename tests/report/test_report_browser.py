"""The report of two real (scripted) runs in a real headless Chromium: the plots show whole with
their numbers apart, the leaderboard tells the runs apart and fits a page 1400 pixels wide, a
transcript opens on its vote tally and extracted answers, a ranked sample's link opens its
transcript, the signal filter and the "wrong only" box hide samples, and a screenshot shows
something (content, not pixels)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from browser import WIDTH, Browser, check_screenshot, find_chromium, window

import maslab
from maslab.report import build_report

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(find_chromium() is None, reason="no chromium binary"),
]

# arith's first three tasks: Yuki (gold 13), Amara (27), Sven (98). On Yuki the debaters flip
# from 12 to 13; on Amara they hold 27; on Sven they give no answer, the same words twice.
SCRIPT = {
    "Other agents.*Yuki": "On reflection I get \\boxed{13}.",
    "Yuki": "I count \\boxed{12}.",
    "Amara": "The answer is \\boxed{27}.",
    ".": "I am not sure.",
}


# where the replies lie: a long model spec, as a real model's name and endpoint make
REPLIES = "experiments/2026-11-26_debate-ablation_qwen2.5-72b-instruct-gptq-int4_gpu-node-a/replies"


async def run(directory: Path, agents: int) -> Path:
    script = directory.parent / REPLIES / "script.json"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(json.dumps(SCRIPT))
    await maslab.aevaluate(
        "llm_debate", "arith", f"scripted:{script}", limit=3, cache=False, out=directory,
        config={"agents": agents, "rounds": 2}, progress=False,
    )  # fmt: skip
    return directory


async def visible(browser: Browser, selector: str) -> list[str]:
    """The task ids of the samples ``selector`` matches that are displayed."""
    found = await browser.evaluate(
        f"[...document.querySelectorAll({json.dumps(selector)})]"
        ".filter(d => d.checkVisibility()).map(d => d.querySelector('summary code').innerText)"
    )
    return list(found)


FITS = (
    "(() => { const t = document.querySelector('.leaderboard'); return [t.scrollWidth,"
    " t.clientWidth, t.getBoundingClientRect().right, document.documentElement.scrollWidth,"
    " innerWidth]; })()"
)
"""The leaderboard's full and shown widths, its right edge, the page's width, the window's."""


PLOTS = """[...document.querySelectorAll('.plot svg')].map(svg => {
  const shown = svg.getBoundingClientRect();
  const inside = r => r.left >= shown.left - 0.5 && r.right <= shown.right + 0.5
    && r.top >= shown.top - 0.5 && r.bottom <= shown.bottom + 0.5;
  const clipped = [...svg.querySelectorAll('text')]
    .filter(t => !inside(t.getBoundingClientRect())).map(t => t.textContent);
  const numbers = [...svg.querySelectorAll('text.number')].map(t => t.getBoundingClientRect());
  const overlapping = numbers.some((a, i) => numbers.slice(i + 1).some(b =>
    a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom));
  return [shown.width, clipped, overlapping];
})"""
"""Each plot's width on the page, its texts that stand outside it, and whether any two numbers
overlap: the real glyphs' boxes."""


async def until(browser: Browser, expression: str) -> None:
    """Wait for a JavaScript expression to hold (a same-page navigation has no load event)."""
    for _ in range(100):
        if await browser.evaluate(expression):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never held: {expression}")


async def test_the_report_of_two_runs_in_chromium(tmp_path):
    two = await run(tmp_path / "two", 2)
    three = await run(tmp_path / "three", 3)
    page = build_report([two, three], tmp_path / "report.html")
    async with Browser.start(tmp_path / "profile") as browser:
        await window(browser, 1400)
        await browser.goto(page.as_uri())
        # the models' long paths wrap: no column runs past the page
        full, shown, right, page_width, width = await browser.evaluate(FITS)
        assert width == 1400 and full <= shown and right <= width and page_width <= width
        await window(browser, WIDTH)  # the screenshots' width
        plots = await browser.evaluate(PLOTS)
        assert len(plots) == 2  # accuracy against cost; per-round convergence
        for plot_width, clipped, overlapping in plots:
            assert plot_width > 300 and clipped == [] and not overlapping
        leaderboard = await browser.text(".leaderboard")
        assert "llm_debate (agents=2)" in leaderboard and "llm_debate (agents=3)" in leaderboard
        check_screenshot(await browser.screenshot())

        # the ranked samples lead: Sven (unparsed, repetition), then Yuki (answer_flips)
        samples = "#run-0 details.sample"
        assert await visible(browser, samples) == [
            "arith-test-0002",
            "arith-test-0000",
            "arith-test-0001",
        ]
        yuki = "details:has(> #run-0-sample-1)"
        await browser.click(f"{yuki} > summary")
        await until(browser, f"document.querySelector({json.dumps(yuki)}).open")
        transcript = await browser.text(yuki)
        assert "Votes\n13 ×2" in transcript
        assert "answer 12" in transcript and "answer 13" in transcript
        assert "answer_flips 2" in transcript  # its badge

        sven = "details:has(> #run-0-sample-0)"
        await browser.click('#run-0 .ranked a[href="#run-0-sample-0"]')
        await until(browser, f"document.querySelector({json.dumps(sven)}).open")

        await browser.choose("#run-0-filter", "answer_flips")
        assert await visible(browser, samples) == ["arith-test-0000"]
        assert len(await visible(browser, "#run-1 details.sample")) == 3  # its own filter
        await browser.choose("#run-0-filter", "unparsed")
        assert await visible(browser, samples) == ["arith-test-0002"]
        check_screenshot(await browser.screenshot())
        await browser.choose("#run-0-filter", "")
        assert len(await visible(browser, samples)) == 3
        await browser.click("#run-0-wrong-only")  # Yuki and Amara right, Sven unparsed
        assert await visible(browser, samples) == ["arith-test-0002"]
        assert len(await visible(browser, "#run-1 details.sample")) == 3
        await browser.click("#run-0-wrong-only")
        assert len(await visible(browser, samples)) == 3
