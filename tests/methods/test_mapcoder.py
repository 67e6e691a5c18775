"""MapCoder with scripted models: the call formula (first code passes, a pass after d debugging
rounds, no pass), plans tried by confidence, who sees what, lenient parsing, budget stops, model
roles and the command line. The sample tests run real (tiny) programs in the sandbox."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import pytest
from helpers import add_task, prompts_of, records_of

from maslab.cli import main
from maslab.core.context import Budget, Context
from maslab.core.method import get_method
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.llm.pool import ModelPool
from maslab.llm.scripted import ScriptedModel, last_user_message
from maslab.llm.types import ChatRequest
from maslab.methods.mapcoder import (
    Confidence,
    MapCoder,
    Recall,
    read_confidence,
    read_recall,
    read_score,
)

HIDDEN = "assert add(2, 2) == 4  # HIDDEN-TEST"
TASK = add_task(HIDDEN)
SAMPLES = ["assert add(1, 2) == 3", "assert add(0, 0) == 0"]

RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"  # passes 1 of 2 (0 - 0 == 0)
BROKEN = "```python\ndef add(a, b):\n    return a * q\n```"  # passes 0 of 2
NO_CODE = "I am not sure how to fix it."


def recall_reply(k: int = 3) -> str:
    problems = [
        {"description": f"problem-{i}", "plan": f"example-plan-{i}", "code": f"code-{i}"}
        for i in range(1, k + 1)
    ]
    return json.dumps({"problems": problems, "algorithm": "ALGO", "tutorial": "TUTORIAL"})


def kind_of(prompt: str) -> str:
    if prompt.startswith("Here is a programming problem"):
        return "recall"
    if "Write a concrete step-by-step plan" in prompt:
        return "plan"
    if "A proposed plan for solving it" in prompt:
        return "confidence"
    if "Find the mistake" in prompt:
        return "debug"
    return "code"


def plan_of(prompt: str, k: int = 9) -> int:
    """The plan a prompt is about: PLAN-i in it (or example-plan-i for a planning prompt)."""
    for i in range(1, k + 1):
        if f"PLAN-{i}" in prompt or f"example-plan-{i}" in prompt:
            return i
    return 0


def script(
    programs: dict[int, Sequence[str]],
    confidences: Sequence[object] = (50, 90, 10),
    recall: str | None = None,
) -> Callable[[ChatRequest], str]:
    """Recall k problems; plan i is 'PLAN-i' with confidence ``confidences[i-1]``; the coding and
    then the debugging calls about plan i get ``programs[i]`` in turn (WRONG once used up)."""
    queues = {i: iter(texts) for i, texts in programs.items()}

    def respond(request: ChatRequest) -> str:
        prompt = last_user_message(request)
        kind = kind_of(prompt)
        if kind == "recall":
            return recall if recall is not None else recall_reply(len(confidences))
        i = plan_of(prompt)
        if kind == "plan":
            return f"PLAN-{i}: step one, step two."
        if kind == "confidence":
            return json.dumps({"explanation": "checked", "confidence": confidences[i - 1]})
        return next(queues.get(i, iter(())), WRONG)

    return respond


def test_the_defaults_are_three_recalled_problems_and_five_debugging_rounds():
    assert (MapCoder().config.k, MapCoder().config.t) == (3, 5)


@pytest.mark.system
async def test_the_first_code_passing_costs_1_plus_2k_plus_1_calls():
    model = ScriptedModel(script({2: [RIGHT]}))
    ctx = Context(model)
    solution = await MapCoder().solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == 1 + 2 * 3 + 1
    assert solution.answer == RIGHT and solution.metadata["passed"] is True
    assert solution.metadata["plans_tried"] == 1 and solution.metadata["public_tests"] == SAMPLES
    assert solution.metadata["confidences"] == [50, 90, 10]
    assert solution.metadata["test_results"] == [
        {"plan": 2, "passed": 2, "tests": 2, "all_passed": True}
    ]  # plan 2 (confidence 90) is tried first
    assert [r.agent for r in ctx.ledger.records[:1]] == ["retrieval"]
    assert [r.agent for r in ctx.ledger.records[1:7]] == ["planning"] * 6
    assert ctx.ledger.records[-1].agent == "coding"


@pytest.mark.system
@pytest.mark.parametrize("d", [1, 3, 5])
async def test_a_pass_after_d_debugging_rounds_costs_1_plus_2k_plus_1_plus_d(d):
    model = ScriptedModel(script({2: [WRONG] * d + [RIGHT]}))
    ctx = Context(model)
    solution = await MapCoder().solve(TASK, ctx)
    assert len(model.calls) == 1 + 2 * 3 + 1 + d
    assert [r.agent for r in ctx.ledger.records[7:]] == ["coding"] + ["debugging"] * d
    assert solution.answer == RIGHT and solution.metadata["passed"] is True
    assert [r["plan"] for r in solution.metadata["test_results"]] == [2] * (d + 1)


@pytest.mark.system
@pytest.mark.parametrize(("k", "t"), [(3, 5), (2, 1), (1, 0)])
async def test_no_code_ever_passing_costs_1_plus_2k_plus_k_times_1_plus_t(k, t):
    confidences = [10, 70, 40][:k]
    model = ScriptedModel(script({}, confidences))
    ctx = Context(model)
    solution = await MapCoder(k=k, t=t).solve(TASK, ctx)
    assert len(model.calls) == ctx.usage.calls == 1 + 2 * k + k * (1 + t)
    assert solution.metadata["passed"] is False and solution.metadata["plans_tried"] == k
    tried = [r["plan"] for r in solution.metadata["test_results"]]
    expected = sorted(range(1, k + 1), key=lambda i: -confidences[i - 1])
    assert tried == [i for i in expected for _ in range(1 + t)]  # by decreasing confidence
    coders = [plan_of(p) for p in prompts_of(ctx, "coding")]
    assert coders == expected
    assert solution.answer == WRONG


@pytest.mark.system
async def test_the_second_plan_gets_its_turn_when_the_first_exhausts_its_rounds():
    model = ScriptedModel(script({2: [WRONG] * 6, 1: [WRONG, RIGHT]}))
    ctx = Context(model)
    solution = await MapCoder().solve(TASK, ctx)
    assert len(model.calls) == 1 + 2 * 3 + (1 + 5) + (1 + 1)
    assert solution.answer == RIGHT and solution.metadata["plans_tried"] == 2
    assert [plan_of(p) for p in prompts_of(ctx, "coding")] == [2, 1]


@pytest.mark.system
async def test_without_a_pass_the_answer_is_the_code_passing_most_sample_tests():
    # plan 2: WRONG (1/2), then BROKEN, NO_CODE ...; plan 1: BROKEN ...; plan 3: WRONG again
    programs = {2: [WRONG, BROKEN, NO_CODE], 1: [BROKEN] * 6, 3: [BROKEN, WRONG] + [BROKEN] * 4}
    model = ScriptedModel(script(programs))
    ctx = Context(model)
    solution = await MapCoder().solve(TASK, ctx)
    passed = [r["passed"] for r in solution.metadata["test_results"]]
    assert passed[:3] == [1, 0, 0] and passed.count(1) == 5  # WRONG is the default reply
    assert solution.answer == WRONG  # the latest of the codes passing 1 of 2
    assert ctx.proposal is not None and ctx.proposal.answer == WRONG
    assert ctx.proposal.metadata["plan"] == 3  # plan 3's WRONG is the latest tied best


@pytest.mark.system
async def test_who_sees_what():
    model = ScriptedModel(script({2: [WRONG, NO_CODE, RIGHT]}))
    ctx = Context(model)
    await MapCoder().solve(TASK, ctx)
    recall, *_ = prompts_of(ctx, "retrieval")
    assert TASK.prompt() in recall and "3 programming problems" in recall
    planning = prompts_of(ctx, "planning")
    plans = [p for p in planning if kind_of(p) == "plan"]
    judged = [p for p in planning if kind_of(p) == "confidence"]
    assert len(plans) == len(judged) == 3
    for i, prompt in enumerate(sorted(plans, key=plan_of), 1):
        assert f"problem-{i}" in prompt and f"example-plan-{i}" in prompt  # its example only
        assert all(f"problem-{j}" not in prompt for j in (1, 2, 3) if j != i)
        assert f"code-{i}" not in prompt and "ALGO" in prompt and "TUTORIAL" in prompt
        assert all(test in prompt for test in SAMPLES)
    for prompt in judged:  # one plan, nothing else of the others
        i = plan_of(prompt)
        assert f"PLAN-{i}:" in prompt and "PLAN-" not in prompt.replace(f"PLAN-{i}", "")
        assert "problem-" not in prompt and "TUTORIAL" not in prompt
    (code,) = prompts_of(ctx, "coding")
    assert "PLAN-2:" in code and "TUTORIAL" in code and all(t in code for t in SAMPLES)
    first, second = prompts_of(ctx, "debugging")
    assert "PLAN-2:" in first and "return a - b" in first
    assert "assert add(1, 2) == 3  # returned -1" in first  # the sample-test log
    assert "not sure how to fix" in second and "No Python code was found" in second
    for record in ctx.ledger.records:
        assert len(record.messages) == 1  # every call starts afresh
        assert "HIDDEN-TEST" not in json.dumps(record.messages)  # hidden tests never shown
        assert "GOLD-CODE" not in json.dumps(record.messages)
    logs = [m.content.splitlines()[0] for m in ctx.transcript if m.kind == "test_results"]
    assert logs == [
        "1 of 2 unit tests passed.",
        "No Python code was found in the answer.",
        "2 of 2 unit tests passed.",
    ]


@pytest.mark.system
async def test_a_task_without_sample_tests_takes_the_first_code_that_runs():
    task = Task(id="n1", question="Write a function add(a, b).", answer_type="code")
    model = ScriptedModel(script({2: ["```python\nraise ValueError('boom')\n```", WRONG]}))
    ctx = Context(model)
    solution = await MapCoder().solve(task, ctx)
    assert len(model.calls) == 1 + 2 * 3 + 1 + 1  # the crash is debugged once
    assert solution.answer == WRONG and solution.metadata["public_tests"] == []
    assert "no sample tests" in prompts_of(ctx, "coding")[0]


@pytest.mark.system
async def test_garbage_replies_never_crash_and_fall_back_to_defaults():
    # recall not JSON: no examples, the raw text as background; confidences unreadable
    model = ScriptedModel(
        script({0: [RIGHT]}, confidences=["unsure"], recall="Think of DP. BACKGROUND")
    )
    ctx = Context(model)
    solution = await MapCoder().solve(TASK, ctx)
    assert len(model.calls) == 1 + 2 * 3 + 1
    assert solution.metadata["confidences"] == [None, None, None]
    plans = [p for p in prompts_of(ctx, "planning") if kind_of(p) == "plan"]
    assert all("BACKGROUND" in p and "related problem" not in p for p in plans)
    assert plan_of(prompts_of(ctx, "coding")[0]) == 0  # no example: the plans are all 'PLAN-0'
    # every reply empty: still k plans, every plan debugged t times
    model = ScriptedModel(lambda request: "")
    solution = await MapCoder(t=1).solve(TASK, Context(model))
    assert len(model.calls) == 1 + 2 * 3 + 3 * 2 and solution.metadata["passed"] is False
    assert solution.answer == ""


def test_read_recall_keeps_k_objects_and_reads_leniently():
    problems, background = read_recall(recall_reply(4), 3)
    assert [p.description for p in problems] == ["problem-1", "problem-2", "problem-3"]
    assert background == "ALGO\n\nTUTORIAL"
    text = 'Sure: {"problems": [1, {"plan": "p", "code": null}, "x"], "tutorial": 7}'
    problems, background = read_recall(text, 3)
    assert [(p.description, p.plan, p.code) for p in problems] == [("", "p", "")]
    assert background == "7"
    assert read_recall('{"problems": "none"}', 3) == ([], '{"problems": "none"}')
    assert read_recall("no json", 3) == ([], "no json")


def test_confidences_are_read_leniently_and_clamped():
    assert [read_score(v) for v in (85, 85.5, "85%", "-3", 250, True, None, "high")] == [
        85.0, 85.5, 85.0, 0.0, 100.0, None, None, None,
    ]  # fmt: skip
    assert read_confidence('{"explanation": "ok", "confidence": "90 out of 100"}') == 90.0
    assert read_confidence("Looks right.\nConfidence: 75") == 75.0
    assert read_confidence('{"explanation": "ok"}\n**Confidence**: 120') == 100.0
    assert read_confidence('{"confidence": "unknown"}') is None
    assert read_confidence("") is None


@pytest.mark.system
async def test_confidence_clamping_orders_the_plans():
    model = ScriptedModel(script({}, confidences=["95%", 400, -20]), name="m")
    ctx = Context(model)
    solution = await MapCoder(t=0).solve(TASK, ctx)
    assert solution.metadata["confidences"] == [95.0, 100.0, 0.0]
    assert [plan_of(p) for p in prompts_of(ctx, "coding")] == [2, 1, 3]


@pytest.mark.system
@pytest.mark.parametrize("native", [True, False])
async def test_the_recall_and_confidence_schemas_are_sent_natively_where_supported(native):
    model = ScriptedModel(script({2: [RIGHT]}), native=["structured_output"] if native else [])
    await MapCoder().solve(TASK, Context(model))
    formats = [
        (kind_of(last_user_message(r)), (r.response_format or {}).get("json_schema"))
        for r in model.requests
    ]
    for request in model.requests:
        prompt, kind = last_user_message(request), kind_of(last_user_message(request))
        if kind in ("recall", "confidence"):
            reply = Recall if kind == "recall" else Confidence
            assert prompt.endswith(f".\n\n{reply.instructions()}")
        else:
            assert "JSON" not in prompt
    for kind, schema in formats:
        if not native or kind in ("plan", "code", "debug"):
            assert schema is None
        else:
            expected = Recall if kind == "recall" else Confidence
            assert schema is not None and schema["schema"] == expected.json_schema()


@pytest.mark.system
async def test_a_budget_stop_returns_the_code_passing_most_sample_tests_so_far():
    programs = {2: [WRONG, BROKEN, NO_CODE, RIGHT]}
    for calls, expected in ((7, ""), (8, WRONG), (9, WRONG), (10, WRONG)):
        model = ScriptedModel(script(programs))
        ctx = Context(model, budget=Budget(max_calls=calls))
        solution = await MapCoder().run_sample(TASK, ctx)
        assert solution.answer == expected and ctx.usage.calls == calls
        assert "budget" in solution.metadata
    model = ScriptedModel(script(programs))
    solution = await MapCoder().run_sample(TASK, Context(model, budget=Budget(max_calls=11)))
    assert solution.answer == RIGHT and "budget" not in solution.metadata


def test_a_non_code_task_is_refused():
    task = Task(id="q", question="What is 6 * 7?", answer_type="number")
    with pytest.raises(ConfigError, match="code tasks only"):
        MapCoder().run(task, ScriptedModel(["42"]))


class TwoModels(ModelPool):
    def __init__(self, **scripts: Callable[[ChatRequest], str]) -> None:
        super().__init__()
        self.served = {
            f"scripted:{s}": ScriptedModel(r, name=f"scripted:{s}") for s, r in scripts.items()
        }

    def get(self, spec: str) -> ScriptedModel:  # type: ignore[override]
        return self.served[spec]


@pytest.mark.system
async def test_model_roles_put_the_coding_agent_on_another_model():
    method = get_method("mapcoder")()
    roles = method.check_model_roles({"coding": "scripted:b"})
    models = TwoModels(a=script({2: [RIGHT]}), b=script({2: [WRONG]}))
    ctx = Context("scripted:a", models=models, model_roles=roles)
    await method.solve(TASK, ctx)
    assert [(r.agent, r.model) for r in ctx.ledger.records if r.agent != "planning"] == [
        ("retrieval", "scripted:a"),
        ("coding", "scripted:b"),
        ("debugging", "scripted:a"),
    ]
    assert {r.model for r in records_of(ctx, "planning")} == {"scripted:a"}


@pytest.mark.system
def test_the_command_line_runs_mapcoder_on_humaneval(tmp_path):
    base = {
        "^Here is a programming problem": recall_reply(),
        "Write a concrete step-by-step plan": "PLAN-1: loop over the input.",
        "A proposed plan": '{"explanation": "fine", "confidence": 60}',
        "Find the mistake": "```python\nraise NotImplementedError\n```",
        ".": "```python\nraise NotImplementedError\n```",  # the coding agent
    }
    (tmp_path / "base.json").write_text(json.dumps(base))
    (tmp_path / "coder.json").write_text(json.dumps({".": "```python\nimport os\n```"}))
    out = tmp_path / "run"
    code = main(
        ["run", "--method", "mapcoder", "--benchmark", "humaneval",
         "--model", f"scripted:{tmp_path / 'base.json'}",
         "--model-role", f"coding=scripted:{tmp_path / 'coder.json'}",
         "--config", "t=1", "--limit", "2", "--out", str(out), "--no-cache", "--quiet"]
    )  # fmt: skip
    assert code == 0
    lines = (out / "results.jsonl").read_text().splitlines()
    results = sorted((json.loads(line) for line in lines), key=lambda r: r["task_id"])
    assert len(results) == 2 and all(r["status"] == "ok" for r in results)
    assert all(r["usage"]["calls"] == 1 + 2 * 3 + 3 * (1 + 1) for r in results)  # never passes
    assert [len(r["metadata"]["public_tests"]) for r in results] == [2, 1]  # the doctests
