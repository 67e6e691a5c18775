"""``maslab view`` in a real headless Chromium: the leaderboard (fitting a page 1400 pixels
wide), a filter and a search typed as a user would, a transcript, and screenshots checked for
content (not pixels)."""

from __future__ import annotations

import pytest
from browser import HEIGHT, WIDTH, Browser, check_screenshot, find_chromium
from viewer_runs import write_run

from maslab.store.run_store import RunStore
from maslab.viewer.app import start
from maslab.viewer.runs import Run

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(find_chromium() is None, reason="no chromium binary"),
]


async def test_filter_search_and_transcript_in_chromium(tmp_path):
    directory = write_run(tmp_path / "run")
    manifest = RunStore(directory).manifest()  # a model's long name and endpoint, and a judge
    manifest.model = (
        "openai:neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w4a16@"
        "http://gpu-node-a.cluster.example.org:8000/v1"
    )
    manifest.model_roles = {"judge": {"model": manifest.model, "temperature": 0}}
    manifest.benchmark = "bfcl_multi_turn_long_context"
    (directory / "manifest.json").write_text(manifest.model_dump_json())
    runs = [Run.open(0, directory)]
    runner, url = await start(runs, 0)
    try:
        async with Browser.start(tmp_path / "profile") as browser:
            await browser.send("Emulation.setDeviceMetricsOverride", width=1400, height=HEIGHT,
                               deviceScaleFactor=1, mobile=False)  # fmt: skip
            await browser.goto(url)
            full, shown, right, width = await browser.evaluate(
                "(() => { const t = document.querySelector('#leaderboard'); return [t.scrollWidth,"
                " t.clientWidth, t.getBoundingClientRect().right, innerWidth]; })()"
            )
            assert width == 1400 and full <= shown and right <= width  # no column past the page
            await browser.send("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                               deviceScaleFactor=1, mobile=False)  # fmt: skip
            assert "llm_debate" in await browser.text("#leaderboard")
            assert await browser.text("#count") == "1–50 of 60 samples"
            check_screenshot(await browser.screenshot())

            await browser.choose("select[name=outcome]", "wrong")
            async with browser.navigation():
                await browser.click("#apply")
            assert await browser.text("#count") == "1–1 of 1 samples"
            assert "t01" in await browser.text("#samples")

            async with browser.navigation():
                await browser.click("a.sample")  # t01: its messages hold a script
            page = await browser.text()
            assert "<script>window.__pwned = 1</script>" in page  # shown as text
            assert await browser.evaluate("typeof window.__pwned") == "undefined"  # not run
            assert "Round 1" in page and "answer: 5" in page and "12 + 5 tokens" in page

            await browser.goto(url)
            await browser.type_into("input[name=q]", "needle-alpha")
            async with browser.navigation():
                await browser.press_enter()
            assert await browser.text("#count") == "1–1 of 1 samples"
            assert "t00" in await browser.text("#samples")
            check_screenshot(await browser.screenshot())
    finally:
        await runner.cleanup()
