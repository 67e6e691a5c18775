"""MedAgents (arXiv 2311.10537) with scripted models: the call formula, who sees what in each
of the five steps, garbage replies, budget stops, completion order, model roles and the
command line on a medical benchmark."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from helpers import TASK, TwoModels, agent_of, method_runner, prompts_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.medagents import (
    Agreement,
    Domains,
    MedAgents,
    Vote,
    advice_prompt,
    decision_prompt,
    expert_system,
    option_analysis_prompt,
    option_domains_prompt,
    question_analysis_prompt,
    question_domains_prompt,
    report_prompt,
    revision_prompt,
    vote_prompt,
)

CHOICE = Task(
    id="m1",
    question="Which vitamin deficiency causes scurvy?",
    choices=("Vitamin A", "Vitamin C", "Vitamin D", "Vitamin K"),
    gold="B",
    answer_type="choice",
    instruction="End with \\boxed{X}, X the letter of your choice.",
)
VERSION = re.compile(r"REPORT-(\d+)")
DOMAIN = re.compile(r"You are an expert in (.+?), a subfield")

Disagree = Callable[[str, int], bool]


def never(agent: str, version: int) -> bool:
    return False


def index_of(agent: str) -> int:
    return int(agent.rsplit("_", 1)[1])


def version_in(prompt: str) -> int:
    """The report version a vote, an advice or a revision prompt shows (the latest named)."""
    return int(VERSION.findall(prompt)[-1])


def script(
    disagree: Disagree = never,
    report_answer: Callable[[int], str] = lambda version: "",
    analysis_answer: Callable[[str], str] = lambda agent: "",
) -> Callable[[ChatRequest], str]:
    """Classifiers name QD1.. and OD1..; expert a's analysis is 'AN-a (<domain>)'; report
    version v is 'REPORT-v'; expert a votes no on version v when ``disagree(a, v)``, advising
    'ADVICE-a-v'; the decider answers B."""

    def respond(request: ChatRequest) -> str:
        agent, prompt = agent_of(request), last_user_message(request)
        if agent == "question_classifier":
            return json.dumps({"domains": [f"QD{i}" for i in range(1, 10)]})
        if agent == "option_classifier":
            return json.dumps({"domains": [f"OD{j}" for j in range(1, 10)]})
        if agent == "synthesizer":
            version = version_in(prompt) + 1 if "Revise the report" in prompt else 0
            return f"REPORT-{version} key knowledge and total analysis. {report_answer(version)}"
        if agent == "decider":
            return "From the report: \\boxed{B}"
        if "decide whether it agrees" in prompt:
            version = version_in(prompt)
            no = disagree(agent, version)
            if "advice" not in prompt.rsplit("Reply with a JSON object only", 1)[1]:
                return json.dumps({"agree": not no})  # advice=separate: the vote alone
            return json.dumps({"agree": not no, "advice": f"ADVICE-{agent}-{version}" * no})
        if "you disagree with this report" in prompt:
            return f"ADVICE-{agent}-{version_in(prompt)}"
        domain = DOMAIN.findall(request.messages[0]["content"])[0]
        return f"AN-{agent} ({domain}) {analysis_answer(agent)}"

    return respond


def expected_calls(n: int, m: int, nos: list[int], advice: str = "joint") -> int:
    """The formula: ``nos`` holds the no votes of each round run."""
    rounds = sum(n + m + (k > 0) + (k if advice == "separate" else 0) for k in nos)
    return (2 if m else 1) + n + m + 1 + rounds + 1


run = method_runner(MedAgents, CHOICE)


def test_defaults_names_and_validation():
    method = MedAgents()
    assert get_method("medagents") is MedAgents
    cfg = method.config
    assert (cfg.question_experts, cfg.option_experts, cfg.max_rounds) == (5, 2, 3)
    assert (cfg.advice, cfg.discipline, cfg.temperature) == ("joint", "medicine", 0.0)
    assert MedAgents(question_experts=2, option_experts=1).agent_names() == (
        "question_classifier", "option_classifier", "question_expert_1", "question_expert_2",
        "option_expert_1", "synthesizer", "decider",
    )  # fmt: skip
    assert "option_classifier" not in MedAgents(option_experts=0).agent_names()
    assert MedAgents().structure() is None  # free-form questions have no option experts
    for bad in ({"question_experts": 0}, {"option_experts": -1}, {"max_rounds": 0},
                {"advice": "never"}, {"discipline": ""}, {"temperature": 3}):  # fmt: skip
        with pytest.raises(ConfigError):
            MedAgents(**bad)


@pytest.mark.parametrize(
    ("config", "task", "disagree", "nos"),
    [
        ({}, CHOICE, never, [0]),  # the paper's defaults, unanimous at once: 18
        ({}, CHOICE, lambda a, v: v == 0 and a == "option_expert_2", [1, 0]),  # 26
        ({}, CHOICE, lambda a, v: a == "question_expert_3", [1, 1, 1]),  # never unanimous: 35
        ({"question_experts": 2, "option_experts": 1, "max_rounds": 2}, CHOICE,
         lambda a, v: True, [3, 3]),
        ({"question_experts": 3, "max_rounds": 2}, TASK,  # free-form: M = 0, one domain call
         lambda a, v: v == 0 and index_of(a) < 3, [2, 0]),
        ({"question_experts": 3, "option_experts": 0}, CHOICE, never, [0]),
        ({"question_experts": 3, "option_experts": 1, "advice": "separate"}, CHOICE,
         lambda a, v: (v == 0 and a != "question_expert_1") or (v == 1 and a.startswith("o")),
         [3, 1, 0]),
        ({"question_experts": 1, "option_experts": 1, "max_rounds": 4, "advice": "separate"},
         CHOICE, lambda a, v: v < 4, [2, 2, 2, 2]),
    ],
)  # fmt: skip
async def test_the_calls_follow_the_formula(config, task, disagree, nos):
    model = ScriptedModel(script(disagree))
    solution, ctx = await run(model, task=task, **config)
    cfg = MedAgents(**config).config
    n, m = cfg.question_experts, cfg.option_experts if task.choices else 0
    advice = config.get("advice", "joint")
    assert len(model.calls) == ctx.usage.calls == expected_calls(n, m, nos, advice)
    assert [row.count(False) for row in solution.metadata["votes"]] == nos
    assert solution.metadata["rounds"] == len(nos)
    assert solution.metadata["consensus"] == (nos[-1] == 0)
    assert len(solution.metadata["reports"]) == 1 + sum(k > 0 for k in nos)
    by_agent = {r.agent for r in ctx.ledger.records}
    assert ("option_classifier" in by_agent) == (m > 0)
    assert len(prompts_of(ctx, "synthesizer")) == len(solution.metadata["reports"])
    assert len(prompts_of(ctx, "decider")) == 1 and solution.answer.endswith("\\boxed{B}")


async def test_the_paper_defaults_cost_18_to_35_calls():
    low, high = ScriptedModel(script()), ScriptedModel(script(lambda a, v: True))
    await run(low)
    await run(high)
    assert (len(low.calls), len(high.calls)) == (18, 35)


async def test_who_sees_what_in_each_step():
    def disagree(agent: str, version: int) -> bool:
        return version == 0 and agent in {"question_expert_2", "option_expert_1"}

    model = ScriptedModel(script(disagree))
    solution, ctx = await run(model, question_experts=3, option_experts=2)
    qd, od = ["QD1", "QD2", "QD3"], ["OD1", "OD2"]  # the classifiers' lists, cut to N and M
    assert solution.metadata["question_domains"] == qd
    assert solution.metadata["option_domains"] == od
    domains = qd + od
    records = {r.agent: [] for r in ctx.ledger.records}
    for record in ctx.ledger.records:
        records[record.agent].append(record)

    # 1. expert gathering: the question alone; the question and its options
    (qc,) = records["question_classifier"]
    assert qc.messages[-1]["content"] == (
        f"{question_domains_prompt(CHOICE, 3, 'medicine')}\n\n{Domains.instructions()}"
    )
    assert "Vitamin C" not in qc.messages[-1]["content"]
    (oc,) = records["option_classifier"]
    assert oc.messages[-1]["content"].startswith(option_domains_prompt(CHOICE, 2, "medicine"))
    assert "(B) Vitamin C" in oc.messages[-1]["content"]

    # 2. analyses: question experts see the question only, option experts their analyses too
    analyses = [
        (d, f"AN-{name} ({d}) ")
        for d, name in zip(domains, [*(f"question_expert_{i}" for i in (1, 2, 3)),
                                      "option_expert_1", "option_expert_2"], strict=True)
    ]  # fmt: skip
    for i, domain in enumerate(qd, 1):
        first = records[f"question_expert_{i}"][0]
        assert first.round == 1 and list(first.messages) == [
            {"role": "system", "content": expert_system(domain, "medicine")},
            {"role": "user", "content": question_analysis_prompt(CHOICE, domain)},
        ]
    for j, domain in enumerate(od, 1):
        first = records[f"option_expert_{j}"][0]
        prompt = option_analysis_prompt(CHOICE, domain, analyses[:3])
        assert first.round == 2 and first.messages[-1]["content"] == prompt
        assert first.messages[0]["content"] == expert_system(domain, "medicine")
        shown = first.messages[-1]["content"]
        assert [shown.index(f"AN-question_expert_{i}") for i in (1, 2, 3)] == sorted(
            shown.index(f"AN-question_expert_{i}") for i in (1, 2, 3)
        )
        assert "AN-option_expert" not in shown

    # 3. the report reads every analysis, in expert order
    report, revision = records["synthesizer"]
    assert len(report.messages) == 1  # a fresh conversation each time
    assert report.messages[0]["content"] == report_prompt(CHOICE, analyses)

    # 4. every expert votes on the current report; the revision reads the noes' advice only
    for k, name in enumerate(
        ["question_expert_1", "question_expert_2", "question_expert_3", "option_expert_1",
         "option_expert_2"]
    ):  # fmt: skip
        votes = records[name][1:]
        assert [v.round for v in votes] == [4, 5]
        for version, v in enumerate(votes):
            shown = f"REPORT-{version} key knowledge and total analysis. "
            assert v.messages[-1]["content"] == (
                f"{vote_prompt(CHOICE, shown, domains[k])}\n\n{Vote.instructions()}"
            )
            assert "ADVICE" not in v.messages[-1]["content"]  # no other expert's vote
    advice = [
        ("QD2", "ADVICE-question_expert_2-0"),
        ("OD1", "ADVICE-option_expert_1-0"),
    ]
    assert revision.round == 4 and len(revision.messages) == 1
    assert revision.messages[0]["content"] == revision_prompt(
        CHOICE, "REPORT-0 key knowledge and total analysis. ", advice
    )
    assert solution.metadata["votes"] == [
        [True, False, True, False, True],
        [True, True, True, True, True],
    ]

    # 5. the decider reads the final report
    (decider,) = records["decider"]
    final = "REPORT-1 key knowledge and total analysis. "
    assert list(decider.messages) == [{"role": "user", "content": decision_prompt(CHOICE, final)}]
    assert solution.metadata["reports"][-1] == final and decider.round == 6


async def test_separate_advice_asks_each_no_voter_in_a_second_call():
    model = ScriptedModel(script(lambda a, v: v == 0 and a == "option_expert_1"))
    solution, ctx = await run(model, question_experts=2, option_experts=1, advice="separate")
    records = [r for r in ctx.ledger.records if r.agent == "option_expert_1"]
    vote, advice = records[1:3]
    report = "REPORT-0 key knowledge and total analysis. "
    assert vote.messages[-1]["content"] == (
        f"{vote_prompt(CHOICE, report, 'OD1')}\n\n{Agreement.instructions()}"
    )
    assert advice.messages[-1]["content"] == advice_prompt(CHOICE, report, "OD1")
    assert len(advice.messages) == 2  # system + prompt: not the vote's conversation
    (revision, *_) = prompts_of(ctx, "synthesizer")[1:]
    assert revision == revision_prompt(CHOICE, report, [("OD1", "ADVICE-option_expert_1-0")])
    others = [r for r in ctx.ledger.records if r.agent.startswith("question_expert")]
    assert len(others) == 2 * 3  # analysis and two votes each, no advice call
    assert solution.metadata["votes"] == [[True, True, False], [True, True, True]]


async def test_a_free_form_question_has_no_option_experts():
    model = ScriptedModel(script())
    solution, ctx = await run(model, task=TASK, question_experts=2)
    assert {r.agent for r in ctx.ledger.records} == {
        "question_classifier", "question_expert_1", "question_expert_2", "synthesizer",
        "decider",
    }  # fmt: skip
    assert solution.metadata["option_domains"] == []
    assert ctx.topology is not None and "option_classifier" not in ctx.topology
    decider = prompts_of(ctx, "decider")[0]
    assert "An option" not in decider and decider.endswith("Using the report, answer the question.")


async def test_the_topology_links_the_steps():
    _, ctx = await run(ScriptedModel(script()), question_experts=2, option_experts=1)
    edges = set(ctx.topology.edges)
    assert ("question_classifier", "question_expert_2") in edges
    assert ("option_classifier", "option_expert_1") in edges
    assert ("question_expert_1", "option_expert_1") in edges
    assert {("option_expert_1", "synthesizer"), ("synthesizer", "option_expert_1")} <= edges
    assert ("synthesizer", "decider") in edges
    assert ("option_classifier", "question_expert_1") not in edges


@pytest.mark.parametrize("garbage", ["", "no JSON here {", '{"domains": 7, "agree": "perhaps"'])
async def test_garbage_replies_take_the_documented_fallbacks(garbage):
    def respond(request: ChatRequest) -> str:
        agent, prompt = agent_of(request), last_user_message(request)
        if "classifier" in agent or "decide whether it agrees" in prompt:
            return garbage
        return script()(request)

    model = ScriptedModel(respond)
    solution, ctx = await run(model)
    meta = solution.metadata
    assert meta["question_domains"] == ["general medicine"] * 5
    assert meta["option_domains"] == ["general medicine"] * 2
    assert meta["domain_fallbacks"] == 7
    assert meta["votes"] == [[None] * 7] and meta["unreadable_votes"] == 7  # agreement
    assert meta["consensus"] is True and len(model.calls) == 18
    assert expert_system("general medicine", "medicine") in {
        r.messages[0]["content"] for r in ctx.ledger.records if r.agent == "question_expert_1"
    }


async def test_short_lists_are_filled_and_an_unreadable_separate_vote_asks_no_advice():
    def respond(request: ChatRequest) -> str:
        agent, prompt = agent_of(request), last_user_message(request)
        if agent == "question_classifier":
            return json.dumps({"domains": "Cardiology | Nephrology"})  # one string, two names
        if agent == "option_classifier":
            return json.dumps({"domains": []})
        if "decide whether it agrees" in prompt:
            return "I am not sure."
        return script()(request)

    model = ScriptedModel(respond)
    solution, _ = await run(model, question_experts=3, discipline="physiology", advice="separate")
    meta = solution.metadata
    assert meta["question_domains"] == ["Cardiology", "Nephrology", "general physiology"]
    assert meta["option_domains"] == ["general physiology"] * 2
    assert meta["domain_fallbacks"] == 3 and meta["votes"] == [[None] * 5]
    assert len(model.calls) == expected_calls(3, 2, [0], "separate")


async def test_an_empty_decision_is_returned_as_it_is():
    def respond(request: ChatRequest) -> str:
        return "" if agent_of(request) == "decider" else script()(request)

    solution, _ = await run(ScriptedModel(respond), question_experts=1, option_experts=1)
    assert solution.answer == "" and solution.metadata["consensus"] is True


def analysis_answers(agent: str) -> str:
    return {"question_expert_1": "\\boxed{A}", "option_expert_1": "\\boxed{C}",
            "option_expert_2": "\\boxed{C}"}.get(agent, "")  # fmt: skip


@pytest.mark.parametrize(
    ("max_calls", "expected"),
    [
        (2 + 3, ""),  # the analyses are not all in: nothing proposed
        (2 + 5, "AN-option_expert_1 (OD1) \\boxed{C}"),  # the analyses' majority (C, C, A)
        (2 + 5 + 1, "AN-option_expert_1 (OD1) \\boxed{C}"),  # report 0 states no answer
        (2 + 5 + 1 + 5 + 1, "REPORT-1 key knowledge and total analysis. \\boxed{D}"),
        (2 + 5 + 1 + 5 + 1 + 5, "REPORT-1 key knowledge and total analysis. \\boxed{D}"),
    ],
)
async def test_a_budget_stop_returns_the_best_answer_so_far(max_calls, expected):
    model = ScriptedModel(
        script(
            lambda a, v: v == 0 and a == "question_expert_1",
            report_answer=lambda v: "\\boxed{D}" if v else "",
            analysis_answer=analysis_answers,
        )
    )
    ctx = Context(model, budget=Budget(max_calls=max_calls))
    method = MedAgents(question_experts=3, option_experts=2)
    solution = await method.run_sample(CHOICE, ctx)
    assert ctx.budget_stop is not None and "budget" in solution.metadata
    assert ctx.usage.calls == max_calls
    assert solution.answer == expected


async def test_without_a_budget_stop_the_decider_answers():
    model = ScriptedModel(script(analysis_answer=analysis_answers))
    solution = await MedAgents(question_experts=3).run_sample(CHOICE, Context(model))
    assert solution.answer == "From the report: \\boxed{B}" and "budget" not in solution.metadata


async def test_prompts_and_answer_do_not_depend_on_completion_order():
    def disagree(agent: str, version: int) -> bool:
        return version < 2 and index_of(agent) != 2

    def latency(reverse: bool) -> Callable[[ChatRequest], float]:
        """Numbered experts finish in (reverse) index order; the rest at once."""

        def delay(request: ChatRequest) -> float:
            agent = agent_of(request)
            k = index_of(agent) if agent[-1].isdigit() else 0
            return 0.003 * ((6 - k) if reverse else k)

        return delay

    seen = []
    for reverse in (True, False):
        model = ScriptedModel(script(disagree, analysis_answer=analysis_answers),
                              latency=latency(reverse))  # fmt: skip
        solution, ctx = await run(model, question_experts=4, option_experts=2)
        finished = [agent_of(c.request) for c in sorted(model.calls, key=lambda c: c.finished)]
        seen.append(
            (
                solution.answer,
                solution.metadata,
                [(r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records
                 if r.agent == "synthesizer"],
                sorted((r.agent, r.round, repr(r.messages)) for r in ctx.ledger.records),
                finished,
            )
        )  # fmt: skip
    assert seen[0][:4] == seen[1][:4]
    assert seen[0][4] != seen[1][4]  # the calls did finish in another order
    assert seen[0][1]["rounds"] == 3


@pytest.mark.parametrize("native", [True, False])
async def test_domains_and_votes_are_asked_natively_where_supported(native):
    model = ScriptedModel(script(), native=["structured_output"] if native else [])
    await run(model, question_experts=1, option_experts=1)
    schemas = []
    for request in model.requests:
        fmt = request.response_format
        schemas.append(None if fmt is None else fmt["json_schema"]["schema"])
    expected = [Domains.json_schema()] * 2 + [Vote.json_schema()] * 2 if native else []
    assert [s for s in schemas if s is not None] == expected


@pytest.mark.parametrize(
    ("roles", "on_b"),
    [
        ({"synthesizer": "scripted:b"}, {"synthesizer"}),
        ({"option_expert": "scripted:b"}, {"option_expert_1", "option_expert_2"}),
        ({"question_expert_2": "scripted:b", "classifier": "scripted:b"},
         {"question_expert_2", "question_classifier", "option_classifier"}),
        ({"decider": "scripted:b", "option_classifier": "scripted:b"},
         {"decider", "option_classifier"}),
    ],
)  # fmt: skip
async def test_model_roles_route_each_role_to_another_model(roles, on_b):
    method = get_method("medagents")(question_experts=3, option_experts=2)
    ctx = Context(
        "scripted:a",
        models=TwoModels(lambda: script()),
        model_roles=method.check_model_roles(roles),
    )
    await method.solve(CHOICE, ctx)
    assert len(ctx.ledger.records) == expected_calls(3, 2, [0])
    for record in ctx.ledger.records:
        assert record.model == ("scripted:b" if record.agent in on_b else "scripted:a")


def test_role_names_are_checked():
    method = MedAgents(question_experts=2, option_experts=1)
    method.check_model_roles(
        {"question_expert_2": "scripted:echo", "option_expert": "scripted:echo"}
    )
    with pytest.raises(ConfigError, match="no role or agent 'option_expert_2'"):
        method.check_model_roles({"option_expert_2": "scripted:echo"})


async def test_the_temperature_is_zero_unless_set_otherwise():
    model = ScriptedModel(script())
    await run(model, Context(model, sampling={"temperature": 0.7}), question_experts=1)
    assert {r.temperature for r in model.requests} == {0.0}
    model = ScriptedModel(script())
    await run(model, Context(model, sampling={"temperature": 0.7}), temperature=None)
    assert {r.temperature for r in model.requests} == {0.7}


MEDQA_ROWS = [
    {
        "question": "A 30-year-old sailor has bleeding gums and poor wound healing. Which "
        "deficiency is most likely?",
        "options": {"A": "Vitamin A", "B": "Vitamin C", "C": "Vitamin D", "D": "Vitamin K"},
        "answer_idx": "B",
        "meta_info": "step1",
    },
    {
        "question": "Which drug is first-line for an uncomplicated cystitis in a healthy woman?",
        "options": {"A": "Nitrofurantoin", "B": "Vancomycin", "C": "Amphotericin B",
                    "D": "Imipenem"},
        "answer_idx": "A",
        "meta_info": "step2&3",
    },
]  # fmt: skip


def test_the_command_line_runs_medagents_on_medqa(tmp_path):
    data = tmp_path / "medqa.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in MEDQA_ROWS))
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "medagents", "--benchmark", "medqa", "--data", str(data),
         "--model", "scripted:echo", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 2 and all(r["usage"]["calls"] == 18 for r in results)

    # a scripted answers file: every expert disagrees, the decider always picks B
    answers = tmp_path / "answers.yaml"
    answers.write_text(
        '\'subfields of medicine\': \'{"domains": ["Nutrition", "Hematology", "Dentistry",'
        ' "Dermatology", "Pharmacology"]}\'\n'
        '\'decide whether it agrees\': \'{"agree": false, "advice": "be more precise"}\'\n'
        "'Using the report, answer': 'The answer is \\boxed{B}'\n"
        "'.': 'an analysis'\n"
    )
    out = tmp_path / "scripted"
    code = main(
        ["run", "--method", "medagents", "--benchmark", "medqa", "--data", str(data),
         "--model", f"scripted:{answers}", "--config", "max_rounds=2", "--limit", "1",
         "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    (result,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert result["usage"]["calls"] == expected_calls(5, 2, [7, 7])
    trace = json.loads((out / "traces.jsonl").read_text().splitlines()[0])
    assert [c["agent"] for c in trace["calls"]].count("synthesizer") == 3
    recorded = json.loads((out / "manifest.json").read_text())["method_config"]
    assert recorded["max_rounds"] == 2 and recorded["question_experts"] == 5
