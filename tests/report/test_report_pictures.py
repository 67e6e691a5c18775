"""The report's pictures: variant labels, the numbered cost plot and its key, tokens by agent,
pass@k, per-round convergence, vote tallies and topologies drawn once per run."""

from __future__ import annotations

import itertools
import math
import re
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from maslab.analysis.stats import Summary, summarize
from maslab.bench.evaluation import Score
from maslab.core.topology import Topology
from maslab.report import build_report, describe_votes, run_labels
from maslab.report.figures import MAX_TOPOLOGIES, RoundFigures
from maslab.report.plots import (
    colour,
    convergence,
    cost_accuracy,
    pass_at_k,
    place_numbers,
    stack,
)
from maslab.store.records import TraceCall
from maslab.store.run_store import Manifest, ResultRecord, RunStore, Trace

DEBATE = {"agents": 2, "rounds": 2, "aggregate": "majority"}
AGENTS = ("a", "b")

# Per sample: each round's replies, one per agent (a, b). The last reply is the answer.
AGREE_LATE = [["The answer is 1.", "I get 2."], ["Still 1.", "You are right: 1."]]
TALKED_OUT = [["It is 1.", "1 it is."], ["On reflection, 3.", "Yes, 3."]]


def _key(reply: str) -> str | None:
    """What the scripted extraction makes of a reply: its last digit."""
    digits = re.findall(r"\d", reply)
    return digits[-1] if digits else None


def make_run(
    directory: Path,
    method: str = "llm_debate",
    config: dict[str, Any] | None = None,
    *,
    samples: Sequence[list[list[str]]] = (AGREE_LATE, TALKED_OUT),
    repeats: int = 1,
    model: str = "gpt-x",
    answers: bool = True,
    topologies: Sequence[Topology] = (),
) -> Path:
    """A run of one scripted debate per sample (each repeated ``repeats`` times), gold "1";
    its traces hold ``answers`` unless told not to, and sample i ran on ``topologies[i]``
    (by default all on one complete graph)."""
    store = RunStore(directory)
    manifest = Manifest(
        method=method, method_config=DEBATE if config is None else config, benchmark="arith",
        model=model, evaluator="numeric", repeats=repeats,
    )  # fmt: skip
    store.open(manifest)
    for (i, rounds), repeat in itertools.product(enumerate(samples), range(repeats)):
        messages = [  # a round with fewer replies: the first agents only
            {"sender": agent, "content": reply, "round": r, "kind": "message"}
            for r, replies in enumerate(rounds)
            for agent, reply in zip(AGENTS, replies, strict=False)
        ]
        final = messages[-1]["content"]
        correct = _key(final) == "1" and repeat != 1  # repeat 1 always fails
        calls = [
            {"agent": m["sender"], "round": m["round"], "prompt_tokens": 100 if m["sender"] == "a"
             else 50, "completion_tokens": 50 if m["sender"] == "a" else 0, "purpose": "method"}
            for m in messages
        ]  # fmt: skip
        calls.append({"agent": "judge", "prompt_tokens": 999, "purpose": "scoring"})
        topology = topologies[i] if topologies else Topology.complete(list(AGENTS))
        trace: dict[str, Any] = {
            "task_id": f"t{i}", "repeat": repeat, "prompt": "1?", "calls": calls,
            "messages": messages, "topology": topology.to_dict(),
        }  # fmt: skip
        if answers:
            trace["answers"] = [_key(m["content"]) for m in messages]
        score = Score(value=float(correct), correct=correct, extracted=_key(final), explanation="")
        usage = {"calls": len(messages), "prompt_tokens": 300, "completion_tokens": 100}
        record = ResultRecord(
            task_id=f"t{i}", repeat=repeat, status="ok", answer=final, gold="1", score=score,
            usage=usage, usage_by_model={model: usage},
        )  # fmt: skip
        store.append(record, Trace.model_validate(trace))
    store.close()
    return directory


def tbody(page: str, table_class: str) -> list[list[str]]:
    """The text of each cell of each body row of the first table of ``table_class``."""
    table = page.split(f'<table class="{table_class}">', 1)[1]
    body = table.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr>.*?</tr>", body)
    return [[text(cell) for cell in re.findall(r"<td>(.*?)</td>", row)] for row in rows]


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def section(page: str, number: int) -> str:
    return page.split(f'<section id="run-{number}">', 1)[1].split("</section>", 1)[0]


@pytest.mark.system
def test_labels_tell_two_llm_debate_runs_apart_by_the_keys_that_differ(tmp_path):
    three = make_run(tmp_path / "three", config={**DEBATE, "agents": 3})
    five = make_run(tmp_path / "five", config={**DEBATE, "agents": 5})
    solo = make_run(tmp_path / "solo", "vanilla", {})
    page = build_report([three, five, solo], tmp_path / "report.html").read_text()
    methods = sorted(row[1] for row in tbody(page, "leaderboard"))
    assert methods == ["llm_debate (agents=3)", "llm_debate (agents=5)", "vanilla"]
    # rounds and aggregate are the same in both debates: not shown
    assert sorted(label for _, label in tbody(page, "key")) == methods
    assert "llm_debate (agents=5) · arith" in text(page)  # the run's section heading


@pytest.mark.system
def test_labels_name_the_model_when_the_runs_use_several_and_the_directory_as_a_last_resort(
    tmp_path,
):
    runs = [
        make_run(tmp_path / "x1", model="openai:gpt-x@http://h/v1"),
        make_run(tmp_path / "y", model="openai:gpt-y"),
        make_run(tmp_path / "x2", model="openai:gpt-x@http://h/v1"),
        make_run(tmp_path / "cold", model="openai:gpt-y", config={**DEBATE, "rounds": 3}),
    ]
    page = build_report(runs, tmp_path / "report.html").read_text()
    assert sorted(label for _, label in tbody(page, "key")) == [
        "llm_debate · gpt-x (x1)",
        "llm_debate · gpt-x (x2)",
        "llm_debate · gpt-y (rounds=2)",
        "llm_debate · gpt-y (rounds=3)",
    ]


@pytest.mark.system
def test_a_cost_plot_of_seventeen_runs_numbers_its_points_and_keys_them_beside_it(tmp_path):
    runs = [
        make_run(tmp_path / f"run{i}", config={**DEBATE, "agents": i}, samples=[AGREE_LATE] * i)
        for i in range(2, 19)
    ]
    page = build_report(runs, tmp_path / "report.html").read_text()
    pictures = page.split('<div class="pictures">', 1)[1]
    assert pictures.count('aria-label="accuracy against tokens per sample') == 1
    key = tbody(pictures, "key")
    assert [number.split(" ")[1] for number, _ in key] == [str(n) for n in range(1, 18)]
    assert sorted(label for _, label in key) == sorted(
        f"llm_debate (agents={i})" for i in range(2, 19)
    )
    assert [row[:2] for row in tbody(page, "leaderboard")] == key  # the same numbers and labels


def test_numbers_of_crowded_points_are_placed_apart_and_clear_of_the_points():
    anchors = [(100 + 3 * (i % 4), 100 + 2 * (i // 4)) for i in range(16)]
    texts = [str(n) for n in range(1, 17)]
    markers = [(x - 4, y - 4, x + 4, y + 4) for x, y in anchors]
    bounds = (0.0, 0.0, 400.0, 300.0)
    offsets = place_numbers(anchors, texts, markers, bounds)

    def box(i: int) -> tuple[float, float, float, float]:
        (x, y), (dx, dy) = anchors[i], offsets[i]
        half_w, half_h = 2.5 * len(texts[i]), 4.0  # at least the size of the digits
        return (x + dx - half_w, y + dy - half_h, x + dx + half_w, y + dy + half_h)

    def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]

    boxes = [box(i) for i in range(16)]
    for a, b in itertools.combinations(boxes, 2):
        assert not overlap(a, b)
    assert not any(overlap(a, m) for a in boxes for m in markers)


def test_each_run_shows_its_agents_share_of_the_tokens(tmp_path):
    run = make_run(tmp_path / "run")
    page = build_report([run], tmp_path / "report.html").read_text()
    # a: 4 calls × 150 tokens, b: 4 × 50; the evaluator's judge is no agent of the method
    assert tbody(page, "numbers") == [["a", "4", "600", "75.0%"], ["b", "4", "200", "25.0%"]]
    assert 'title="a: 75.0%"' in page


@pytest.mark.system
def test_pass_at_k_is_drawn_for_runs_with_repeats_only(tmp_path):
    once = make_run(tmp_path / "once")
    page = build_report([once], tmp_path / "once.html").read_text()
    assert "pass@k" not in page
    thrice = make_run(tmp_path / "thrice", repeats=3)
    page = build_report([once, thrice], tmp_path / "both.html").read_text()
    assert page.count('aria-label="pass@k against k') == 1
    assert "pass@3 50.0%" in page  # t0 right in 2 of 3 repeats, t1 in none


def test_round_based_runs_show_per_round_agreement_and_majority_accuracy(tmp_path):
    run = make_run(tmp_path / "run")
    page = build_report([run], tmp_path / "report.html").read_text()
    assert page.count('aria-label="llm_debate, per round: agents agree and majority answer') == 1
    rounds = page.split("<h4>Rounds</h4>", 1)[1]
    # round 0: t0 splits (1 vs 2; the tie goes to the first, 1: right), t1 agrees on 1 (right,
    # though the sample ends wrong); round 1: both agree, t0 on 1 (right), t1 on 3 (wrong)
    assert tbody(rounds, "numbers") == [
        ["0", "2", "50.0% of 2", "100.0%"],
        ["1", "2", "100.0% of 2", "50.0%"],
    ]


def test_runs_without_answers_or_rounds_draw_no_convergence(tmp_path):
    bare = make_run(tmp_path / "bare", answers=False)
    one_round = make_run(tmp_path / "one", samples=[AGREE_LATE[:1]])
    page = build_report([bare, one_round], tmp_path / "report.html").read_text()
    assert "per round" not in page and "<h4>Rounds</h4>" not in page
    assert "votes" not in section(page, 0) and "answer 1" not in section(page, 0)


def test_each_transcript_shows_the_vote_tally_and_each_agents_answer(tmp_path):
    run = make_run(tmp_path / "run", samples=[[["1", "2"], ["I say 3", "no idea"]]])
    page = build_report([run], tmp_path / "report.html").read_text()
    assert "<dt>Votes</dt><dd>3 ×1; 1 agent gave none</dd>" in page
    assert "votes 3 ×1; 1 agent gave none</span>" in page  # in the sample's summary line
    whos = [text(who) for who in re.findall(r'<div class="who">.*?</div>', page)]
    assert whos == [
        "a round 0 · message · answer 1",
        "b round 0 · message · answer 2",
        "a round 1 · message · answer 3",
        "b round 1 · message · no answer",
    ]


def test_the_topology_is_drawn_once_per_run_not_in_every_task(tmp_path):
    run = make_run(tmp_path / "run", samples=[AGREE_LATE] * 5)
    page = build_report([run], tmp_path / "report.html").read_text()
    [drawing] = re.findall(r'<svg class="topology".*?</svg>', page)  # the plots are SVG too
    assert drawing.count("<circle") == 2
    assert page.index(drawing) < page.index("<details>")  # in the run's section, above its tasks


def test_a_run_on_several_topologies_draws_each_once_and_tasks_point_to_theirs(tmp_path):
    names = list(AGENTS)
    several = [Topology.complete(names), Topology.chain(names), Topology.complete(names)]
    run = make_run(tmp_path / "run", samples=[AGREE_LATE] * 3, topologies=several)
    page = build_report([run], tmp_path / "report.html").read_text()
    assert page.count('<svg class="topology"') == 2
    assert "topology 1 · 2 samples" in page and "topology 2 · 1 samples" in page
    links = re.findall(r'<a href="#run-0-topology-(\d)">', page)
    assert links == ["1", "2", "1"]


def test_samples_beyond_the_drawn_topologies_draw_their_own(tmp_path):
    chains = [Topology.chain([f"n{j}" for j in range(i + 1)]) for i in range(MAX_TOPOLOGIES + 2)]
    run = make_run(tmp_path / "run", samples=[AGREE_LATE] * len(chains), topologies=chains)
    page = build_report([run], tmp_path / "report.html").read_text()
    assert page.count("<figure") == MAX_TOPOLOGIES
    assert page.count('<svg class="topology"') == MAX_TOPOLOGIES + 2  # the last two, in tasks


def test_a_call_that_goes_on_from_its_agents_previous_call_shows_only_what_is_new():
    from maslab.report import _calls

    question = {"role": "user", "content": "Q?"}
    calls = [
        {"agent": "a", "messages": [question], "response": "R0"},
        {"agent": "b", "messages": [question], "response": "S0"},
        {
            "agent": "a",
            "response": "R1",
            "messages": [
                question,
                {"role": "assistant", "content": "R0"},
                {"role": "user", "content": "NEW"},
            ],
        },
        {"agent": "b", "messages": [{"role": "user", "content": "Q, again?"}], "response": "S1"},
    ]
    typed = [TraceCall.model_validate(call) for call in calls]
    first_a, first_b, second_a, second_b = _calls(typed).split("</details>")[:4]
    assert "Q?" in first_a and "Q?" in first_b
    assert "as the previous call of a and its reply (2 messages), then:" in second_a
    assert "Q?" not in second_a and "R0" not in second_a and "NEW" in second_a
    assert "previous call" not in second_b and "Q, again?" in second_b


def test_runs_that_differ_only_in_endpoint_are_labelled_by_it(tmp_path):
    def manifest(model: str, judge: str = "openai:gpt-4o") -> Manifest:
        return Manifest(
            method="vanilla", benchmark="arith", model=model, evaluator="numeric",
            model_roles={"judge": {"model": judge}},
        )  # fmt: skip

    a = manifest("openai:Qwen/Qwen2.5-7B@http://gpu-a:8000/v1")
    b = manifest("openai:Qwen/Qwen2.5-7B@http://gpu-b:8000/v1")
    c = manifest("openai:Qwen/Qwen2.5-7B@http://gpu-b:8000/v1", "openai:j@http://gpu-c:1/v1")
    dirs = [tmp_path / "run-a", tmp_path / "run-b", tmp_path / "run-c"]
    assert run_labels([a, b, c], dirs) == [
        "vanilla · Qwen2.5-7B (endpoint=gpu-a:8000, model_roles.judge.model=openai:gpt-4o, "
        "model_roles.judge.endpoint=unset)",
        "vanilla · Qwen2.5-7B (endpoint=gpu-b:8000, model_roles.judge.model=openai:gpt-4o, "
        "model_roles.judge.endpoint=unset)",
        "vanilla · Qwen2.5-7B (endpoint=gpu-b:8000, model_roles.judge.model=openai:j, "
        "model_roles.judge.endpoint=gpu-c:1)",
    ]
    assert run_labels([a, b], dirs[:2], model=False) == [
        "vanilla (endpoint=gpu-a:8000)",
        "vanilla (endpoint=gpu-b:8000)",
    ]
    assert run_labels([a, a], dirs[:2]) == ["vanilla (run-a)", "vanilla (run-b)"]  # the last resort


def charts(page: str) -> list[ET.Element]:
    """Each plot of ``page``, parsed: an inline SVG, well-formed XML."""
    return [ET.fromstring(svg) for svg in re.findall(r'<svg class="chart".*?</svg>', page, re.S)]


def of(element: ET.Element, kind: str) -> list[ET.Element]:
    """The elements of class ``kind`` in ``element``, in order."""
    return [e for e in element.iter() if e.get("class") == kind]


def value(label: str) -> float:
    """A tick label's number: ``1.5k`` is 1500."""
    scale = {"k": 1e3, "M": 1e6}.get(label[-1])
    return float(label[:-1]) * scale if scale else float(label)


def data(axes: ET.Element, kind: str, log: bool = False) -> Callable[[float], float]:
    """The data value at a pixel along the axes' x (``kind`` "xtick") or y ("ytick") axis, read
    back from where its first and last tick labels stand (in log space when ``log``)."""
    ticks = [
        (float(t.get("x" if kind == "xtick" else "y", "")), value(t.text or ""))
        for t in of(axes, kind)
    ]
    (p0, v0), (p1, v1) = ticks[0], ticks[-1]
    f = math.log10 if log else float
    u0, u1 = f(v0), f(v1)

    def at(pixel: float) -> float:
        u = u0 + (pixel - p0) / (p1 - p0) * (u1 - u0)
        return 10**u if log else u

    return at


def centre(mark: ET.Element) -> tuple[float, float]:
    """A marker's centre: a circle's, or the mean of a shape's corners."""
    if mark.tag == "circle":
        return float(mark.get("cx", "")), float(mark.get("cy", ""))
    corners = [
        tuple(map(float, c)) for c in re.findall(r"(-?[\d.]+),(-?[\d.]+)", mark.get("d", ""))
    ]
    return statistics.fmean(x for x, _ in corners), statistics.fmean(y for _, y in corners)


def runs_in(axes: ET.Element) -> dict[int, ET.Element]:
    """Each run's marks in the axes, by its number."""
    return {int(g.get("data-run", "")): g for g in of(axes, "run")}


def numbers_in(axes: ET.Element) -> dict[int, ET.Element]:
    """Each run's number in the axes, by its number."""
    return {int(t.get("data-run", "")): t for t in of(axes, "number")}


def drawn(page: str) -> list[list[dict[str, Any]]]:
    """Each plot of ``page``: per axes, its title, x label and its curves' x values (read back
    through its x ticks)."""
    plots = []
    for chart in charts(page):
        plot = []
        for axes in of(chart, "axes"):
            x = data(axes, "xtick")
            curves = [
                [round(x(float(point.split(",")[0]))) for point in line.get("points", "").split()]
                for line in axes.iter("polyline")
            ]
            [title], [xlabel] = of(axes, "title"), of(axes, "xlabel")
            plot.append({"title": title.text, "xlabel": xlabel.text, "xs": curves})
        plots.append(plot)
    return plots


def summary(outcomes: Sequence[Sequence[bool]], tokens: int) -> Summary:
    """A run's summary: per task, its repeats' outcomes; each sample used ``tokens``."""
    usage = {"calls": 1, "prompt_tokens": tokens, "completion_tokens": 0}

    def record(task: int, repeat: int, right: bool) -> ResultRecord:
        score = Score(value=float(right), correct=right, extracted="1")
        return ResultRecord(
            task_id=f"t{task}", repeat=repeat, status="ok", answer="1", gold="1", score=score,
            usage=usage,
        )  # fmt: skip

    return summarize(
        [
            record(t, r, right)
            for t, repeats in enumerate(outcomes)
            for r, right in enumerate(repeats)
        ]
    )


def test_each_method_plots_its_rounds_on_its_own_titled_axes(tmp_path):
    debate = make_run(tmp_path / "debate")
    # a moderator's rounds: 1 and 2, not the debate's 0 and 1
    moderated = make_run(tmp_path / "mad", "mad", {}, samples=[[[], *AGREE_LATE]])
    page = build_report([debate, moderated], tmp_path / "report.html").read_text()
    plots = drawn(page)
    rounds = sorted(
        [(ax["title"], ax["xs"]) for ax in plot] for plot in plots if "round" in plot[0]["xlabel"]
    )
    # one curve a run, the debate's run 1 and the moderator's run 2
    assert rounds == [
        [
            ("llm_debate: agents agree, per round", [[0, 1]]),
            ("llm_debate: majority answer correct, per round", [[0, 1]]),
        ],
        [
            ("mad: agents agree, per round", [[1, 2]]),
            ("mad: majority answer correct, per round", [[1, 2]]),
        ],
    ]
    assert all(plot[0]["title"] for plot in plots)  # the cost plot's too
    assert (
        page.count(", per round: agents agree and majority answer correct, ") == 4
    )  # label, title


def test_a_one_run_report_draws_no_empty_plot(tmp_path):
    # one agent a round: nobody to agree with, so no agreement axes; one run: no cost plot
    alone = make_run(tmp_path / "alone", "self_refine", {}, samples=[[["I say 2."], ["1."]]] * 2)
    page = build_report([alone], tmp_path / "report.html").read_text()
    plots = drawn(page)
    assert [[ax["title"] for ax in plot] for plot in plots] == [
        ["self_refine: majority answer correct, per round"]
    ]
    assert all(ax["xs"] for plot in plots for ax in plot)
    assert page.count('<svg class="chart"') == 1


def test_the_cost_plot_draws_each_run_at_its_tokens_and_accuracy_with_its_interval():
    runs = [
        (1, summary([[True]] * 3 + [[False]], 300)),
        (2, summary([[True], [False]] * 2, 900)),
        (3, summary([[False]] * 5 + [[True]], 1200)),
    ]
    plot = ET.fromstring(cost_accuracy(runs))
    label = "accuracy against tokens per sample, one numbered point per run"
    assert plot.get("role") == "img" and plot.get("aria-label") == label
    assert plot.findtext("title") == label
    [axes] = of(plot, "axes")
    texts = [of(axes, kind)[0].text for kind in ("title", "xlabel", "ylabel")]
    assert texts == [
        "Accuracy against tokens per sample",
        "tokens per sample (spent + cached)",
        "accuracy (%)",
    ]
    # under ten times apart: a linear axis, in compact labels
    assert [t.text for t in of(axes, "xtick")] == ["400", "600", "800", "1k", "1.2k"]
    assert [t.text for t in of(axes, "ytick")] == ["0", "20", "40", "60", "80", "100"]
    x, y = data(axes, "xtick"), data(axes, "ytick")
    drawn_runs, numbers = runs_in(axes), numbers_in(axes)
    assert sorted(drawn_runs) == sorted(numbers) == [1, 2, 3]
    for number, s in runs:
        run = drawn_runs[number]
        assert run.get("fill") == run.get("stroke") == colour(number)
        [mark], [interval] = of(run, "mark"), of(run, "interval")
        cx, cy = centre(mark)
        assert x(cx) == pytest.approx(s.mean_tokens, abs=0.5)
        assert y(cy) == pytest.approx(100 * s.accuracy, abs=0.05)
        bar = re.match(r"M(-?[\d.]+),(-?[\d.]+)V(-?[\d.]+)", interval.get("d", ""))
        assert bar and float(bar[1]) == pytest.approx(cx, abs=0.1)
        low, high = y(float(bar[2])), y(float(bar[3]))
        assert (low, high) == pytest.approx((100 * s.ci[0], 100 * s.ci[1]), abs=0.05)
        assert numbers[number].text == str(number)
        assert numbers[number].get("fill") == colour(number)


def test_tokens_over_ten_times_apart_go_on_a_log_axis_ticked_at_1_2_and_5():
    tokens = (200, 1500, 40_000)
    runs = [(n, summary([[True], [False]], t)) for n, t in enumerate(tokens, 1)]
    [axes] = of(ET.fromstring(cost_accuracy(runs)), "axes")
    ticks = of(axes, "xtick")
    assert [t.text for t in ticks] == ["200", "500", "1k", "2k", "5k", "10k", "20k", "50k"]
    x = data(axes, "xtick", log=True)
    for tick in ticks:  # every tick where a log scale puts it
        assert x(float(tick.get("x", ""))) == pytest.approx(value(tick.text or ""), rel=1e-3)
    drawn_runs = runs_in(axes)
    for number, t in enumerate(tokens, 1):
        [mark] = of(drawn_runs[number], "mark")
        assert x(centre(mark)[0]) == pytest.approx(t, rel=1e-3)


def test_the_numbers_of_crowded_points_never_overlap_and_runs_past_ten_change_marker():
    # sixteen runs within a few tokens and four accuracies of each other, and one far off
    runs = [
        (n, summary([[True]] * (8 + n % 4) + [[False]] * (12 - n % 4), 1000 + n % 3))
        for n in range(1, 17)
    ]
    runs.append((17, summary([[True], [False]], 5000)))
    [axes] = of(ET.fromstring(cost_accuracy(runs)), "axes")
    numbers = numbers_in(axes)
    assert sorted(numbers) == list(range(1, 18))

    def box(text: ET.Element) -> tuple[float, float, float, float]:
        # a bold digit is about 0.6 em wide, its height under 0.75 em
        size, x, y = (float(text.get(a, "")) for a in ("font-size", "x", "y"))
        half_w, half_h = 0.3 * size * len(text.text or ""), 0.375 * size
        return (x - half_w, y - half_h, x + half_w, y + half_h)

    boxes = [box(text) for text in numbers.values()]
    for a, b in itertools.combinations(boxes, 2):
        assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])
    marks = {number: of(run, "mark")[0] for number, run in runs_in(axes).items()}
    assert all(marks[n].tag == "circle" for n in range(1, 11))
    squares = [re.findall(r"[\d.]+,[\d.]+", marks[n].get("d", "")) for n in range(11, 18)]
    assert all(marks[n].tag == "path" for n in range(11, 18))
    assert all(len(corners) == 4 for corners in squares)
    assert len({run.get("fill") for run in runs_in(axes).values()}) == 10  # the palette


def test_pass_at_k_draws_a_numbered_curve_per_run_with_repeats_up_to_its_repeats():
    once = summary([[True], [False]], 100)
    thrice = summary([[True, False, False], [False, False, True], [False] * 3], 100)
    four = summary([[True] * 4, [False] * 4], 100)
    runs = [(1, once), (2, thrice), (3, four), (4, four)]
    plot = ET.fromstring(pass_at_k(runs))
    [axes] = of(plot, "axes")
    assert of(axes, "title")[0].text == "pass@k: a task solved in k samples"
    assert [t.text for t in of(axes, "xtick")] == ["1", "2", "3", "4"]
    x, y = data(axes, "xtick"), data(axes, "ytick")
    drawn_runs = runs_in(axes)
    assert sorted(drawn_runs) == [2, 3, 4]  # run 1 has no repeats
    for number, s in runs[1:]:
        assert drawn_runs[number].get("stroke") == colour(number)
        [line] = drawn_runs[number].iter("polyline")
        points = [tuple(map(float, p.split(","))) for p in line.get("points", "").split()]
        assert [round(x(px)) for px, _ in points] == list(range(1, s.repeats + 1))
        assert [y(py) for _, py in points] == pytest.approx(
            [100 * s.pass_at(k) for k in range(1, s.repeats + 1)], abs=0.05
        )
        assert len(of(drawn_runs[number], "mark")) == s.repeats
    # the numbers in a column right of the axes; 3 and 4 end at one point, so spaced apart
    numbers = numbers_in(axes)
    right = max(float(r.get("x", "")) + float(r.get("width", "")) for r in axes.iter("rect"))
    assert sorted(numbers) == [2, 3, 4]
    assert all(float(t.get("x", "")) > right for t in numbers.values())
    heights = [float(numbers[n].get("y", "")) for n in (3, 4)]
    assert abs(heights[0] - heights[1]) >= 15
    assert of(axes, "leader")  # a moved number's line to its curve's end


def test_a_name_from_the_data_is_escaped_and_a_plot_loads_nothing():
    rounds = {0: RoundFigures(2, 1, 2, 1), 1: RoundFigures(2, 2, 2, 2)}
    [svg] = convergence([(1, "<b>x</b>", rounds), (2, "<b>x</b>", rounds)])
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    plot = ET.fromstring(svg)  # the escaped text reads back as written
    about = "<b>x</b>, per round: agents agree and majority answer correct, one numbered curve"
    assert plot.get("aria-label") == plot.findtext("title") == f"{about} per run"
    assert [t.text for t in of(plot, "title")] == [
        "<b>x</b>: agents agree, per round",
        "<b>x</b>: majority answer correct, per round",
    ]
    assert {t.text for t in of(plot, "xlabel")} == {"round of <b>x</b>"}
    for text in (svg, cost_accuracy([(1, summary([[True]], 5)), (2, summary([[False]], 9))])):
        assert not re.search(r"<script|href|src=|url\(|https?:", text)


def test_nothing_to_draw_draws_nothing():
    one = summary([[True]], 100)
    assert cost_accuracy([(1, one)]) == "" and cost_accuracy([(1, one), (2, summarize([]))]) == ""
    assert pass_at_k([(1, one), (2, one)]) == ""
    assert convergence([(1, "llm_debate", {0: RoundFigures(2, 1, 2, 1)}), (2, "mad", {})]) == []


def test_stacked_labels_keep_apart_and_within_their_range():
    assert stack([5.0, 5.0, 50.0], 0.0, 100.0, 10.0) == [5.0, 15.0, 50.0]
    assert stack([99.0, 99.0], 0.0, 100.0, 10.0) == [90.0, 100.0]  # pushed down from the top
    assert stack([1.0, 2.0, 3.0], 0.0, 15.0, 10.0) == [0.0, 10.0, 20.0]  # no room: past the top


def trace_of(rounds: list[list[str]], kinds: Sequence[str] = ()) -> Trace:
    messages = [
        {"sender": agent, "content": reply, "round": r, "kind": "message"}
        for r, replies in enumerate(rounds)
        for agent, reply in zip(AGENTS, replies, strict=True)
    ]
    for message, kind in zip(reversed(messages), kinds, strict=False):
        message["kind"] = kind
    answers = [_key(m["content"]) for m in messages]
    return Trace.model_validate(
        {"task_id": "t", "repeat": 0, "messages": messages, "answers": answers}
    )


def test_a_tied_vote_says_how_it_was_broken():
    tied = trace_of([["It is 1.", "It is 2."]])

    def record(answer: str, extracted: str | None, **metadata: Any) -> ResultRecord:
        score = Score(value=0.0, correct=False, extracted=extracted)
        return ResultRecord(task_id="t", status="ok", answer=answer, score=score, metadata=metadata)

    assert describe_votes(record("It is 1.", "1", aggregate="majority"), tied) == (
        "1 ×1, 2 ×1; a tie, broken by the vote's rule, the earliest agent's answer: 1"
    )
    assert describe_votes(record("So 2.", "2", aggregate="llm"), tied) == (
        "1 ×1, 2 ×1; a tie, broken by the aggregator: 2"
    )
    assert (
        describe_votes(record("It is 2.", "2"), tied)
        == "1 ×1, 2 ×1; a tie, broken by the method: 2"
    )
    assert describe_votes(record("3", "3"), tied) == (
        "1 ×1, 2 ×1; a tie; the method's final answer, 3, is none of the tied ones"
    )
    assert (
        describe_votes(record("?", None), tied)
        == "1 ×1, 2 ×1; a tie; the method gave no final answer"
    )
    # no tie: the tally alone
    assert describe_votes(record("1", "1"), trace_of([["It is 1.", "1 too."]])) == "1 ×2"


def test_a_tie_in_a_transcript_is_explained_in_the_report(tmp_path):
    run = make_run(tmp_path / "run", samples=[[["It is 1.", "It is 2."], ["Still 1.", "Now 2."]]])
    page = build_report([run], tmp_path / "report.html").read_text()
    assert "<dt>Votes</dt><dd>1 ×1, 2 ×1; a tie, broken by the method: 2</dd>" in page
