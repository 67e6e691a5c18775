"""Evaluators (numeric, choice, exact, math, llm_judge) and evaluator agreement."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import multiprocessing.context
import re
import threading
from pathlib import Path

import pytest
from math_hooks import MEET_S, meeting_check

from maslab.analysis.agreement import Agreement, compare_evaluators, format_agreement
from maslab.bench.evaluation import (
    STRICT,
    Evaluator,
    Score,
    Scorer,
    Strict,
    get_evaluator,
    list_evaluators,
)
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.errors import ConfigError, LLMError
from maslab.evaluators import math as math_evaluators
from maslab.evaluators.llm_judge import (
    NO_ANSWER,
    LLMJudgeEvaluator,
    parse_verdict,
    parse_xverify_verdict,
)
from maslab.evaluators.math import MathEvaluator
from maslab.llm.scripted import ScriptedModel
from maslab.llm.types import ChatRequest

CORRECT, WRONG, UNPARSED = "correct", "wrong", "unparsed"


def verdict(score: Score) -> str:
    if score.unparsed:
        assert not score.correct and score.value == 0.0
        return UNPARSED
    assert score.value == float(score.correct)
    return CORRECT if score.correct else WRONG


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- hand-labelled responses to real GSM8K records --------------------------------------------

GSM8K_CASES = [  # (record index, model response, expected verdict)
    (0, "She has 16 - 3 - 4 = 9 eggs left and sells them at $2 each, so she makes $18.", CORRECT),
    (0, "Janet makes 18 dollars every day at the farmers' market.", CORRECT),
    (0, "9 eggs * $2 = $18.00\nThe answer is 18.00", CORRECT),
    (0, "16 - 3 - 4 = 9 eggs, so the answer is 9.", WRONG),
    (1, r"White fiber: 2 / 2 = 1 bolt. Total: 2 + 1 = 3, so \boxed{3}.", CORRECT),
    (2, "He made a profit of $200,000 - $130,000 = $70,000.\n#### 70,000", CORRECT),
    (2, "The house is now worth $200,000.\nThe answer is $200,000.", WRONG),
    (3, "He runs 3 * 3 * 60 = 540 meters.\nFinal answer: 540 meters", CORRECT),
    (4, "She needs 60 - 15 - 25 = 20 cups.\nThe answer is 20 cups.", CORRECT),
    (5, "Every glass costs $5, so 16 glasses cost 16 * 5 = $80.", WRONG),
    (7, "I'm not sure how to approach this download problem.", UNPARSED),
    (8, r"After the return trip he is \boxed{45} miles from home.", CORRECT),
    (9, "Regular pay $400 plus overtime $60 gives $460 this week.", CORRECT),
    (11, "Donuts $204 + cupcakes $160 + cheesecakes $330.\n**Total:** $694", CORRECT),
    (12, r"He starts earning money after \boxed{12} years.", WRONG),
    (13, "Melanie started with some vacuum cleaners, but I cannot tell how many.", UNPARSED),
    (17, "Her yearly salary is $57,500.00", CORRECT),
    (18, "She eats 3 * 28 = 84 eggs, which is 84/12 = 7 dozen.", CORRECT),
    (146, "The answer is 2125.", CORRECT),  # the record's gold is written "2,125"
    (201, "The answer is $114,200.", CORRECT),  # the record's gold is written "114,200"
]

AQUA_CASES = [  # (record index, model response, expected verdict)
    (0, "I'd go with (A) because 5(√3 + 1) ≈ 13.66 minutes is what remains.", CORRECT),
    (1, "Solving 0.78x - 20 = x/2 + 1.9 gives x = 78.20.\n\n**E**", CORRECT),
    (2, "36 is the only multiple of both 9 and 12.\nAnswer: a", CORRECT),
    (3, "P = 0.56 * 0.26 / ... so the answer is (C).", WRONG),
    (4, "The cost price is 360 / 1.2 = 300.\nThe answer is 300", CORRECT),  # option text
    (5, "Answer: e", WRONG),
    (6, "The answer is B) 64543", WRONG),
    (7, "The delay adds 2.5 hours, so the answer is 12.5", CORRECT),  # option text
    (8, "I cannot determine anything from the information given.", UNPARSED),
    (12, "Both put one out after 36 minutes.\nThe answer is 36 minutes.", CORRECT),
    (13, r"+45 + (-30) = 15, so \boxed{D}", CORRECT),
    (14, "The letters can be arranged in 7! ways.\nThe answer is 7!", CORRECT),
    (15, "The events are independent, so P(A|B) = P(A) = 0.2. Option A.", CORRECT),
]


def gsm8k_task(record: dict, index: int) -> Task:
    gold = record["answer"].rsplit("#### ", 1)[1].strip().replace(",", "")
    return Task(id=f"gsm8k-{index}", question=record["question"], gold=gold, answer_type="number")


def aqua_task(record: dict, index: int) -> Task:
    options = tuple(re.sub(r"^[A-E]\)", "", option).strip() for option in record["options"])
    return Task(
        id=f"aqua-{index}",
        question=record["question"],
        gold=record["correct"],
        choices=options,
        answer_type="choice",
    )


@pytest.mark.parametrize(("index", "response", "expected"), GSM8K_CASES)
async def test_numeric_on_gsm8k(shared_data, index, response, expected):
    record = read_jsonl(shared_data / "gsm8k_test_head300.jsonl")[index]
    score = await get_evaluator("numeric")().score(gsm8k_task(record, index), response)
    assert verdict(score) == expected, score


@pytest.mark.parametrize(("index", "response", "expected"), AQUA_CASES)
async def test_choice_on_aqua(shared_data, index, response, expected):
    record = read_jsonl(shared_data / "aqua_test_head100.jsonl")[index]
    score = await get_evaluator("choice")().score(aqua_task(record, index), response)
    assert verdict(score) == expected, score


@pytest.mark.system
async def test_math_agrees_with_numeric_on_gsm8k(shared_data, math_evaluator):
    records = read_jsonl(shared_data / "gsm8k_test_head300.jsonl")
    numeric = get_evaluator("numeric")()
    for index, response, expected in GSM8K_CASES:
        task = gsm8k_task(records[index], index)
        assert verdict(await numeric.score(task, response)) == expected
        math_score = await math_evaluator.score(task, response)
        assert math_score.correct == (expected == CORRECT), (index, response, math_score)


# --- numeric, choice, exact -------------------------------------------------------------------


def number_task(gold: str) -> Task:
    return Task(id="n", question="?", gold=gold, answer_type="number")


@pytest.mark.parametrize(
    ("gold", "response", "expected"),
    [
        ("18", "18.0", CORRECT),
        ("1234", "It comes to 1,234 apples.", CORRECT),
        ("18", "It costs $18", CORRECT),
        ("0.5", "1/2", CORRECT),
        ("1/3", r"\boxed{\frac{2}{6}}", CORRECT),
        ("-7", "**Final Answer:** **-7**", CORRECT),
        ("0.3333333", "1/3", CORRECT),  # within the default relative tolerance (1e-6)
        ("1000000", "1000002", WRONG),  # 2e-6 relative: outside
        ("3", "5/0", WRONG),  # parsed, but not a number
        ("3", "no idea", UNPARSED),
    ],
)
async def test_numeric_equality(gold, response, expected):
    assert verdict(await get_evaluator("numeric")().score(number_task(gold), response)) == expected


async def test_numeric_rel_tol_option():
    loose = get_evaluator("numeric")(rel_tol=0.01)
    assert (await loose.score(number_task("100"), "100.9")).correct
    assert not (await loose.score(number_task("100"), "102")).correct
    with pytest.raises(ConfigError):
        get_evaluator("numeric")(rel_tol=-1)


async def test_a_task_without_a_usable_gold_is_a_config_error():
    with pytest.raises(ConfigError, match="no gold"):
        await get_evaluator("exact")().score(Task(id="x", question="?"), "18")
    with pytest.raises(ConfigError, match="not a number"):
        await get_evaluator("numeric")().score(number_task("eighteen"), "18")


@pytest.mark.parametrize(
    ("gold", "response", "expected"),
    [
        ("Paris", "The capital of France is...\nThe answer is Paris.", CORRECT),
        ("New York", "Final answer: **new   york**", CORRECT),
        ("Paris", "The answer is Lyon.", WRONG),
        ("Paris", "", UNPARSED),
    ],
)
async def test_exact(gold, response, expected):
    task = Task(id="t", question="?", gold=gold)
    assert verdict(await get_evaluator("exact")().score(task, response)) == expected


async def test_registry_and_options():
    assert {"numeric", "math", "choice", "exact", "llm_judge"} <= set(list_evaluators())
    with pytest.raises(ConfigError, match="choice options: rel_tol: Extra inputs"):
        get_evaluator("choice")(rel_tol=1)


async def test_a_scorer_picks_the_evaluator_of_each_answer_type_and_closes_them(monkeypatch):
    closed: list[str] = []
    monkeypatch.setattr(Evaluator, "aclose", lambda self: _record_close(closed, self.name))
    number = Task(id="n", question="?", gold="18", answer_type="number")
    text = Task(id="t", question="?", gold="Paris", answer_type="text")
    async with Scorer() as scorer:
        assert (await scorer.score(number, "18.0 dollars")).correct  # numeric: 18.0 == 18
        assert not (await scorer.score(text, "The answer is Lyon.")).correct
        assert (await scorer.score(text, "Paris")).correct
    assert sorted(closed) == ["exact", "numeric"]  # each made once, all released
    async with Scorer("exact") as scorer:  # a named evaluator for every task
        assert not (await scorer.score(number, "18.0")).correct


async def _record_close(closed: list[str], name: str) -> None:
    closed.append(name)


# --- strict and flexible ----------------------------------------------------------------------


async def test_numeric_keeps_its_flexible_score_and_records_the_strict_verdict():
    task = Task(id="n", question="?", gold="64", answer_type="number")
    numeric = get_evaluator("numeric")()
    hedge = await numeric.score(task, "It is around 64, but I cannot decide.")
    assert hedge.correct and hedge.extracted == "64"  # the score is the flexible verdict
    assert hedge.details == {STRICT: {"extracted": None, "correct": False}}
    assert hedge.strict == Strict(extracted=None, correct=False)
    boxed = await numeric.score(task, r"Maybe 60. So \boxed{64.0}.")
    assert boxed.correct and boxed.strict == Strict(extracted="64.0", correct=True)
    marked = await numeric.score(task, "The answer is 63.")
    assert not marked.correct and marked.strict == Strict(extracted="63", correct=False)
    nothing = await numeric.score(task, "I cannot tell.")
    assert nothing.unparsed and nothing.strict == Strict(extracted=None, correct=False)


async def test_exact_records_the_strict_verdict_beside_its_text_match():
    task = Task(id="x", question="Capital of France?", gold="Paris")
    exact = get_evaluator("exact")()
    marked = await exact.score(task, "The answer is Paris.")
    assert marked.correct and marked.strict == Strict(extracted="Paris", correct=True)
    boxed = await exact.score(task, r"\boxed{Lyon}")
    assert not boxed.correct and boxed.strict == Strict(extracted="Lyon", correct=False)
    hedge = await exact.score(task, "Paris, or maybe Lyon")  # no answer in the instructed form
    assert hedge.strict == Strict(extracted=None, correct=False)


async def test_choice_records_the_letter_in_the_instructed_form_only():
    task = Task(id="c", question="?", gold="B", choices=("Oslo", "Paris"), answer_type="choice")
    choice = get_evaluator("choice")()
    loose = await choice.score(task, "I'd go with (B) here.")
    assert loose.correct and loose.strict == Strict(extracted=None, correct=False)
    by_text = await choice.score(task, "The answer is Paris.")  # the option's text, no letter
    assert by_text.correct and by_text.strict == Strict(extracted=None, correct=False)
    boxed = await choice.score(task, r"\boxed{B}")
    assert boxed.correct and boxed.strict == Strict(extracted="B", correct=True)
    wrong = await choice.score(task, "The answer is (A) Oslo.")
    assert not wrong.correct and wrong.strict == Strict(extracted="A", correct=False)


# --- math -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def math_evaluator():
    evaluator = MathEvaluator()
    yield evaluator
    asyncio.run(evaluator.aclose())


def math_task(gold: str) -> Task:
    return Task(id="m", question="?", gold=gold, answer_type="math")


@pytest.mark.system
@pytest.mark.parametrize(
    ("gold", "response", "expected"),
    [
        (r"\frac{1}{2}", "The probability is 0.5", CORRECT),
        (r"\frac{\sqrt{2}}{2}", r"So $\sin 45^\circ = \boxed{\sqrt2/2}$.", CORRECT),
        (r"\frac{\sqrt{2}}{2}", r"\boxed{\frac{1}{\sqrt{2}}}", CORRECT),
        ("x^2+2x+1", r"Expanding, we get \boxed{(x+1)^2}.", CORRECT),
        (r"\{1,2\}", r"The solution set is $\{2,1\}$.", CORRECT),
        ("[0,1)", r"The range is \boxed{[0,1)}", CORRECT),
        ("(0,1]", r"The range is \boxed{[0,1)}", WRONG),
        ("3", r"\boxed{4}", WRONG),
        ("18", "The final answer is 18 dollars.", CORRECT),
        ("x^2+2x+1", r"\boxed{(x-1)^2}", WRONG),
        ("3", "I could not finish the computation.", UNPARSED),
    ],
)
async def test_math_equivalence(math_evaluator, gold, response, expected):
    score = await math_evaluator.score(math_task(gold), response)
    assert verdict(score) == expected, score


@pytest.mark.system
async def test_math_reports_what_it_parsed(math_evaluator):
    score = await math_evaluator.score(math_task(r"\frac{1}{2}"), r"Thus \boxed{\frac{2}{4}}.")
    assert score.correct and score.extracted == r"\frac{2}{4}"


@pytest.mark.system
async def test_math_checks_the_answer_in_the_instructed_form_apart(math_evaluator):
    half = math_task(r"\frac{1}{2}")
    loose = await math_evaluator.score(half, "The probability is 0.5")
    assert loose.correct and loose.strict == Strict(extracted=None, correct=False)
    boxed = await math_evaluator.score(half, r"Thus \boxed{\frac{2}{4}}.")
    assert boxed.correct and boxed.strict == Strict(extracted=r"\frac{2}{4}", correct=True)
    marked = await math_evaluator.score(half, "The final answer is 1/3.")
    assert not marked.correct and marked.strict == Strict(extracted="1/3", correct=False)


@pytest.mark.system
async def test_math_timeout_replaces_the_worker():
    evaluator = MathEvaluator(timeout_s=30.0)  # the first check may be slow on a busy machine
    try:
        await evaluator.score(math_task("1"), r"\boxed{1}")  # start the worker
        (first,) = evaluator._pool.pids
        evaluator.timeout_s = 0.5
        # sympy tries to build 10^(10^10) while comparing: hangs far beyond the limit
        slow = await evaluator.score(math_task("x^2+2x+1"), r"\boxed{10^{10^{10}}}")
        assert not slow.correct and slow.explanation == "math-verify timed out"
        assert evaluator._pool.pids == set()  # killed
        evaluator.timeout_s = 5.0
        after = await evaluator.score(math_task(r"\frac{1}{2}"), "0.5")
        assert after.correct
        assert len(evaluator._pool.pids) == 1 and first not in evaluator._pool.pids
    finally:
        await evaluator.aclose()
    assert evaluator._pool.pids == set()


async def meet(evaluator: MathEvaluator, folder: Path) -> list[tuple[int, int]]:
    """(pid, checks in workers at once) of two concurrent checks by ``meeting_check``."""
    scores = await asyncio.gather(
        *(evaluator.score(math_task(str(folder)), name) for name in ("a", "b"))
    )
    return [tuple(map(int, score.extracted.split())) for score in scores]


@pytest.mark.system
async def test_math_checks_run_in_parallel_and_a_timeout_replaces_only_its_worker(
    monkeypatch, tmp_path
):
    monkeypatch.setattr(math_evaluators, "_check", meeting_check)
    evaluator = MathEvaluator(workers=2, timeout_s=2 * MEET_S)
    try:
        met = await meet(evaluator, tmp_path)
        assert [checks for _, checks in met] == [2, 2]  # both were in a worker at once
        started = evaluator._pool.pids
        assert {pid for pid, _ in met} == started and len(started) == 2
        evaluator.timeout_s = 0.5
        slow = await evaluator.score(math_task(str(tmp_path)), "hang")
        assert not slow.correct and slow.explanation == "math-verify timed out"
        assert len(evaluator._pool.pids) == 1 and evaluator._pool.pids < started
    finally:
        await evaluator.aclose()
    assert evaluator._pool.pids == set()


async def test_a_worker_that_could_not_start_closes_cleanly(monkeypatch):
    def cannot(self: object) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(multiprocessing.context.SpawnProcess, "start", cannot)
    evaluator = MathEvaluator()
    with pytest.raises(OSError, match="Resource temporarily unavailable"):
        await evaluator.score(math_task("1"), r"\boxed{1}")
    await evaluator.aclose()  # the process never started: nothing to kill, no AttributeError
    assert evaluator._pool.pids == set()


@pytest.mark.parametrize("workers", [0, -1, 1.5, "2", True])
def test_math_workers_must_be_a_positive_whole_number(workers):
    with pytest.raises(ConfigError, match="math options: workers: Input should be"):
        MathEvaluator(workers=workers)


@pytest.mark.parametrize("timeout_s", [0, -1, "abc", True])
def test_math_timeout_must_be_a_positive_number(timeout_s):
    with pytest.raises(ConfigError, match="math options: timeout_s: Input should be"):
        MathEvaluator(timeout_s=timeout_s)


@pytest.mark.system
def test_a_run_resumes_under_another_math_worker_count(tmp_path, capsys):
    """``workers`` changes how checks run, never a score: not part of the run's identity."""
    from maslab.api import run_config
    from maslab.cli import main
    from maslab.harness.runner import Runner

    base = ["run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2", "--model",
            "scripted:echo", "--evaluator", "math", "--no-cache", "--quiet"]  # fmt: skip
    for workers in (1, 2):
        assert main([*base, "--out", str(tmp_path / "run"), "--evaluator-option",
                     f"workers={workers}"]) in (0, 1)  # fmt: skip
    assert "holds a different run" not in capsys.readouterr().err

    def out(**options: object) -> str | None:
        config = run_config("vanilla", "arith", "scripted:echo", evaluator="math",
                            evaluator_options=options)  # fmt: skip
        return Runner(config).config.out

    assert out(workers=1) == out(workers=3) == out()
    assert out(timeout_s=9.0) != out()  # a time limit can change a score


@pytest.mark.system
async def test_math_from_concurrent_tasks_and_threads(math_evaluator):
    cases = [
        (r"\frac{1}{2}", "0.5", True),
        ("x^2+2x+1", r"\boxed{(x+1)^2}", True),
        ("3", r"\boxed{4}", False),
        ("[0,1)", r"\boxed{[0,1)}", True),
    ]

    async def run_all() -> list[bool]:
        scores = await asyncio.gather(
            *(math_evaluator.score(math_task(gold), answer) for gold, answer, _ in cases)
        )
        return [s.correct for s in scores]

    expected = [want for _, _, want in cases]
    from_threads: list[list[bool]] = []
    threads = [
        threading.Thread(target=lambda: from_threads.append(asyncio.run(run_all())))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    here = await run_all()
    for thread in threads:
        thread.join(timeout=30)
    assert here == expected
    assert from_threads == [expected] * 3


# --- llm_judge --------------------------------------------------------------------------------

JUDGE_TASK = Task(
    id="j",
    question="How many legs do 3 spiders have?",
    gold="24",
    instruction="End with 'The answer is N'.",
)
RESPONSE = "Each spider has 8 legs, so 3 * 8 = 24.\nThe answer is 24."


async def test_judge_makes_two_calls_at_temperature_zero():
    judge = ScriptedModel(["24", "CORRECT"])
    score = await LLMJudgeEvaluator(judge=judge).score(JUDGE_TASK, RESPONSE)
    assert verdict(score) == CORRECT and score.extracted == "24"
    judge.assert_consumed()
    assert [r.temperature for r in judge.requests] == [0, 0]
    extract, compare = (r.messages[-1]["content"] for r in judge.requests)
    assert RESPONSE in extract and JUDGE_TASK.question in extract and NO_ANSWER in extract
    assert "End with" not in extract  # the format instruction is not part of the question
    assert "Reference answer: 24" in compare and "Candidate answer: 24" in compare
    assert RESPONSE not in compare


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("CORRECT", CORRECT),
        ("correct.", CORRECT),
        ("**Correct**", CORRECT),
        ("Verdict: CORRECT", CORRECT),
        ("INCORRECT", WRONG),
        ("Incorrect - the candidate is not correct.", WRONG),
        ("No, that is incorrect.", WRONG),
        ("The candidate is not correct", WRONG),  # negated: unclear, so wrong
        ("Maybe?", WRONG),
        ("", WRONG),
    ],
)
async def test_judge_verdicts(reply, expected):
    judge = ScriptedModel(["24", reply])
    score = await LLMJudgeEvaluator(judge=judge).score(JUDGE_TASK, RESPONSE)
    assert verdict(score) == expected
    if parse_verdict(reply) is None:
        assert score.explanation.startswith("unclear verdict:")


@pytest.mark.parametrize("reply", [NO_ANSWER, "no_answer.", "  `NO_ANSWER`", ""])
async def test_judge_no_answer_is_unparsed_after_one_call(reply):
    judge = ScriptedModel([reply])
    score = await LLMJudgeEvaluator(judge=judge).score(JUDGE_TASK, "I don't know.")
    assert verdict(score) == UNPARSED
    assert len(judge.calls) == 1


async def test_judge_failures_propagate():
    def broken(request):
        raise LLMError("service unavailable", model="judge")

    with pytest.raises(LLMError):
        await LLMJudgeEvaluator(judge=ScriptedModel(broken)).score(JUDGE_TASK, RESPONSE)


async def test_judge_from_a_spec():
    evaluator = get_evaluator("llm_judge")(judge="scripted:echo")
    score = await evaluator.score(JUDGE_TASK, RESPONSE)  # echoes the prompt: no clear verdict
    assert verdict(score) == WRONG and score.explanation.startswith("unclear verdict:")
    await evaluator.aclose()


# --- llm_judge, xverify mode ------------------------------------------------------------------

XVERIFY_FIELDS = re.compile(
    r'\n\nQuestion: """(.*)"""\n\nOutput sentence: """(.*)"""\n\nCorrect answer: (.*)\n\n'
    r"Judgement:\n\Z",
    re.DOTALL,
)


def xverify(judge: ScriptedModel | str) -> LLMJudgeEvaluator:
    return LLMJudgeEvaluator({"mode": "xverify"}, judge=judge)


async def test_xverify_sends_the_three_fields_in_order_in_one_user_turn():
    task = Task(id="c", question="Which is a prime?", choices=("4", "7"), gold="B",
                instruction="End with 'The answer is X'.")  # fmt: skip
    judge = ScriptedModel(["Correct"])
    score = await xverify(judge).score(task, "7 is prime.\nThe answer is B.")
    assert verdict(score) == CORRECT and score.extracted == "7 is prime.\nThe answer is B."
    (request,) = judge.requests
    assert request.temperature == 0 and request.response_format is None
    (turn,) = request.messages  # no system turn: the server's chat template adds its own
    assert turn["role"] == "user"
    fields = XVERIFY_FIELDS.search(turn["content"])
    assert fields is not None
    question = task.model_copy(update={"instruction": ""}).prompt()
    assert fields.groups() == (question, "7 is prime.\nThe answer is B.", "B")
    assert "(B) 7" in question and "End with" not in turn["content"]


UNCLEAR = "unclear"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Correct", CORRECT),
        ("correct", CORRECT),
        (" [CORRECT]\n", CORRECT),
        ("Incorrect", WRONG),
        ("**incorrect**.", WRONG),
        ("The output is correct.", UNCLEAR),  # not the one word
        ("Correct or Incorrect", UNCLEAR),
        ("Not correct", UNCLEAR),
        ('{"verdict": "CORRECT"}', UNCLEAR),
        ("", UNCLEAR),
    ],
)
async def test_xverify_reads_the_one_word_verdict(reply, expected):
    judge = ScriptedModel([reply])
    score = await xverify(judge).score(JUDGE_TASK, RESPONSE)
    assert len(judge.calls) == 1 and score.extracted == RESPONSE
    assert verdict(score) == (WRONG if expected == UNCLEAR else expected)
    assert (parse_xverify_verdict(reply) is None) == (expected == UNCLEAR)
    assert score.explanation.startswith("unclear verdict:") == (expected == UNCLEAR)


async def test_xverify_makes_one_scoring_call_per_answer_and_the_default_mode_two():
    ctx = Context(ScriptedModel(), sample_id="s")
    judge = ScriptedModel(["Correct", "Incorrect", "Correct"])
    evaluator = xverify(judge)
    answers = [RESPONSE, "The answer is 23.", ""]
    scores = [await evaluator.score(JUDGE_TASK, answer, ctx=ctx) for answer in answers]
    assert [verdict(s) for s in scores] == [CORRECT, WRONG, CORRECT]
    judge.assert_consumed()
    assert ctx.ledger.totals(purpose="scoring", agent="judge").calls == 3
    assert ctx.ledger.totals(purpose="method").calls == 0  # never against the method's budget
    default = LLMJudgeEvaluator(judge=ScriptedModel(["24", "CORRECT"]))
    assert default.config.mode == "default"
    await default.score(JUDGE_TASK, RESPONSE, ctx=ctx)
    assert ctx.ledger.totals(purpose="scoring").calls == 5


def test_xverify_mode_is_checked():
    with pytest.raises(ConfigError, match="llm_judge options: mode: Input should be"):
        LLMJudgeEvaluator({"mode": "xVerify-9B"}, judge="scripted:echo")


def test_xverify_endpoint_end_to_end(tmp_path):
    """A fake OpenAI-compatible server plays the xVerify model: it reads the three fields and
    says Correct when the correct answer is in the output sentence."""
    from maslab.cli import main
    from maslab.store.run_store import RunStore
    from maslab.testing.fake_server import FakeOpenAIServer

    def verifier(request: ChatRequest) -> str:
        (turn,) = request.messages
        _, output, gold = XVERIFY_FIELDS.search(turn["content"]).groups()
        return "Correct" if gold in output else "Incorrect"

    answers = tmp_path / "answers.yaml"
    answers.write_text('".": "So the answer is \\\\boxed{13}."\n', encoding="utf-8")
    out = tmp_path / "run"
    with FakeOpenAIServer(verifier) as server:
        code = main(
            [
                "run", "--method", "vanilla", "--benchmark", "arith", "--limit", "2",
                "--model", f"scripted:{answers}", "--evaluator", "llm_judge",
                "--evaluator-option", "mode=xverify",
                "--judge-model", f"openai:xverify@{server.base_url}",
                "--out", str(out), "--no-cache", "--quiet",
            ]
        )  # fmt: skip
        assert code == 0
        assert server.served == 2 and all(
            entry["body"]["model"] == "xverify" and entry["body"]["temperature"] == 0
            for entry in server.request_log
        )
    store = RunStore(out)
    results = sorted(store.results(), key=lambda r: r.task_id)
    assert [(r.gold, r.correct) for r in results] == [("13", True), ("27", False)]
    assert all(r.scoring_usage["calls"] == 1 for r in results)
    assert store.manifest().evaluator_options["mode"] == "xverify"
    calls = [c for t in store.traces() for c in t.calls]
    assert sum(c.purpose == "scoring" and c.agent == "judge" for c in calls) == 2


# --- agreement --------------------------------------------------------------------------------


class Table(Evaluator):
    """Scores from a fixed table: task id -> correct."""

    def __init__(self, verdicts: dict[str, bool]) -> None:
        super().__init__()
        self.verdicts = verdicts

    async def score(self, task: Task, answer: str, *, ctx: object = None) -> Score:
        ok = self.verdicts[task.id]
        return Score(value=float(ok), correct=ok, extracted=answer)


def pairs_and_tables(a: str, b: str) -> tuple[list[tuple[Task, str]], Table, Table]:
    """Verdict strings like "1101" -> one task per position."""
    tasks = [Task(id=f"t{i}", question="?", gold="1") for i in range(len(a))]
    pairs = [(task, f"answer {i}") for i, task in enumerate(tasks)]
    table_a = Table({t.id: x == "1" for t, x in zip(tasks, a, strict=True)})
    table_b = Table({t.id: x == "1" for t, x in zip(tasks, b, strict=True)})
    return pairs, table_a, table_b


async def test_agreement_counts_and_kappa():
    pairs, a, b = pairs_and_tables("1111001000", "1111000100")
    result = await compare_evaluators(pairs, a, b)
    assert (result.n, result.both_correct, result.both_wrong) == (10, 4, 4)
    assert (result.only_a, result.only_b) == (1, 1)
    assert result.percent_agreement == pytest.approx(80.0)
    # p_o = 0.8, p_e = 0.5 * 0.5 + 0.5 * 0.5 = 0.5 -> kappa = 0.6
    assert result.kappa == pytest.approx(0.6)
    assert [d.task_id for d in result.disagreements] == ["t6", "t7"]
    first = result.disagreements[0]
    assert first.answer == "answer 6" and first.gold == "1"
    assert first.score_a.correct and not first.score_b.correct


async def test_agreement_kappa_uneven_margins():
    result = Agreement(both_correct=4, both_wrong=3, only_a=2, only_b=1)
    # p_o = 0.7, p_a = 0.6, p_b = 0.5, p_e = 0.3 + 0.2 = 0.5 -> kappa = 0.4
    assert result.kappa == pytest.approx(0.4)


@pytest.mark.parametrize(("a", "b"), [("1111", "1111"), ("0000", "0000"), ("1010", "1010")])
async def test_perfect_agreement_has_kappa_one(a, b):
    result = await compare_evaluators(*pairs_and_tables(a, b))
    assert result.percent_agreement == 100.0 and result.kappa == 1.0
    assert result.disagreements == []


async def test_agreement_of_nothing_and_of_total_disagreement():
    empty = await compare_evaluators([], Table({}), Table({}))
    assert (empty.n, empty.percent_agreement, empty.kappa) == (0, 100.0, 1.0)
    opposite = await compare_evaluators(*pairs_and_tables("1100", "0011"))
    assert opposite.percent_agreement == 0.0 and opposite.kappa == pytest.approx(-1.0)


async def test_format_agreement():
    pairs, a, b = pairs_and_tables("110", "100")
    long_answer = "word " * 100
    pairs[1] = (pairs[1][0], long_answer)
    text = format_agreement(await compare_evaluators(pairs, a, b), "numeric", "llm_judge")
    assert "numeric vs llm_judge: 3 answers" in text and "kappa" in text
    assert "numeric correct" in text and "llm_judge wrong" in text
    assert "Disagreements (1):" in text and "t1" in text
    answer_line = next(line for line in text.splitlines() if "answer:" in line)
    assert answer_line.endswith("…") and len(answer_line.split("answer: ", 1)[1]) <= 120


@pytest.mark.system
async def test_agreement_of_real_evaluators(shared_data, math_evaluator):
    records = read_jsonl(shared_data / "gsm8k_test_head300.jsonl")
    pairs = [(gsm8k_task(records[i], i), response) for i, response, _ in GSM8K_CASES]
    result = await compare_evaluators(pairs, get_evaluator("numeric")(), math_evaluator)
    assert result.n == len(GSM8K_CASES) and result.kappa == 1.0
