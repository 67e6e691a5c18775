"""Every study's protocol against llama-cpp-python's server with the embedded model: one cell
of each (``--only``) at one task, through ``maslab study run`` on ``openai:<alias>@<url>``,
runs without an error, reaches the server, and leaves the study's page, which a headless
Chromium shows within 1400 pixels (where one is installed). The figures of a 135M-parameter
model are not the point: the calls, the records, the analysis and the page are."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import WIDTH, Browser, check_screenshot, find_chromium, window
from llama_server import ALIAS, llama_server

from maslab.cli import main
from maslab.studies.base import list_studies
from maslab.studies.running import read_record

pytestmark = pytest.mark.system

FIXTURES = Path(__file__).parents[1] / "fixtures" / "benchmarks"
ONE_CELL = {
    "maslab-table2": ["--only", "method=cot,benchmark=mmlu"],
    "randomness": ["--only", "method=vanilla", "--repeats", "2"],
    "cost-frontier": ["--only", "method=cot"],
    "tool-use": ["--only", "method=tool_agent,benchmark=bfcl_base"],
    "signals": ["--only", "method=self_consistency"],
    "collaboration-gap": ["--only", "method=solo_full"],
    "biased-swarm": ["--only", "method=single,benchmark=discrim_eval_open"],
    "teams-experts": ["--only", "method=best_individual,benchmark=mmlu_pro"],
}
"""The cell each study runs here, and what else it needs."""
DATA = {"maslab-table2": "mmlu", "biased-swarm": "discrim_eval_open", "teams-experts": "mmlu_pro"}


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with llama_server(n_ctx=4096) as url:
        yield url


def test_every_study_has_a_cell_here():
    assert set(ONE_CELL) == set(list_studies())


@pytest.mark.parametrize("name", sorted(ONE_CELL))
def test_one_cell_of_the_study_on_a_real_server(
    name, server, tmp_path, monkeypatch, capsys, request
):
    if name in DATA:  # imported into a scratch cache (BFCL's wheel stays in the user's)
        monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
        fixture = next(FIXTURES.glob(f"{DATA[name]}.json*"))
        assert main(["data", "import", DATA[name], str(fixture)]) == 0
    if name == "tool-use":
        request.getfixturevalue("bfcl_wheel")  # skips without BFCL's wheel
    out = tmp_path / "study"
    model = f"openai:{ALIAS}@{server}"
    code = main(["study", "run", name, "--model", model, "--limit", "1", "--out", str(out),
                 "--quiet", *ONE_CELL[name]])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert f"study {name}: 1 of 1 runs finished" in printed.out
    assert read_record(out).models == [model]
    assert "cost: " in printed.out and (out / "study.html").is_file()
    assert " 0 calls" not in printed.out  # the cell's calls reached the server
    if find_chromium() is not None:
        asyncio.run(shown_within_the_page(out / "study.html", tmp_path / "profile"))


async def shown_within_the_page(page: Path, profile: Path) -> None:
    """The page in Chromium: its tables end within 1400 pixels, and it shows something."""
    async with Browser.start(profile) as browser:
        await window(browser, 1400)
        await browser.goto(page.as_uri())
        rights = await browser.evaluate(
            "[...document.querySelectorAll('table')].map(t => t.getBoundingClientRect().right)"
        )
        assert rights and max(rights) <= 1400
        assert await browser.evaluate("document.documentElement.scrollWidth") <= 1400
        await window(browser, WIDTH)
        check_screenshot(await browser.screenshot())
