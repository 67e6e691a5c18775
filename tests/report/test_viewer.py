"""``maslab view`` over HTTP: leaderboard, filters, search, paging, transcripts, escaping, lazy
reading of traces, and the command's one-line errors."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
from html import escape, unescape
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from viewer_runs import ODD_ID, PAYLOAD, debate_trace, write_run

from maslab.bench.evaluation import Score
from maslab.cli import main
from maslab.store.run_store import Manifest, ResultRecord, RunStore
from maslab.viewer.app import make_app
from maslab.viewer.runs import Run
from maslab.viewer.search import search


@contextlib.asynccontextmanager
async def viewer(*paths: Path):
    runs = [Run.open(i, path) for i, path in enumerate(paths)]
    async with TestClient(TestServer(make_app(runs))) as client:
        yield client


async def page(client: TestClient, url: str, status: int = 200) -> str:
    response = await client.get(url)
    assert response.status == status
    return await response.text()


def tasks(html: str) -> list[str]:
    """The task ids of a sample list, in order."""
    return [unescape(t) for t in re.findall(r'<a class="sample" href="[^"]*">([^<]*)</a>', html)]


def count(html: str) -> str:
    return re.search(r'id="count">([^<]*)<', html)[1]


@pytest.fixture
def run_dir(tmp_path) -> Path:
    return write_run(tmp_path / "run")


async def test_leaderboard_and_first_page(run_dir):
    async with viewer(run_dir) as client:
        html = await page(client, "/")
    [row] = leaderboard_rows(html)
    assert row[2] == "llm_debate · viewer" and row[4] == "scripted:viewer"
    assert row[5] == "60" and row[6].startswith("95.0%")  # 57 correct of 60 (t01 wrong, t02, t03)
    assert count(html) == "1–50 of 60 samples" and "page 1 of 2" in html
    assert tasks(html)[:5] == ["t00", "t01", "t02", "t03", ODD_ID]


async def test_paging(run_dir):
    async with viewer(run_dir) as client:
        second = await page(client, "/?page=2")
        beyond = await page(client, "/?page=99")
    assert count(second) == "51–60 of 60 samples" and tasks(second)[0] == "t50"
    assert 'id="previous"' in second and 'id="next"' not in second
    assert count(beyond) == count(second)  # past the end: the last page


async def test_outcome_filters(run_dir):
    async with viewer(run_dir) as client:
        found = {kind: tasks(await page(client, f"/?outcome={kind}"))
                 for kind in ("wrong", "unparsed", "error")}  # fmt: skip
        correct = await page(client, "/?outcome=correct")
        ignored = await page(client, "/?outcome=bogus&run=7&page=²")
    assert found == {"wrong": ["t01"], "unparsed": ["t02"], "error": ["t03"]}
    assert count(correct) == "1–50 of 57 samples"
    assert count(ignored) == "1–50 of 60 samples"  # values that name nothing are ignored


async def test_run_and_method_filters(tmp_path):
    a = write_run(tmp_path / "a", samples=6)
    b = write_run(tmp_path / "b", method="vanilla", samples=3)
    async with viewer(a, b) as client:
        every = await page(client, "/")
        by_run = await page(client, "/?run=1")
        first = await page(client, "/?run=0")
        by_method = await page(client, "/?method=llm_debate")
    assert count(every) == "1–9 of 9 samples"
    assert count(by_run) == "1–3 of 3 samples" and count(by_method) == "1–6 of 6 samples"
    assert '<option value="1" selected>1: ' in by_run  # the form shows the filter chosen
    assert '<option value="0" selected>0: ' in first and count(first) == "1–6 of 6 samples"


async def test_search_finds_text_not_keys(run_dir):
    async with viewer(run_dir) as client:
        assert tasks(await page(client, "/?q=NEEDLE-alpha")) == ["t00"]  # any case
        assert tasks(await page(client, "/?q=" + 'she said "hi there"')) == ["t00"]
        assert tasks(await page(client, "/?q=üNÏCODE")) == ["t00"]
        assert tasks(await page(client, "/?q=recipients")) == []  # a JSON key, not text
        both = await page(client, "/?q=window.__pwned&outcome=correct")
    assert count(both) == "no sample matches these filters"  # the search and a filter combine


def test_search_takes_each_samples_latest_trace(tmp_path):
    store = RunStore(tmp_path / "run")
    store.open(Manifest(method="m", benchmark="b", model="scripted:x", evaluator="numeric"))
    record = ResultRecord(task_id="t", status="error")
    store.append(record, debate_trace("t", ["1"], "first try"))
    store.append(record, debate_trace("t", ["2"], "second try"))
    store.append(record, debate_trace("u", ["1"], "first try"))
    store.close()
    assert search(store.dir / "traces.jsonl", "FIRST try").keys() == {("u", 0)}
    assert search(store.dir / "traces.jsonl", "second").keys() == {("t", 0)}


async def test_transcript_by_round_with_answers_and_calls(run_dir):
    async with viewer(run_dir) as client:
        html = await page(client, "/?outcome=wrong")
        link = unescape(re.search(r'<a class="sample" href="([^"]*)"', html)[1])
        transcript = await page(client, link)
    assert "<h3>Round 0</h3>" in transcript and "<h3>Round 1</h3>" in transcript
    assert transcript.count('<span class="answer">answer: 5</span>') == 3
    assert "12 + 5 tokens" in transcript and "Calls (4)" in transcript
    assert 'href="/?outcome=wrong" id="back"' in transcript  # back to the same list


async def test_transcript_shows_each_agents_answer_and_the_tally(run_dir):
    async with viewer(run_dir) as client:
        transcript = await page(client, "/sample?run=0&task=t01&repeat=0")
    answers = transcript[
        transcript.index('id="answers"') : transcript.index(
            "</table>", transcript.index('id="answers"')
        )
    ]
    assert "<th>agent0</th><th>agent1</th>" in answers
    assert "<tr><td>0</td><td>4</td><td>5</td></tr>" in answers  # round 0: they disagree
    assert "last round's votes: 5 ×2" in transcript


async def test_model_text_and_ids_are_escaped(run_dir):
    async with viewer(run_dir) as client:
        response = await client.get("/sample?run=0&task=t01&repeat=0")
        transcript = await response.text()
        listing = await page(client, "/?q=" + ODD_ID.replace("&", "%26"))
        odd = await page(client, "/sample?run=0&task=t04%3Cb%3E%26%22&repeat=0")
    assert "<script>" not in transcript and "<img" not in transcript
    assert escape(PAYLOAD) in transcript
    assert "script-src" not in response.headers["Content-Security-Policy"]  # none allowed
    assert "default-src 'none'" in response.headers["Content-Security-Policy"]
    assert tasks(listing) == [ODD_ID] and "t04<b>" not in listing
    assert "<code>t04&lt;b&gt;&amp;&quot;</code>" in odd


async def test_unknown_sample_is_not_found(run_dir):
    async with viewer(run_dir) as client:
        for query in ("run=0&task=nope&repeat=0", "run=5&task=t00&repeat=0",
                      "run=0&task=t00&repeat=x", "run=²&task=t00&repeat=0"):  # fmt: skip
            assert "No such sample." in await page(client, f"/sample?{query}", status=404)


async def test_list_pages_read_no_trace(run_dir, monkeypatch):
    opened: list[str] = []
    read: list[list[tuple[str, int]]] = []
    real_open, real_traces_of = Path.open, RunStore.traces_of

    def spy_open(self, *args, **kwargs):
        opened.append(self.name)
        return real_open(self, *args, **kwargs)

    def spy_traces_of(self, keys, index=None):
        read.append(keys := list(keys))
        return real_traces_of(self, keys, index)

    monkeypatch.setattr(Path, "open", spy_open)
    monkeypatch.setattr(RunStore, "traces_of", spy_traces_of)
    async with viewer(run_dir) as client:
        for url in ("/", "/?page=2", "/?outcome=wrong", "/?method=llm_debate"):
            await page(client, url)
        assert not {"traces.jsonl", "traces.idx"} & set(opened)
        transcript = await page(client, "/sample?run=0&task=t07&repeat=0")
    assert "agent1 in round 1 of t07" in transcript
    assert read == [[("t07", 0)]]  # that trace alone, through the index


async def test_records_are_read_again_as_the_run_grows(tmp_path):
    run_dir = write_run(tmp_path / "run", samples=3)
    async with viewer(run_dir) as client:
        assert count(await page(client, "/")) == "1–3 of 3 samples"
        manifest = RunStore(run_dir).manifest()
        store = RunStore(run_dir)
        store.open(manifest.model_copy(update={"task_ids": ["t00", "t01", "t02", "t03"]}))
        score = Score(value=1.0, correct=True, extracted="4")
        store.append(ResultRecord(task_id="t03", status="ok", score=score),
                     debate_trace("t03", ["4"], "late arrival"))  # fmt: skip
        store.close()
        assert count(await page(client, "/")) == "1–4 of 4 samples"
        assert tasks(await page(client, "/?q=late+arrival")) == ["t03"]


async def test_signal_filter_ranks_by_value(run_dir):
    async with viewer(run_dir) as client:
        flips = await page(client, "/?signal=answer_flips")
        loops = await page(client, "/?signal=repetition")
        transcript = await page(client, "/sample?run=0&task=t05&repeat=0")
    assert tasks(flips) == ["t01", "t05"]  # highest first; t02's 0 did not fire
    assert tasks(loops) == ["t05"]
    assert '<option value="answer_flips" selected>' in flips
    assert '<option value="repetition">' in flips  # the signals the run's records hold
    assert "repetition 3" in transcript


def test_bad_run_path_is_one_line(tmp_path, capsys):
    assert main(["view", str(tmp_path / "missing"), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such run directory" in err


def test_taken_port_is_one_line(run_dir, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", str(run_dir), "--port", str(port), "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"port {port} on 127.0.0.1 is taken" in err


@pytest.mark.system
async def test_the_command_serves_on_localhost(run_dir):
    command = [sys.executable, "-m", "maslab.cli", "view", str(run_dir), "--port", "0",
               "--no-browser"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)[0]
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200
            assert "1–50 of 60 samples" in await response.text()
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0  # SIGTERM stops a viewer, as Ctrl-C does
    assert process.stdout.read() == "maslab view: stopped\n"


async def test_only_requests_naming_the_viewer_by_its_own_host_are_answered(run_dir):
    """DNS rebinding: a page on another site points its own name at 127.0.0.1 and reads what
    the viewer serves; its requests carry that name in Host and get nothing."""
    task = RunStore(run_dir).results()[0].task_id
    async with viewer(run_dir) as client:
        port = client.server.port
        assert "maslab view" in await page_as(client, f"/sample?run=0&task={task}&repeat=0",
                                              f"localhost:{port}", 200)  # fmt: skip
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
            assert "Leaderboard" in await page_as(client, "/", host, 200)
        for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.nip.io:{port}"):
            text = await page_as(client, f"/sample?run=0&task={task}&repeat=0", host, 421)
            assert text == "maslab view answers only to 127.0.0.1 or localhost\n"


async def page_as(client: TestClient, url: str, host: str, status: int) -> str:
    response = await client.get(url, headers={"Host": host})
    assert response.status == status
    return await response.text()


def leaderboard_rows(html: str) -> list[list[str]]:
    board = html[html.index('id="leaderboard"') : html.index("</table>")]
    rows = re.findall(r"<tr>(.*?)</tr>", board.split("<tbody>", 1)[1])
    return [
        [
            unescape(re.sub(r"<[^>]+>", "", cell))
            for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)
        ]
        for row in rows
    ]


async def test_the_leaderboard_ranks_and_names_the_runs(tmp_path):
    weak = write_run(tmp_path / "weak", samples=6)  # t01 wrong, t02 unparsed, t03 errored
    strong = write_run(tmp_path / "strong", samples=3)
    manifest = RunStore(strong).manifest()
    manifest.method_config = {"agents": 3}
    (strong / "manifest.json").write_text(manifest.model_dump_json())
    async with viewer(weak, strong) as client:
        html = await page(client, "/")
    rows = leaderboard_rows(html)
    # rank, the run's place on the command line, its name: what differs between the two
    assert [row[:3] for row in rows] == [
        ["1", "0", "llm_debate · viewer (agents=unset)"],
        ["2", "1", "llm_debate · viewer (agents=3)"],
    ]
    assert '<option value="1">1: llm_debate · viewer (agents=3)</option>' in html


async def test_the_leaderboard_gives_strict_accuracy_compliance_and_cut_replies(tmp_path):
    store = RunStore(tmp_path / "run")
    store.open(Manifest(method="cot", benchmark="arith", model="scripted:x", evaluator="numeric"))
    for task, strict, cut in (("t0", "4", 0), ("t1", None, 3)):
        score = Score(value=1.0, correct=True, extracted="4").with_strict(strict, True)
        store.append(ResultRecord(task_id=task, status="ok", gold="4", score=score,
                                  truncated_calls=cut), debate_trace(task, ["4", "4"]))  # fmt: skip
    store.close()
    async with viewer(store.dir) as client:
        html = await page(client, "/")
    head = re.findall(r"<th>([^<]*)</th>", html[html.index('id="leaderboard"') :])
    assert head[7:9] == ["Strict [95% CI]", "In form"] and "Cut replies / sample" in head
    [row] = leaderboard_rows(html)
    assert row[7].startswith("50.0% [") and row[8] == "50.0%"
    assert row[head.index("Cut replies / sample")] == "1.50"


async def test_search_results_show_where_the_transcript_matched(run_dir):
    async with viewer(run_dir) as client:
        html = await page(client, "/?q=needle-ALPHA")
    assert "<th>Match</th>" in html
    assert (
        "agent0 in round 0 of t00. <mark>needle-alpha</mark>; she said &quot;hi there&quot;; "
        "Ünïcode The answer is 4."
    ) in html


async def test_a_sample_links_to_the_previous_and_next_in_the_lists_order(run_dir):
    async with viewer(run_dir) as client:
        # the samples where answer_flips fired, highest first: t01, then t05
        listing = await page(client, "/?signal=answer_flips")
        first = unescape(re.search(r'<a class="sample" href="([^"]*)"', listing)[1])
        t01 = await page(client, first)
        following = unescape(re.search(r'href="([^"]*)" id="next-sample"', t01)[1])
        t05 = await page(client, following)
        middle = await page(client, "/sample?run=0&task=t01&repeat=0&back=page%3D1")
    assert 'id="previous-sample"' not in t01 and "<code>t05</code>" in t05
    assert 'id="next-sample"' not in t05
    back = unescape(re.search(r'href="([^"]*)" id="previous-sample"', t05)[1])
    assert back == first and "back=signal%3Danswer_flips" in back  # the same list, kept
    # in the whole list, t01 lies between t00 and t02
    assert "task=t00" in re.search(r'href="([^"]*)" id="previous-sample"', middle)[1]
    assert "task=t02" in re.search(r'href="([^"]*)" id="next-sample"', middle)[1]
