"""MapCoder: recall similar problems, plan from each, code the surest plan, debug on sample I/O.

Islam, Ali, Parvez. "MapCoder: Multi-Agent Code Generation for Competitive Problem Solving".
arXiv:2405.11403 (ACL 2024).

Algorithm (k recalled problems, t debugging rounds per plan), on code tasks only:

1. Retrieval agent (1 call): recall k relevant but different problems, each with a short
   description, a step-by-step plan and its code, then name the algorithm behind the target
   problem and write a short tutorial on it. Reply in JSON.
2. Planning agent, for each recalled problem i (the k pairs run concurrently, gathered in
   recall order): a plan for the target problem, written from problem i and its plan, the
   tutorial and the task's sample tests (1 call); then, on its own, a confidence score 0-100
   that this plan solves the problem, with an explanation, in JSON (1 call).
3. Plans are tried in decreasing confidence (ties: recall order). For each plan the coding
   agent writes the code from the plan, the tutorial and the sample tests (1 call), which is
   run on the sample tests in the sandbox. While it fails, the debugging agent reads the plan,
   the latest code and the test log and writes a corrected plan and code (1 call, ≤ t rounds),
   run again each time. The first code that passes every sample test is the answer.
4. If no code passes, the answer is the code that passed the most sample tests, the latest of
   those tied.

The sample tests are the task prompt's own examples (:func:`maslab.kit.code_tests.public_tests`:
its asserts and doctests), run with :func:`maslab.kit.code_tests.run_tests`. The hidden tests that
score the answer (``task.tests``) are never shown to any model nor run by the method.

LLM calls: 1 + 2k + Σ over the plans tried of (1 + d_j), d_j ≤ t the debugging rounds of plan j.
Best case (the first code passes): 1 + 2k + 1 (k = 3: 8); a pass after d debugging rounds of
the first plan: 1 + 2k + 1 + d; no code ever passes: 1 + 2k + k·(1 + t) (k = 3, t = 5: 25).
Running the tests calls no model.

Budget stop: the code that passed the most sample tests so far (the latest of those tied);
nothing before the first code is written.

Native structured output: where the model handle supports it, the recall and the confidence are
requested with their JSON schemas as well (same prompts, same calls); either way they are read
leniently, so no reply fails a sample:

* a recall that is not readable JSON (or has none of its keys) counts as no recalled problem,
  and its whole text is given to the planners as background; recalled entries that are not
  objects are dropped, missing fields are empty. With fewer than k problems recalled, the
  remaining plans are written without an example (so there are always k plans, 2k calls);
* a confidence is read from the JSON (a number, or the first number in a string like "85%"),
  else from a ``confidence: N`` line of the text, and clamped to [0, 100]; an unreadable one
  counts as 0 (``metadata["confidences"]`` has None for it).

Deviations: prompts are our own, zero-shot and generic (the paper's are per benchmark and ask
for XML). The paper's final answer when nothing passes is the last code; ours is the code that
passed the most sample tests, the latest among ties (the same code whenever no earlier attempt
beat the last one), which is also what a budget stop returns. A task without sample tests in its
prompt gets none: a code then passes when it runs without error (defines its functions and
raises nothing), so normally the surest plan's first code is the answer and the debugging agent
is only called on code that crashes or has no code block. Each debugging call starts afresh
(no chat history): it sees the plan, the latest code (only its code block, when it has one) and
that code's test log. The plan's confidence is a second call of the planning agent (the
paper's plan verification); the four parts are four model roles (``retrieval``, ``planning``,
``coding``, ``debugging``) on the run's model unless model roles say otherwise. A non-code task
(``answer_type`` other than ``"code"``) is refused with a :class:`~maslab.errors.ConfigError`.
"""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, WithJsonSchema

from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.errors import ConfigError
from maslab.kit.code_tests import TestRun, public_tests, run_tests
from maslab.kit.parsing import Text
from maslab.kit.structured import Reply, ask

RETRIEVAL, PLANNING, CODING, DEBUGGING = "retrieval", "planning", "coding", "debugging"


# --- replies -------------------------------------------------------------------------------------


class Recalled(BaseModel):
    """One problem the retrieval agent recalls."""

    description: Text = ""
    plan: Text = ""
    code: Text = ""


def _objects_only(value: object) -> list[object]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class Recall(Reply):
    """The retrieval agent's JSON reply."""

    problems: Annotated[list[Recalled], BeforeValidator(_objects_only)] = Field(
        default_factory=list
    )
    algorithm: Text = ""
    tutorial: Text = ""


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_CONFIDENCE_LINE = re.compile(r"confidence\W{0,3}\s*[:=]\s*\W{0,2}(-?\d+(?:\.\d+)?)", re.I)


def read_score(value: object) -> float | None:
    """A confidence clamped to [0, 100]: a number, or the first number in a string; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        found = _NUMBER.search(value)
        value = float(found[0]) if found else None
    if isinstance(value, int | float) and value == value:  # not NaN
        return min(100.0, max(0.0, float(value)))
    return None


class Confidence(Reply):
    """The planning agent's JSON judgement of its own plan."""

    explanation: Text = Field("", description="a short account of what you checked")
    confidence: Annotated[
        float | None,
        BeforeValidator(read_score),
        WithJsonSchema(
            {
                "type": "number",
                "description": "a number from 0 to 100: how confident you are that the plan "
                "solves the problem",
            }
        ),
    ] = None


def read_confidence(text: str) -> float | None:
    """The confidence of a reply (JSON, else a ``confidence: N`` line), clamped; None if none."""
    judged = Confidence.parse(text)
    if judged is not None and judged.confidence is not None:
        return judged.confidence
    found = _CONFIDENCE_LINE.findall(text)
    return read_score(found[-1]) if found else None


def read_recall(text: str, k: int) -> tuple[list[Recalled], str]:
    """The first k recalled problems and the background for the planners (the algorithm and
    its tutorial; the whole reply when it is not readable JSON)."""
    recall = Recall.parse(text)
    if recall is None or not (recall.problems or recall.algorithm or recall.tutorial):
        return [], text.strip()
    background = "\n\n".join(p for p in (recall.algorithm, recall.tutorial) if p)
    return recall.problems[:k], background


# --- prompts -------------------------------------------------------------------------------------


def _samples(tests: list[str]) -> str:
    if not tests:
        return "The problem shows no sample tests."
    return "Sample tests the solution must pass:\n" + "\n".join(tests)


def _background(background: str) -> str:
    return f"Relevant algorithm and tutorial:\n{background}\n\n" if background else ""


def recall_prompt(task: Task, k: int) -> str:
    return (
        f"Here is a programming problem:\n\n{task.prompt()}\n\n"
        f"Recall {k} programming problems you know that are relevant to this one but different "
        "from it. For each, give a short description, a step-by-step plan that solves it, and "
        "Python code that follows the plan. Then name the algorithm or technique the given "
        "problem calls for (brute force, dynamic programming, greedy, binary search, graph "
        "search, ...) and write a short, general tutorial on it: when it applies and how to "
        "use it. Do not solve the given problem."
    )


def plan_prompt(task: Task, example: Recalled | None, background: str, tests: list[str]) -> str:
    shown = (
        f"A related problem:\n{example.description}\n\nA plan that solves it:\n{example.plan}\n\n"
        if example is not None and (example.description or example.plan)
        else ""
    )
    return (
        f"{shown}{_background(background)}Problem to solve:\n{task.prompt()}\n\n"
        f"{_samples(tests)}\n\n"
        "Write a concrete step-by-step plan to solve this problem"
        f"{', drawing on the related problem where it helps' if shown else ''}. "
        "Write the plan only, no code."
    )


def confidence_prompt(task: Task, plan: str) -> str:
    return (
        f"Problem:\n{task.prompt()}\n\nA proposed plan for solving it:\n{plan.strip()}\n\n"
        "Check whether a program that follows this plan would solve the problem correctly, "
        "including its edge cases."
    )


def code_prompt(task: Task, plan: str, background: str, tests: list[str]) -> str:
    return (
        f"{_background(background)}Problem:\n{task.prompt()}\n\n{_samples(tests)}\n\n"
        f"Plan:\n{plan.strip()}\n\n"
        "Write Python code that solves the problem by following the plan. Give the complete "
        "code in one ```python code block."
    )


def debug_prompt(task: Task, plan: str, code: str, log: str) -> str:
    return (
        f"Problem:\n{task.prompt()}\n\nPlan:\n{plan.strip()}\n\n"
        f"Code written from the plan:\n```python\n{code.strip()}\n```\n\n"
        f"What happened when it was run on the sample tests:\n{log.strip()}\n\n"
        "Find the mistake, in the plan or in the code. Write a corrected plan, then the "
        "complete corrected code in one ```python code block."
    )


# --- the method ----------------------------------------------------------------------------------


@register_method("mapcoder")
class MapCoder(Method):
    """Recall k problems, plan from each, code plans by confidence, debug on sample tests."""

    roles = (RETRIEVAL, PLANNING, CODING, DEBUGGING)
    paper = "Islam et al., arXiv 2405.11403 (MapCoder)"
    category = "coding pipeline (retrieval, planning, coding, debugging agents; sample I/O tests)"
    calls = (
        "1 + 2k + Σ over plans tried (1 + d_j), d_j ≤ t debugging rounds: first code passes "
        "1 + 2k + 1, none passes 1 + 2k + k·(1 + t) (k = 3, t = 5: 8–25)"
    )

    class Config(MethodConfig):
        k: int = Field(3, ge=1)
        t: int = Field(5, ge=0)

    config: Config

    def structure(self) -> Topology:
        """Retrieval feeds planning and coding, planning feeds coding and debugging, and coding
        feeds debugging."""
        edges = [
            (RETRIEVAL, PLANNING),
            (RETRIEVAL, CODING),
            (PLANNING, CODING),
            (PLANNING, DEBUGGING),
            (CODING, DEBUGGING),
        ]
        return Topology.from_edges(edges, name="mapcoder")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        if task.answer_type != "code":
            raise ConfigError(
                f"mapcoder solves code tasks only; task {task.id} has answer type "
                f"'{task.answer_type}'"
            )
        cfg = self.config
        ctx.topology = self.structure()
        retrieval, planning, coding, debugging = (
            ctx.agent(name) for name in (RETRIEVAL, PLANNING, CODING, DEBUGGING)
        )
        tests = public_tests(task)

        said, _ = await ask(retrieval, recall_prompt(task, cfg.k), Recall, round=0, kind="recall")
        examples, background = read_recall(said.content, cfg.k)
        slots: list[Recalled | None] = [*examples, *[None] * (cfg.k - len(examples))]

        async def plan(example: Recalled | None) -> tuple[str, float | None]:
            written = await planning.reply(
                plan_prompt(task, example, background, tests), round=1, kind="plan", remember=False
            )
            judged, _ = await ask(
                planning,
                confidence_prompt(task, written.content),
                Confidence,
                round=2,
                kind="confidence",
                remember=False,
            )
            return written.content, read_confidence(judged.content)

        planned = await asyncio.gather(*(plan(example) for example in slots))
        confidences = [score for _, score in planned]
        order = sorted(range(cfg.k), key=lambda i: -(confidences[i] or 0.0))

        metadata = {"confidences": confidences, "public_tests": tests}
        attempts = _Attempts(task, tests, ctx)
        for position, i in enumerate(order):
            plan_text = planned[i][0]
            attempt = await coding.reply(
                code_prompt(task, plan_text, background, tests),
                round=attempts.round,
                remember=False,
                metadata={"plan": i + 1},
            )
            run = await attempts.test(attempt.content, plan=i + 1)
            for _ in range(cfg.t):
                if run.passed:
                    break
                code = extract_answer(attempt.content, "code", entry_point=task.entry_point)
                shown = code or attempt.content
                attempt = await debugging.reply(
                    debug_prompt(task, plan_text, shown, run.feedback),
                    round=attempts.round,
                    remember=False,
                    metadata={"plan": i + 1},
                )
                run = await attempts.test(attempt.content, plan=i + 1)
            if run.passed:
                return attempts.solution(
                    attempt.content, passed=True, plans_tried=position + 1, **metadata
                )
        return attempts.solution(attempts.best, passed=False, plans_tried=cfg.k, **metadata)


class _Attempts:
    """The codes written so far, each run on the sample tests: their results and the best."""

    def __init__(self, task: Task, tests: list[str], ctx: Context) -> None:
        self.task, self.tests, self.ctx = task, tests, ctx
        self.results: list[dict[str, Any]] = []
        self.best, self._best_passed = "", -1
        self.round = 3  # retrieval 0, plans 1, confidences 2; then one round per code written

    async def test(self, attempt: str, *, plan: int) -> TestRun:
        """Run ``attempt`` on the sample tests; propose it if it passes at least as many as the
        best so far (the latest of those tied)."""
        run = await run_tests(self.task, attempt, self.tests)
        self.ctx.post("sample_tests", run.feedback, round=self.round, kind="test_results")
        passed, total = run.counts
        self.results.append(
            {"plan": plan, "passed": passed, "tests": total, "all_passed": run.passed}
        )
        if passed >= self._best_passed:
            self.best, self._best_passed = attempt, passed
            self.ctx.propose(attempt, round=self.round, plan=plan, sample_tests_passed=passed)
        self.round += 1
        return run

    def solution(self, answer: str, **metadata: Any) -> Solution:
        return Solution(answer=answer, metadata={**metadata, "test_results": self.results})
