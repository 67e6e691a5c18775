"""MAS-Zero (arXiv 2505.14996) with scripted models: the call formula over scripted designs,
who sees what (sub-tasks, debaters, the evaluator, the designer, the verifier), garbage
designs and replies, budget stops, completion order, model roles and the command line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from helpers import TASK, TwoModels, agent_of, method_runner, prompts_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.errors import ConfigError
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.mas_zero import (
    SUBTASK_FORMAT,
    TOO_HARD,
    Critique,
    Design,
    Feedback,
    MasZero,
    Selection,
)

run = method_runner(MasZero, TASK)
SEED_ORDER = ("seed_cot_", "seed_cot_sc_", "seed_debate_", "seed_self_refine_")


def sub(instruction: str, block: str, n: Any = 0, rounds: Any = 0) -> dict[str, Any]:
    return {"instruction": instruction, "block": block, "n": n, "rounds": rounds}


def design(*subtasks: dict[str, Any]) -> str:
    return json.dumps({"thought": "PLAN", "subtasks": list(subtasks)})


def review(j: int, stop: bool) -> str:
    return json.dumps({"feedback": f"CRITIQUE-{j}", "stop": stop})


def script(
    designs: list[str] | None = None,
    answers: Mapping[str, object] | None = None,
    stop_at: Mapping[str, int] | None = None,
    feedback: Callable[[int], str] | None = None,
    choice: object = 1,
) -> Callable[[ChatRequest], str]:
    """Design t is ``designs[t-1]`` (the last one again when there are fewer; default one cot
    sub-task); a block agent says '<agent>: The answer is N' (N by the first key of
    ``answers`` its name starts with, else 42), a refiner '<agent> vK: ...' after K attempts;
    the self-refine critic of a prefix in ``stop_at`` says stop at that review; the evaluator
    writes REVISE-t; the verifier picks ``choice``."""
    designs = designs or [design(sub("Solve it.", "cot"))]
    answers = answers or {}
    stop_at = stop_at or {}

    def respond(request: ChatRequest) -> str:
        agent = agent_of(request)
        prompt = last_user_message(request)
        if agent == "designer":
            t = len(request.messages) // 2  # system, then a user turn and a reply per design
            return designs[min(t, len(designs)) - 1]
        if agent == "evaluator":
            t = len(re.findall(r"^- design \d+:", prompt, re.M))
            if feedback is not None:
                return feedback(t)
            return json.dumps({"solvability": "S", "completeness": "C", "revision": f"REVISE-{t}"})
        if agent == "verifier":
            return json.dumps({"reasoning": "COMPARED", "choice": choice})
        if agent.endswith("_critic"):
            shown = re.search(r"Proposed answer:\n\S+ v(\d+):", prompt)
            j = 1 + (int(shown[1]) if shown else 0)
            prefix = agent.removesuffix("critic")
            return review(j, stop_at.get(prefix) == j)
        n = next((v for k, v in answers.items() if agent.startswith(k)), 42)
        if agent.endswith("_refiner"):
            return f"{agent} v{prompt.count('--- Attempt ')}: The answer is {n}."
        return f"{agent}: The answer is {n}."

    return respond


def calls_by_agent(ctx: Context) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in ctx.ledger.records:
        counts[record.agent] = counts.get(record.agent, 0) + 1
    return counts


# --- configuration ---------------------------------------------------------------------------


def test_defaults_and_names():
    method = MasZero()
    assert get_method("mas_zero") is MasZero
    cfg = method.config
    assert (cfg.iterations, cfg.seeds, cfg.samples, cfg.debaters, cfg.rounds) == (
        5,
        ("cot", "cot_sc", "debate", "self_refine"),
        5,
        2,
        5,
    )
    assert (cfg.max_subtasks, cfg.max_agents, cfg.max_rounds, cfg.select) == (5, 5, 5, "verify")
    assert method.agent_names() == ("designer", "evaluator")
    assert method.roles == ("meta", "node", "verifier")
    assert method.structure() is None  # the topology depends on the designs
    for bad in (
        {"iterations": 0},
        {"seeds": ["cot", "cot"]},
        {"seeds": ["tree_of_thought"]},
        {"max_agents": 0},
        {"select": "best"},
    ):
        with pytest.raises(ConfigError):
            MasZero(**bad)


def test_designs_are_read_leniently_but_a_bad_block_is_no_design():
    parsed = Design.parse(design(sub("a", "CoT-SC", n=None), sub("b", "LLM Debate", rounds="3")))
    assert parsed is not None
    assert [(s.block, s.n, s.rounds) for s in parsed.subtasks] == [
        ("cot_sc", 0, 0),
        ("debate", 0, 3),
    ]
    assert Design.parse(design(sub("a", "tree_search"))) is None
    assert Design.parse(design(sub("  ", "cot"))) is None
    assert Design.parse(json.dumps({"thought": "x", "subtasks": []})) is None
    assert Design.parse(Design.instructions()) is None  # the shape it was shown is no design
    assert Feedback.parse('{"solvability": "fine"}') is None  # no revision: no feedback


# --- the call formula ------------------------------------------------------------------------


FORMULA_CASES = [
    # seeds S + Σ_t (1 + B_t) + (T − 1) + 1 selection
    pytest.param({"seeds": [], "iterations": 1}, [design(sub("a", "cot"))], {}, 0 + 2 + 0 + 1),
    pytest.param(
        {"seeds": ["cot"], "iterations": 2},
        [design(sub("a", "cot_sc", n=3), sub("b", "cot")), design(sub("c", "debate", 2, 3))],
        {},
        1 + (1 + 3 + 1) + (1 + 2 * 3) + 1 + 1,
    ),
    pytest.param(  # seed self_refine stops at review 1 (2 calls); the designed one never stops
        {"seeds": ["cot_sc", "self_refine"], "samples": 3, "rounds": 2, "iterations": 2},
        [design(sub("a", "self_refine", rounds=2)), design(sub("b", "cot"), sub("c", "cot"))],
        {"seed_self_refine_": 1},
        (3 + 2) + (1 + (1 + 2 * 2)) + (1 + 2) + 1 + 1,
    ),
    pytest.param(  # a designed self_refine stopped at review 2: 2·2 calls
        {"seeds": ["debate"], "debaters": 3, "rounds": 2, "iterations": 3},
        [design(sub("a", "self_refine", rounds=4), sub("b", "cot_sc"))],
        {"it2_s1_": 2, "it1_s1_": 1, "it3_s1_": 3},
        3 * 2 + (1 + 2 + 5) + (1 + 4 + 5) + (1 + 6 + 5) + 2 + 1,  # cot_sc: n = samples
    ),
    pytest.param(  # n and rounds over the caps are capped; missing ones take the seed settings
        {"seeds": [], "iterations": 1, "max_agents": 2, "max_rounds": 3, "samples": 4},
        [design(sub("a", "debate", n=9, rounds=9), sub("b", "cot_sc"), sub("c", "debate", 1))],
        {},
        (1 + 2 * 3 + 2 + 1 * 3) + 1,
    ),
    pytest.param(  # select=majority: no verifier call
        {"seeds": ["cot"], "iterations": 2, "select": "majority"},
        [design(sub("a", "cot"))],
        {},
        1 + 2 + 1 + 2,
    ),
]


@pytest.mark.parametrize(("config", "designs", "stop_at", "expected"), FORMULA_CASES)
async def test_the_call_formula_over_scripted_designs(config, designs, stop_at, expected):
    model = ScriptedModel(script(designs, stop_at=stop_at))
    solution, ctx = await run(model, **config)
    assert len(model.calls) == ctx.usage.calls == expected
    counts = calls_by_agent(ctx)
    iterations = config["iterations"]
    assert counts["designer"] == iterations
    assert counts.get("evaluator", 0) == iterations - 1
    assert counts.get("verifier", 0) == (config.get("select") != "majority")
    candidates = solution.metadata["candidates"]
    assert len(candidates) == len(config["seeds"]) + iterations
    assert [c["source"] for c in candidates][-iterations:] == [
        f"design {t}" for t in range(1, iterations + 1)
    ]


async def test_the_default_configuration_counts():
    # S = 1 + 5 + 2·5 + (1 + 2·5) = 27; five one-cot designs: 5·2; four feedbacks; one selection
    model = ScriptedModel(script())
    solution, _ = await run(model)
    assert len(model.calls) == 27 + 5 * 2 + 4 + 1 == 42
    # the seed critic stops at its first review: S = 18
    model = ScriptedModel(script(stop_at={"seed_self_refine_": 1}))
    await run(model)
    assert len(model.calls) == 18 + 5 * 2 + 4 + 1 == 33
    assert [c["source"] for c in solution.metadata["candidates"]][:4] == [
        "cot (seed)",
        "cot_sc (seed)",
        "debate (seed)",
        "self_refine (seed)",
    ]


async def test_caps_keep_the_first_subtasks_and_the_last():
    subtasks = [sub(f"step {i}", "cot") for i in range(1, 8)]
    model = ScriptedModel(script([design(*subtasks)]))
    solution, ctx = await run(model, seeds=[], iterations=1, max_subtasks=3)
    record = solution.metadata["iterations"][0]
    assert [s["instruction"] for s in record["design"]] == ["step 1", "step 2", "step 7"]
    assert record["dropped"] == 4 and record["fallback"] is False
    assert calls_by_agent(ctx) == {
        "designer": 1,
        "it1_s1_solver": 1,
        "it1_s2_solver": 1,
        "it1_s3_solver": 1,
        "verifier": 1,
    }


# --- who sees what ---------------------------------------------------------------------------


THREE = design(
    sub("Find x.", "cot_sc", n=3),
    sub("Find y from x.", "cot"),
    sub("Combine x and y.", "debate", n=2, rounds=2),
)


async def test_each_subtask_reads_the_problem_and_the_earlier_results_in_order():
    answers = {"it1_s1_sample_1": 7, "it1_s1_sample_2": 9, "it1_s1_sample_3": 9}
    model = ScriptedModel(script([THREE], answers))
    solution, ctx = await run(model, seeds=[], iterations=1)
    s1 = "it1_s1_sample_2: The answer is 9."  # the majority's first response
    s2 = "it1_s2_solver: The answer is 42."
    for k in (1, 2, 3):
        (prompt,) = prompts_of(ctx, f"it1_s1_sample_{k}")
        assert "Your sub-task (1 of 3): Find x." in prompt
        assert "earlier sub-tasks" not in prompt and SUBTASK_FORMAT in prompt
        assert TOO_HARD in prompt and TASK.question in prompt
    (prompt,) = prompts_of(ctx, "it1_s2_solver")
    assert f"--- Sub-task 1 (Find x.) ---\n{s1}" in prompt
    assert "it1_s1_sample_1" not in prompt and "Your sub-task (2 of 3): Find y from x." in prompt
    assert SUBTASK_FORMAT in prompt and TASK.instruction not in prompt
    first, second = prompts_of(ctx, "it1_s3_debater_1")
    assert first.index(s1) < first.index(s2) and "Your sub-task (3 of 3)" in first
    assert f"{TASK.instruction}\n\nWork through the problem" in first  # the task's format last
    assert SUBTASK_FORMAT not in first
    # round 2: the other debater's round-1 answer in the user turn, its own in its history
    assert "it1_s3_debater_2: The answer is 42." in second
    assert "it1_s3_debater_1: The answer is 42." not in second
    debater_1 = [r for r in model.requests if agent_of(r) == "it1_s3_debater_1"][1]
    assert [m["role"] for m in debater_1.messages] == ["user", "assistant", "user"]
    assert solution.answer in {
        "it1_s3_debater_1: The answer is 42.",
        "it1_s3_debater_2: The answer is 42.",
    }


async def test_the_designer_sees_the_seeds_then_results_and_feedback_in_its_conversation():
    designs = [THREE, design(sub("Solve it whole.", "cot"))]
    model = ScriptedModel(script(designs, {"seed_cot_solver": 5, "it1_s1_sample_1": 7}))
    await run(model, seeds=["cot", "cot_sc"], samples=2, iterations=2)
    first, second = [r for r in model.requests if agent_of(r) == "designer"]
    prompt = first.messages[-1]["content"]
    assert first.messages[0]["role"] == "system" and "self_refine" in first.messages[0]["content"]
    assert "- cot (seed): 5\n- cot_sc (seed): 42" in prompt
    assert prompt.endswith(Design.instructions())
    assert list(second.messages[:3]) == [*first.messages, {"role": "assistant", "content": THREE}]
    revision = second.messages[-1]["content"]
    assert "Revision: REVISE-1" in revision and "Solvability: S" in revision
    assert "--- Sub-task 2 (cot): Find y from x. ---\nit1_s2_solver: The answer is 42." in revision
    assert "- design 1: 42" in revision
    assert "it1_s1_sample_1" not in revision  # the results only; the agents are the evaluator's


async def test_the_evaluator_reads_every_agent_output_of_the_design():
    model = ScriptedModel(script([THREE], stop_at={}))
    _, ctx = await run(model, seeds=["cot"], iterations=2)
    (prompt,) = prompts_of(ctx, "evaluator")
    design_1 = [r for r in ctx.ledger.records if r.round == 1 and r.agent.startswith("it1_")]
    assert len(design_1) == 3 + 1 + 2 * 2
    for record in design_1:
        assert f"--- {record.agent} ---\n{record.response}" in prompt
    assert "1. (cot_sc, n=3) Find x." in prompt and "3. (debate, n=2, rounds=2)" in prompt
    assert "- cot (seed): 42\n- design 1: 42" in prompt
    assert "it2_" not in prompt and prompt.endswith(Feedback.instructions())


async def test_the_verifier_sees_readable_candidates_most_common_answer_first():
    answers = {"seed_cot_solver": 5, "seed_cot_sc_": 7, "seed_debate_": 7, "it1_": 9}
    model = ScriptedModel(script(answers=answers, stop_at={"seed_self_refine_": 1}, choice=2))
    solution, ctx = await run(model, iterations=2, samples=2, rounds=1)
    # candidates: cot 5, cot_sc 7, debate 7, self_refine 42, design 1: 9, design 2: 42
    assert solution.metadata["selection"]["shown"] == [2, 3, 4, 6, 1, 5]
    (prompt,) = prompts_of(ctx, "verifier")
    order = [prompt.index(f"--- Candidate {k} ---") for k in range(1, 7)]
    assert order == sorted(order)
    assert "--- Candidate 1 ---\nseed_cot_sc_sample_1: The answer is 7." in prompt
    assert solution.metadata["chosen"] == 3  # the 2nd shown: the debate seed
    assert solution.answer.startswith("seed_debate_debater_") and solution.answer.endswith(" 7.")
    assert [c["answer"] for c in solution.metadata["candidates"]] == [
        "5",
        "7",
        "7",
        "42",
        "9",
        "42",
    ]


async def test_select_majority_votes_over_the_candidates():
    answers = {"seed_cot_": 5, "it1_": 9, "it2_": 9}
    model = ScriptedModel(script(answers=answers))
    solution, _ = await run(model, seeds=["cot"], iterations=2, select="majority")
    assert solution.answer == "it1_s1_solver: The answer is 9."
    assert solution.metadata["selection"] == {"how": "majority"}


async def test_the_topology_follows_the_designs():
    model = ScriptedModel(script([THREE]))
    _, ctx = await run(model, seeds=["cot"], iterations=1)
    topology = ctx.topology
    assert topology is not None
    edges = set(topology.edges)
    assert ("designer", "it1_s1_sample_3") in edges and ("it1_s3_debater_2", "evaluator") in edges
    assert ("it1_s1_sample_2", "it1_s2_solver") in edges
    assert ("it1_s2_solver", "it1_s3_debater_1") in edges
    assert ("it1_s3_debater_1", "it1_s3_debater_2") in edges
    assert {("seed_cot_solver", "verifier"), ("it1_s3_debater_1", "verifier")} <= edges


async def test_a_subtask_too_hard_is_recorded_and_shown_to_the_evaluator():
    hard = "41\n[TOO_HARD]\nSuggestion: split the counting"
    model = ScriptedModel(script([design(sub("a", "cot"), sub("b", "cot"))], {"it1_s1_": hard}))
    solution, ctx = await run(model, seeds=[], iterations=2)
    assert [r["too_hard"] for r in solution.metadata["iterations"]] == [[1], []]
    (prompt,) = prompts_of(ctx, "evaluator")
    assert f"Result of sub-task 1:\nit1_s1_solver: The answer is {hard}." in prompt


# --- garbage ---------------------------------------------------------------------------------


async def test_garbage_designs_fall_back_to_one_cot_subtask():
    designs = ["I would use a debate.", design(sub("x", "tree_search")), "", design()]
    model = ScriptedModel(script(designs))
    solution, ctx = await run(model, seeds=[], iterations=4)
    assert len(model.calls) == 4 * 2 + 3 + 1
    for t, record in enumerate(solution.metadata["iterations"], 1):
        assert record["fallback"] is True
        assert record["design"] == [
            {"instruction": "Solve the overall problem.", "block": "cot", "n": 1, "rounds": 1}
        ]
        assert prompts_of(ctx, f"it{t}_s1_solver")[0].count("Your sub-task (1 of 1)") == 1


async def test_garbage_feedback_critiques_and_selection_take_their_fallbacks():
    scripted = script(
        [design(sub("a", "self_refine", rounds=2))],
        answers={"seed_cot_": 5, "it1_": 7, "it2_": 7},
        feedback=lambda t: f"no json, just words {t}",
        choice="the second one",
    )

    def respond(request: ChatRequest) -> str:  # every critic writes garbage
        return "{not json" if agent_of(request).endswith("_critic") else scripted(request)

    model = ScriptedModel(respond)
    solution, ctx = await run(model, seeds=["cot"], iterations=2)
    records = solution.metadata["iterations"]
    assert records[0]["feedback_parsed"] is False and "feedback_parsed" not in records[1]
    assert all(r["unreadable_critiques"] == 2 for r in records)  # no stop: 1 + 2·2 calls each
    assert len(model.calls) == 1 + 2 * (1 + 5) + 1 + 1
    second_design = [r for r in model.requests if agent_of(r) == "designer"][1]
    assert "A review of the run:\nno json, just words 1" in second_design.messages[-1]["content"]
    refine = prompts_of(ctx, "it1_s1_refiner")[-1]
    assert "--- Feedback on attempt 2 ---\n{not json" in refine  # the raw critique is feedback
    assert solution.metadata["selection"]["fallback"] is True
    assert solution.answer == "it1_s1_refiner v2: The answer is 7."  # the majority's first


@pytest.mark.parametrize("choice", [0, 4, "x", None])
async def test_an_out_of_range_selection_is_the_majority(choice):
    model = ScriptedModel(script(answers={"seed_cot_": 5, "it": 3}, choice=choice))
    solution, _ = await run(model, seeds=["cot"], iterations=2)
    assert solution.metadata["selection"]["fallback"] is True
    assert solution.answer == "it1_s1_solver: The answer is 3."


async def test_empty_replies_everywhere_do_not_crash():
    model = ScriptedModel(lambda request: "")
    solution, _ = await run(model, iterations=2, samples=2, rounds=1)
    assert solution.answer == ""
    assert all(r["fallback"] for r in solution.metadata["iterations"])
    assert len(model.calls) == (1 + 2 + 2 + 3) + 2 * 2 + 1 + 1


# --- budget stops ----------------------------------------------------------------------------


async def test_a_budget_stop_returns_the_vote_over_the_candidates_so_far():
    answers = {"seed_cot_solver": 5, "seed_cot_sc_": 7, "it1_": 7, "it2_": 8}
    model = ScriptedModel(script([design(sub("a", "cot"), sub("b", "cot"))], answers))
    # seeds 1 + 2, design 1 (1 + 2), feedback 1, design 2's designer, then one of its blocks
    ctx = Context(model, budget=Budget(max_calls=3 + 3 + 1 + 1 + 1))
    method = MasZero(seeds=["cot", "cot_sc"], samples=2, iterations=2)
    solution = await method.run_sample(TASK, ctx)
    assert ctx.budget_stop is not None and "budget" in solution.metadata
    assert any(r.agent == "it2_s1_solver" for r in ctx.ledger.records)
    assert solution.answer == "seed_cot_sc_sample_1: The answer is 7."  # 5, 7, 7: the first 7


async def test_a_budget_stop_in_the_seeds_votes_over_the_finished_seeds():
    model = ScriptedModel(script(answers={"seed_cot_": 5}))
    ctx = Context(model, budget=Budget(max_calls=1))
    solution = await MasZero(seeds=["cot", "cot_sc"]).run_sample(TASK, ctx)
    assert ctx.budget_stop is not None
    assert solution.answer == "seed_cot_solver: The answer is 5."
    ctx = Context(ScriptedModel(script()), budget=Budget(max_calls=0))
    solution = await MasZero().run_sample(TASK, ctx)
    assert solution.answer == "" and "budget" in solution.metadata


# --- completion order ------------------------------------------------------------------------


def latency(reverse: bool) -> Callable[[ChatRequest], float]:
    def delay(request: ChatRequest) -> float:
        agent = agent_of(request)
        index = next((i for i, p in enumerate(SEED_ORDER) if agent.startswith(p)), 0)
        number = re.search(r"_(\d+)$", agent)
        rank = index * 6 + (int(number[1]) if number else 0)
        return 0.001 * ((30 - rank) if reverse else rank)

    return delay


async def test_prompts_and_answers_do_not_depend_on_completion_order():
    answers = {"seed_cot_sc_sample_2": 7, "seed_debate_debater_1": 7, "it1_s1_sample_1": 8}
    seen, finished = [], []
    for reverse in (True, False):
        model = ScriptedModel(
            script([THREE], answers, stop_at={"seed_self_refine_": 2}), latency=latency(reverse)
        )
        solution, ctx = await run(model, iterations=2, samples=3, rounds=2)
        seen.append(
            (
                solution.answer,
                solution.metadata,
                ctx.topology.to_dict(),
                sorted((r.agent, r.round, r.draw, repr(r.messages)) for r in ctx.ledger.records),
            )
        )
        samples = [c for c in model.calls if agent_of(c.request).startswith("seed_cot_sc_")]
        finished.append([agent_of(c.request) for c in sorted(samples, key=lambda c: c.finished)])
    assert finished[0] != finished[1]  # the concurrent calls did finish in other orders
    assert seen[0] == seen[1]


# --- model roles -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("roles", "on_b"),
    [
        ({"meta": "scripted:b"}, {"designer", "evaluator"}),
        ({"evaluator": "scripted:b"}, {"evaluator"}),
        ({"verifier": "scripted:b"}, {"verifier"}),
        ({"node": "scripted:b"}, {"node"}),
    ],
)
async def test_model_roles_put_the_meta_node_and_verifier_agents_on_other_models(roles, on_b):
    method = get_method("mas_zero")(seeds=["cot", "cot_sc"], samples=2, iterations=2)
    ctx = Context(
        "scripted:a",
        models=TwoModels(lambda: script([THREE])),
        model_roles=method.check_model_roles(roles),
    )
    await method.solve(TASK, ctx)
    assert len(ctx.ledger.records) == 3 + 2 * (1 + 3 + 1 + 4) + 1 + 1
    for record in ctx.ledger.records:
        group = record.agent if record.agent in {"designer", "evaluator", "verifier"} else "node"
        assert record.model == ("scripted:b" if group in on_b else "scripted:a")


def test_role_names_are_checked():
    MasZero().check_model_roles({"meta": "scripted:echo", "designer": "scripted:echo"})
    with pytest.raises(ConfigError, match="no role or agent 'judge'"):
        MasZero().check_model_roles({"judge": "scripted:echo"})


@pytest.mark.parametrize("native", [True, False])
async def test_json_replies_send_their_schema_natively_where_supported(native):
    model = ScriptedModel(script([THREE]), native=["structured_output"] if native else [])
    await run(model, seeds=["self_refine"], rounds=1, iterations=2)
    schemas = {"designer": Design, "evaluator": Feedback, "verifier": Selection}
    for request in model.requests:
        agent = agent_of(request)
        expected = schemas.get(agent, Critique if agent.endswith("_critic") else None)
        if native and expected is not None:
            assert request.response_format["json_schema"]["schema"] == expected.json_schema()
        else:
            assert request.response_format is None


def test_the_selection_reply_shape():
    assert Selection.parse('{"reasoning": "r", "choice": "2"}').choice == 2
    assert Selection.parse('{"reasoning": "r"}') is None


# --- the command line ------------------------------------------------------------------------


@pytest.mark.system
def test_the_command_line_runs_mas_zero_on_gsm8k(tmp_path):
    data, answers, out = tmp_path / "gsm8k.jsonl", tmp_path / "mas_zero.json", tmp_path / "run"
    rows = [
        {"question": "Tom has 3 boxes of 6 pencils. How many pencils?", "answer": "#### 18"},
        {"question": "Maria reads 15 pages a day. How many in 6 days?", "answer": "#### 90"},
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    replies = {
        "Design a multi-agent system for this problem|^Your design ran": design(
            sub("Count the items.", "cot_sc", n=2), sub("Give the total.", "cot")
        ),
        "^A multi-agent system was designed": json.dumps(
            {"solvability": "ok", "completeness": "ok", "revision": "keep"}
        ),
        "Review the answer: check each step": review(1, True),
        "^Problem:.*Candidate solutions:": json.dumps({"reasoning": "all agree", "choice": 1}),
        ".": "The answer is 18.",
    }
    answers.write_text(json.dumps(replies))
    code = main(
        ["run", "--method", "mas_zero", "--benchmark", "gsm8k", "--data", str(data),
         "--model", f"scripted:{answers}", "--limit", "2", "--out", str(out), "--no-cache",
         "--quiet"]
    )  # fmt: skip
    assert code == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # seeds 1 + 5 + 2·5 + 2; five designs of 1 + (2 + 1); four feedbacks; one selection
    assert [r["usage"]["calls"] for r in results] == [18 + 5 * 4 + 4 + 1] * 2
    assert [r["score"]["correct"] for r in results] == [True, False]
    trace = json.loads((out / "traces.jsonl").read_text().splitlines()[0])
    agents = {c["agent"] for c in trace["calls"]}
    assert {"designer", "evaluator", "verifier", "it5_s2_solver", "seed_debate_debater_2"} <= agents
