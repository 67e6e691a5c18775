"""The ``biased-swarm`` study: every topology and the single agent on both Discrim-Eval-Open
sets with a scripted model whose bias sharpens with the experts it reads (the Gini figures
checked against hand-computed ones), a second model whose replies are unreadable, the plan's
calls per task, and the estimates on known records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest

from maslab.bench.evaluation import Score
from maslab.cli import main
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import ChatRequest
from maslab.store.records import ResultRecord
from maslab.studies.base import StudyOptions, get_study
from maslab.studies.catalogue.biased_swarm import (
    BENCHMARKS,
    LABELS,
    BiasedSwarm,
    PositionGini,
    _amplification_table,
    _gini_table,
    gini_ratio,
    gini_rise,
    mean_gini,
    position_ginis,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "benchmarks" / "discrim_eval_open.json"
EXPERT = re.compile(r"^Expert \d+:", re.M)
# experts read -> probabilities (for n = 3 the Gini is max − min): 0.3, 0.6, 0.9, 1.0
SHARPER = {1: (0.2, 0.3, 0.5), 2: (0.1, 0.2, 0.7), 3: (0.0, 0.1, 0.9), 4: (0.0, 0.0, 1.0)}


class Sharpening:
    """Replies whose probabilities grow more uneven with the experts shown: alone, Gini 0.1 on
    the garden scenario (task 0) and 0.2 on the others; then 0.3, 0.6, 0.9 and 1.0 for 1, 2, 3
    and 4 or more experts."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: ChatRequest) -> str:
        self.calls += 1
        prompt = str(request.messages[-1]["content"])
        experts = len(EXPERT.findall(prompt))
        if experts:
            p = SHARPER[min(experts, 4)]
        else:
            p = (0.3, 0.3, 0.4) if "community garden" in prompt else (0.2, 0.4, 0.4)
        reply = {"ChoiceProbabilities": dict(zip("ABC", p, strict=True)), "Reason": "weighed"}
        return json.dumps(reply)


@pytest.fixture
def models(monkeypatch, tmp_path) -> dict[str, Sharpening]:
    """``bias:sharp`` (:class:`Sharpening`) and ``bias:mumble`` (never JSON), and both
    scenario sets imported into a scratch cache from the fixture."""
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in BENCHMARKS:
        assert main(["data", "import", name, str(FIXTURE)]) == 0
    sharp = Sharpening()
    scripts = {"sharp": sharp, "mumble": lambda request: "It is hard to say."}
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    register_provider("bias")(
        lambda name, settings: ScriptedModel(scripts[name], name=f"bias:{name}")
    )
    return {"sharp": sharp}


def study(out: Path, *extra: str) -> int:
    return main(["study", "run", "biased-swarm", "--limit", "2", "--out", str(out), "--quiet",
                 "--max-cells", "18", *extra])  # fmt: skip


def line(printed: str, label: str, column: str) -> str:
    """The report line of row ``label``, column ``column`` (the first such, in order)."""
    return next(x for x in printed.splitlines() if re.match(rf"{label} +{re.escape(column)} ", x))


def test_the_study_measures_amplification_by_topology(models, tmp_path, capsys):
    out = tmp_path / "study"
    assert study(out, "--model", "bias:sharp") == 0
    printed = capsys.readouterr().out
    assert "study biased-swarm: 18 of 18 runs finished" in printed
    calls_per_task = 1 + 4 * 4 + 7 + 6 + 6 + 24  # one per agent
    assert f"cost: 36 samples, {calls_per_task * 2 * len(BENCHMARKS)} calls" in printed
    assert models["sharp"].calls > 0  # fewer: the sets share their scenarios, the cache replays
    for benchmark in BENCHMARKS:
        for title in ("Gini by topology", "Bias amplification", "Relative Gini by agent "
                      "position", "Relative Gini across iterations"):  # fmt: skip
            assert f"{title} on {benchmark}, bias:sharp" in printed

    # the single agent: Gini 0.1 and 0.2 on the two tasks, the bootstrap over them
    assert line(printed, "single", "first agent").endswith("15.0 [10.0, 20.0]")
    # chain: agent k reads k − 1 experts, so 0.15, 0.3, 0.6, 0.9; its rise has the paper's sign
    assert line(printed, "chain", "final agent").endswith("90.0 [90.0, 90.0]")
    assert line(printed, "chain", "final − first").endswith("75.0 [70.0, 80.0] · sign holds")
    assert line(printed, "chain", "final − single agent").endswith("75.0 [70.0, 80.0]")
    # the paper's relative Gini (final ÷ first): 0.9 / 0.15 = 6, above its about 2 for chain
    assert line(printed, "chain", "relative Gini (final ÷ first)").endswith(
        "6 [4.5, 9] · paper 2 · higher"
    )
    assert line(printed, "chain_persona", "relative Gini").endswith("· paper 2 · higher")
    assert "paper" not in line(printed, "spindle", "relative Gini")  # the notes have none
    # the spindle's final summarizer reads four experts: Gini 1.0, 1.0 / 0.15 over the single
    assert line(printed, "spindle", "final ÷ single agent").endswith("6.67 [5, 10]")
    # by position, the ffn: Judge 0.15; Doctor, Engineer 0.3; Lawyer, Merchant 0.6; 0.9
    ffn = [line(printed, "ffn", str(k)).split()[2] for k in range(1, 8)]
    assert ffn == ["1", "2", "2", "4", "4", "6", "—"]
    # iterations 2 to 4: the Judge reads the last summarizer, so 0.3 (relative 2)
    assert line(printed, "iteration 1", "Judge").endswith(" 1 [1, 1]")
    assert line(printed, "iteration 4", "Judge").endswith(" 2 [1.5, 3]")
    assert line(printed, "iteration 4", "Summarizer").endswith(" 6 [4.5, 9]")
    assert "unreadable" not in printed  # every reply was read

    record = orjson.loads((out / "study.json").read_bytes())
    assert record["study"] == "biased-swarm" and record["limit"] == 2
    page = (out / "study.html").read_text()
    assert "Aligned agents, biased swarm" in page and "sign holds" in page
    assert "second-hand" in page and "paper 2" in page  # the figures and their caveat

    assert study(out, "--model", "bias:mumble") == 0  # a second model: tables of its own
    printed = capsys.readouterr().out
    mumbled = printed[printed.index("Gini by topology on discrim_eval_open, bias:mumble") :]
    # the default 0.33/0.33/0.34 everywhere: Gini 0.01 at every agent, no rise, ratio 1
    assert line(mumbled, "iteration", "final agent").endswith("1.0 [1.0, 1.0]")
    assert line(mumbled, "iteration", "final − first").endswith("0.0 [0.0, 0.0] · not detected")
    assert line(mumbled, "chain", "relative Gini").endswith("1 [1, 1] · paper 2 · lower")
    assert "chain on discrim_eval_open, bias:mumble: 8 of 8 agent replies unreadable" in printed
    assert "iteration on discrim_eval_open_explicit, bias:mumble: 48 of 48 agent" in printed
    assert main(["study", "report", str(out), "--against", "GPT-4o"]) == 2
    assert "the paper's models are GPT-4o-mini" in capsys.readouterr().err


def test_the_plan_counts_one_call_per_agent(models, capsys):
    assert main(["study", "plan", "biased-swarm", "--model", "bias:sharp", "--limit", "2"]) == 0
    printed = capsys.readouterr().out
    counts = {label: re.search(rf"^{label}\s+(\S+)\s+(\S+)", printed, re.M).groups()
              for label in LABELS}  # fmt: skip
    assert {label: float(n) for label, (n, _) in counts.items()} == {
        "single": 1, "chain": 4, "chain_plain": 4, "chain_persona": 4, "chain_function": 4,
        "spindle": 7, "parallel": 6, "ffn": 6, "iteration": 24,
    }  # fmt: skip
    assert {on for _, on in counts.values()} == {"discrim_eval_open"}
    assert "a task costs 60 calls across the methods" in printed
    assert models["sharp"].calls == 0  # the pilots ran on a scripted model of their own


# --- the estimates, on known records ---------------------------------------------------------


def scored(task: str, ginis: list[float], repeat: int = 0, unread: int = 0) -> ResultRecord:
    """A record whose agents measured ``ginis`` by position (the first ``unread`` unread)."""
    rows = [{"position": k, "gini": g, "parsed": k > unread} for k, g in enumerate(ginis, 1)]
    score = Score(value=ginis[-1], correct=False, extracted="A=1, B=0, C=0", measurement=True,
                  details={"positions": rows})  # fmt: skip
    return ResultRecord(task_id=task, repeat=repeat, status="ok", score=score)


def test_position_ginis_average_repeats_within_tasks_and_count_what_was_not_read():
    records = [
        scored("t1", [0.2, 0.4]), scored("t1", [0.4, 0.8], repeat=1, unread=1),
        scored("t2", [0.1, 0.5]), ResultRecord(task_id="t3", status="error"),
    ]  # fmt: skip
    measured = position_ginis(records)
    assert measured.final == 2
    assert measured.at(1) == pytest.approx({"t1": 0.3, "t2": 0.1})
    assert measured.at(2) == pytest.approx({"t1": 0.6, "t2": 0.5})
    assert (measured.replies, measured.unread, measured.unmeasured) == (6, 1, 1)
    assert all(not r.correct for r in records)  # no verdict to lean on: the Gini is measured


def test_the_estimates_are_paired_by_task():
    first = {"a": 0.1, "b": 0.3, "c": 0.2}
    final = {"a": 0.4, "b": 0.9, "c": 0.5, "d": 1.0}  # d has no first: left out of the pairs
    mean = mean_gini(first)
    assert mean is not None and mean.value == pytest.approx(0.2) and mean.n == 3
    assert 0.1 <= mean.low < 0.2 < mean.high <= 0.3
    rise = gini_rise(final, first)
    assert rise is not None and rise.value == pytest.approx(0.4) and rise.n == 3
    assert rise.low == pytest.approx(0.3) and rise.high == pytest.approx(0.6)  # 0.3, 0.6, 0.3
    ratio = gini_ratio(final, first)  # a ratio of means, as the paper's relative Gini
    assert ratio is not None and ratio.value == pytest.approx(1.8 / 0.6) and ratio.n == 3
    assert ratio.low <= ratio.value <= ratio.high
    assert gini_ratio(final, {"a": 0.0, "b": 0.0}) is None  # nothing to amplify: no ratio
    assert gini_ratio(final, {"x": 0.5}) is None and mean_gini({}) is None


def test_missing_runs_and_a_zero_gini_say_why_they_have_no_figure():
    figures = BiasedSwarm.paper_figures()
    assert figures is not None
    measured = {
        "chain": PositionGini({1: {"a": 0.0}, 2: {"a": 0.2}, 3: {"a": 0.4}, 4: {"a": 0.5}}),
        "ffn": PositionGini({}, unmeasured=2),
    }
    table = _amplification_table(measured, "here", figures, "GPT-4o-mini")
    rows = {row.label: row.cells for row in table.rows}
    chain, single = rows["chain"]
    assert chain.ours is None and chain.note == "no ratio: the first agent's Gini is 0"
    assert chain.paper == 2.0 and chain.verdict is None and single.note == "single: not run"
    assert [c.note for c in rows["ffn"]] == ["nothing measured"] * 2
    assert [c.note for c in rows["spindle"]] == ["not run"] * 2
    rows = {row.label: row.cells for row in _gini_table(measured, "here").rows}
    first, final, rise, over_single = rows["chain"]
    assert first.ours is not None and first.ours.value == 0.0
    assert final.ours is not None and final.ours.value == pytest.approx(0.5)
    assert rise.ours is not None and rise.ours.value == pytest.approx(0.5)
    assert rise.verdict == "sign holds" and over_single.note == "single: not run"


def test_the_study_reads_the_papers_figure_and_names_its_grid():
    study = get_study("biased-swarm")
    assert study is BiasedSwarm
    figures = study.paper_figures()
    assert figures is not None and figures.models() == ["GPT-4o-mini"]
    assert figures.value("relative_gini", model="GPT-4o-mini", topology="chain") == 2.0
    assert figures.value("relative_gini", model="GPT-4o-mini", topology="ffn") is None
    sweep = study().sweep(StudyOptions(models=("bias:sharp",), limit=3), Path("out"))
    assert [m["label"] for m in sweep["methods"]] == list(LABELS)
    assert sweep["benchmarks"] == list(BENCHMARKS) and sweep["limit"] == 3
