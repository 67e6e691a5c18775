"""The ``teams-experts`` study (Pappu et al., arXiv 2602.01011): end to end on a scripted team
whose expert always knows the answer and whose other members defer to it only when told who it
is, over the three benchmarks' fixtures; and its figures (synergy and condition gaps with their
intervals) on outcomes made by hand."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import pytest

from maslab.bench.benchmark import get_benchmark
from maslab.cli import main
from maslab.llm import registry
from maslab.llm.registry import register_provider
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.self_org_team import reveal_note
from maslab.studies.base import get_study
from maslab.studies.catalogue.teams_experts import (
    ALONE,
    BENCHMARKS,
    BI,
    CELLS,
    ENM,
    EXPERT,
    NI,
    RE,
    TeamsExperts,
    findings,
    paper_sign,
)
from maslab.studies.running import study_sweep

FIXTURES = Path(__file__).parents[1] / "fixtures" / "benchmarks"
LIMIT = 2


def boxed_after(text: str, speaker: str) -> str | None:
    """The content of the first \\boxed{...} in ``speaker``'s last turn of a thread."""
    start = text.rfind(f"[{speaker}]:")
    at = text.find("\\boxed{", start) if start >= 0 else -1
    if at < 0:
        return None
    depth, i = 1, at + len("\\boxed{")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


class Team:
    """``team:expert`` always gives the gold answer; ``team:member`` says A, unless it is told
    who the expert is and is not the expert: then it repeats the expert's latest answer."""

    def __init__(self) -> None:
        self.golds: dict[str, str] = {}
        self.calls = 0
        for name in BENCHMARKS:
            for task in get_benchmark(name)().load(limit=LIMIT):
                assert task.gold is not None
                self.golds[task.question.strip()] = task.gold

    def gold(self, request: ChatRequest) -> str:
        text = last_user_message(request)
        (gold,) = [g for q, g in self.golds.items() if q in text]
        return gold

    def expert(self, request: ChatRequest) -> str:
        self.calls += 1
        return f"I am sure of it: \\boxed{{{self.gold(request)}}}"

    def member(self, request: ChatRequest) -> str:
        self.calls += 1
        system = request.messages[0]["content"] if request.messages[0]["role"] == "system" else ""
        if reveal_note(EXPERT) in system and not system.startswith(f"You are {EXPERT},"):
            said = boxed_after(last_user_message(request), EXPERT)
            assert said is not None  # the expert speaks first in every round
            return f"I follow {EXPERT}: \\boxed{{{said}}}"
        return "My answer: \\boxed{A}"

    def provider(self, name: str, settings: object) -> ScriptedModel:
        return ScriptedModel(self.expert if name == "expert" else self.member, name=f"team:{name}")


@pytest.fixture
def team(monkeypatch, tmp_path) -> Team:
    """The three benchmarks imported into a scratch cache from the fixtures, and ``team:``."""
    monkeypatch.setenv("MASLAB_CACHE_DIR", str(tmp_path / "cache"))
    for name in BENCHMARKS:
        assert main(["data", "import", name, str(FIXTURES / f"{name}.jsonl")]) == 0
    monkeypatch.setattr(registry, "_PROVIDERS", dict(registry._PROVIDERS))
    scripted = Team()
    register_provider("team")(scripted.provider)
    return scripted


def run_study(out: Path, *extra: str) -> int:
    return main(["study", "run", "teams-experts", "--model", "team:member", "--limit", str(LIMIT),
                 "--out", str(out), "--quiet", "--max-cells", "15", *extra])  # fmt: skip


def row(printed: str, label: str, benchmark: str) -> str:
    """The text of one cell of the printed report."""
    found = re.search(rf"^{re.escape(label)} +{benchmark} +(.+?)\s*$", printed, re.M)
    assert found, (label, benchmark)
    return found[1]


@pytest.mark.system  # MATH-500's evaluator checks in worker processes
def test_the_study_runs_on_a_team_with_a_known_expert(team, tmp_path, capsys):
    out = tmp_path / "study"
    assert run_study(out, "--model-role", f"{EXPERT}=team:expert") == 0
    printed = capsys.readouterr().out
    assert "study teams-experts: 15 of 15 runs finished" in printed
    assert team.calls == len(BENCHMARKS) * LIMIT * (3 * 20 + 2)
    assert f"the expert ({EXPERT}) ran on team:expert, the other members on team:member" in printed

    # MATH-500: the expert is always right, 'A' never: the unrevealed teams follow the majority
    assert row(printed, "Best Individual (the expert alone)", "math500").startswith("100.0 [")
    assert row(printed, "a member alone", "math500").startswith("0.0 [")
    assert row(printed, "Expert Not Mentioned", "math500").startswith("0.0 [")
    assert row(printed, "Reveal Expert", "math500").startswith("100.0 [")
    versus = "Expert Not Mentioned: team − best member (paper: < 0)"
    assert row(printed, versus, "math500") == "-100.0 [-100.0, -100.0] · sign holds"
    assert row(printed, "Reveal Expert: team − best member (paper: < 0)", "math500") == (
        "0.0 [0.0, 0.0] · not detected"
    )
    assert row(printed, "Reveal Expert: team − average member", "math500") == "75.0 [75.0, 75.0]"
    gaps = printed[printed.index("Relative synergy gap on team:member") :]
    assert row(gaps, "Expert Not Mentioned", "math500") == (
        "100.0 [100.0, 100.0] · paper 15.2 · higher"
    )
    assert row(gaps, "Reveal Expert", "math500") == "0.0 [0.0, 0.0]"
    assert row(gaps, "Expert Not Mentioned", "gpqa_diamond").endswith("]")  # no paper's value
    assert row(printed, "identification gap: Reveal Expert − Expert Not Mentioned", "math500") == (
        "100.0 [100.0, 100.0]"
    )
    leveraging = "leveraging gap: Best Individual − Reveal Expert (paper: > 0)"
    assert row(printed, leveraging, "math500") == "0.0 [0.0, 0.0] · not detected"
    more = "leveraging − identification gap (paper: > 0)"
    assert row(printed, more, "math500") == "-100.0 [-100.0, -100.0] · sign reversed"
    noise = "No Information − Expert Not Mentioned (same prompts: noise)"
    assert row(printed, noise, "math500") == "0.0 [0.0, 0.0]"

    # the choice benchmarks: the unrevealed team is right exactly where the gold is A
    for name in ("mmlu_pro", "gpqa_diamond"):
        share_a = sum(t.gold == "A" for t in get_benchmark(name)().load(limit=LIMIT)) / LIMIT
        assert row(printed, "No Information", name).startswith(f"{100 * share_a:.1f} [")
        gap = row(printed, "identification gap: Reveal Expert − Expert Not Mentioned", name)
        assert gap.startswith(f"{100 * (1 - share_a):.1f} [")

    page = (out / "study.html").read_text()
    assert "Multi-agent teams hold experts back" in page and "paper 15.2" in page
    assert "Finding the expert and following it on team:member" in page


@pytest.mark.system  # MATH-500's evaluator checks in worker processes
def test_without_an_expert_model_the_report_says_it_measures_teamwork(team, tmp_path, capsys):
    assert run_study(tmp_path / "alone", "--limit", "1") == 0
    printed = capsys.readouterr().out
    assert f"On team:member the expert ({EXPERT}) ran on team:member, as every member did" in (
        printed
    )
    assert "the gaps measure teamwork alone" in printed


def test_an_expert_role_the_method_lacks_is_refused_in_one_line(team, tmp_path, capsys):
    assert run_study(tmp_path / "wrong", "--model-role", "expert=team:expert") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no role or agent 'expert'" in err and EXPERT in err
    assert team.calls == 0


def test_the_grid_is_five_cells_on_three_benchmarks(tmp_path):
    from maslab.studies.base import StudyOptions

    options = StudyOptions(models=("scripted:echo",), model_roles=(f"{EXPERT}=scripted:echo",))
    cells = study_sweep(TeamsExperts(), options, tmp_path).cells()
    assert len(cells) == len(CELLS) * len(BENCHMARKS)
    configs = {c.label: c.config.method_config for c in cells}
    assert {k: (v["condition"], v["expert"]) for k, v in configs.items()} == {
        NI: (NI, EXPERT), ENM: (ENM, EXPERT), RE: (RE, EXPERT), BI: (BI, EXPERT),
        ALONE: (BI, "member_2"),
    }  # fmt: skip
    assert all(v["members"] == 4 and v["rounds"] == 4 for v in configs.values())
    assert all(c.config.model_roles == {EXPERT: {"model": "scripted:echo"}} for c in cells)
    # No Information has Expert Not Mentioned's prompts here: it draws with a seed of its own
    assert {c.label: c.config.seed for c in cells} == {c: int(c == NI) for c in CELLS}


def test_the_papers_figures_and_signs():
    figures = get_study("teams-experts").paper_figures()
    assert figures is not None
    assert figures.value("mmlu_pro", figure="relative_synergy_gap") == pytest.approx(0.081)
    assert figures.value("math500", figure="relative_synergy_gap") == pytest.approx(0.152)
    assert figures.value("gpqa_diamond", figure="relative_synergy_gap") is None
    assert paper_sign(figures, "team_minus_best_member") == -1
    assert paper_sign(figures, "leveraging_gap") == 1
    assert paper_sign(figures, "identification_gap") is None


# four tasks; per cell the correctness of each task's two repeats
BY_HAND = {
    NI: {"t1": [True, True], "t2": [False, False], "t3": [False, False], "t4": [True, False]},
    ENM: {"t1": [True, True], "t2": [True, False], "t3": [False, False], "t4": [False, False]},
    RE: {"t1": [True, True], "t2": [True, True], "t3": [False, True], "t4": [False, False]},
    BI: {"t1": [True, True], "t2": [True, True], "t3": [True, True], "t4": [False, True]},
    ALONE: {"t1": [True, False], "t2": [False, False], "t3": [False, False], "t4": [False, False]},
}


def test_the_figures_of_outcomes_made_by_hand():
    found = findings(BY_HAND)  # accuracies: NI 3/8, ENM 3/8, RE 5/8, BI 7/8, alone 1/8
    assert found.tasks == 4 and found.best_member == EXPERT
    assert found.synergy[ENM].average == Fraction(7 + 3 * 1, 32)
    expected = {
        "versus_best": {NI: -0.5, ENM: -0.5, RE: -0.25},
        "versus_average": {NI: 3 / 8 - 10 / 32, ENM: 3 / 8 - 10 / 32, RE: 5 / 8 - 10 / 32},
        "relative_gap": {NI: 4 / 7, ENM: 4 / 7, RE: 2 / 7},
    }
    for figure, by_team in expected.items():
        for team, value in by_team.items():
            estimate = getattr(found, figure)[team]
            assert estimate.value == pytest.approx(value), (figure, team)
            assert estimate.low <= estimate.value <= estimate.high, (figure, team)
            assert estimate.low < estimate.high and estimate.n == 4
    assert found.identification.value == pytest.approx(0.25)
    assert found.leveraging.value == pytest.approx(0.25)
    assert found.leveraging_over_identification.value == pytest.approx(0.0)
    assert found.noise.value == pytest.approx(0.0) and found.noise.low < 0 < found.noise.high
    # a task on which Reveal Expert loses to the expert alone by a whole point: the leveraging
    # gap's interval holds what task resampling can give, between 0 and 1/2
    assert 0 <= found.leveraging.low < found.leveraging.high <= 0.5


def test_a_team_that_beats_members_who_never_score_has_no_relative_gap():
    never = {t: [False] for t in ("t1", "t2")}
    outcomes = {NI: {"t1": [True], "t2": [False]}, ENM: never, RE: never, BI: never, ALONE: never}
    found = findings(outcomes)
    assert found.relative_gap[NI] is None
    assert found.versus_best[NI].value == pytest.approx(0.5)
    assert found.relative_gap[ENM] is not None and found.relative_gap[ENM].value == 0
    best = found.synergy[NI]
    assert (best.strong_synergy, best.weak_synergy) == (True, True)
