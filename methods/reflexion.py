"""Reflexion: an actor retries a task, learning from verbal reflections on its failed attempts.

Shinn, Cassano, Berman, Gopinath, Narasimhan, Yao. "Reflexion: Language Agents with Verbal
Reinforcement Learning". arXiv:2303.11366 (NeurIPS 2023).

Algorithm (T = ``max_trials``, Ω = ``memory``), strictly sequential, one model in three parts:

1. Trial t = 1..T: the actor answers the question. On trial 1 it sees only the question; later
   it also sees the memory, the last Ω reflections (oldest first), and on code tasks its latest
   program with the unit-test results it got (as in the official programming agent).
2. The evaluator judges the attempt, never with the gold answer (hidden from methods):

   * code tasks (``answer_type == "code"``: HumanEval, MBPP): once per task, right after the
     first attempt, the evaluator writes up to ``max_tests`` one-line ``assert`` unit tests from
     the question alone (it never sees an attempt);
     each attempt's last code block (after the task's ``prompt_prefix`` when set) is run with
     them in the sandbox (:func:`maslab.sandbox.arun_python`), each test separately under its own
     time limit. The attempt passes when every test passes.
   * other tasks: the evaluator reads the question and the attempt and returns JSON, its
     ``feedback`` and ``correct`` (true when it judges the answer right): an LLM self-evaluation.

3. If the attempt passed, stop. Otherwise, unless it was trial T, the reflector reads the
   question, the attempt and the evaluation and writes a short verbal lesson (what went wrong,
   what to do differently), appended to the memory, which keeps the last Ω.
4. The final answer is the last attempt: the first one that passed, or the T-th.

LLM calls, with t = the trial that passed (t = T when none did):

* other tasks: actor + evaluator per trial + a reflection between trials: 3t - 1 (2 to 3T - 1;
  2-14 at T = 5);
* code tasks: 1 for the tests + an actor call per trial + a reflection between trials: 2t
  (2 to 2T; 2-10 at T = 5). Running the tests calls no model.

Budget stop: the latest attempt (each is proposed as it is written; on code tasks the first
attempt comes before the tests, so even one call leaves an answer).

Native structured output: where the model handle supports it, the self-evaluation is requested
with its JSON schema as well (same prompt, same calls); either way it is parsed defensively.

Deviations: prompts are our own, zero-shot and task-generic (the paper uses few-shot prompts
per environment). Defaults: T = 5 trials (the official HumanEval runs' ``max_iters``) and Ω = 3
(the paper bounds the memory to 1-3 reflections). For non-code tasks the evaluator is the model
judging itself (the paper's HotPotQA evaluator uses exact match with the gold answer, which a
method never sees here); a judgement that is not valid JSON counts as a failure
(``metadata["parsed"]``), a JSON one may leave out either key (no ``correct``: a failure), and
wherever ``feedback`` is missing the whole reply is the feedback. On code tasks the official
agent writes the tests before the first program; we write them just after it (the test writer
sees only the question either way), so a budget stop after one call still has an answer. Tests
that do not parse as one ``assert`` statement are dropped; with no test left an attempt passes
when its code runs without error. The official programming agent shows the actor only the
latest reflection; we show the last Ω for every task type. An empty reflection is not stored.
The three parts are three model roles (``actor``, ``evaluator``, ``reflector``) on the run's
model unless model roles say otherwise.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from pydantic import Field

from maslab.core.agents import Agent
from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.code_tests import parse_tests, run_tests
from maslab.kit.parsing import Flag, Text
from maslab.kit.prompts import cot_prompt
from maslab.kit.structured import Reply, ask

ACTOR, EVALUATOR, REFLECTOR = "actor", "evaluator", "reflector"


class Judgement(Reply):
    """The evaluator's JSON reply on a non-code attempt."""

    feedback: Text = Field("", description="what is wrong or doubtful, or why it holds up")
    correct: Flag = False


# --- prompts -------------------------------------------------------------------------------------


def actor_prompt(task: Task, memory: list[str], previous: tuple[str, str] | None = None) -> str:
    """Trial 1: the question alone. Later: the question, the reflections in memory (oldest
    first) and, on code tasks, the latest program with its test results."""
    if not memory and previous is None:
        return cot_prompt(task)
    parts = [task.prompt(), "You have attempted this task before and did not succeed."]
    if previous is not None:
        code, results = previous
        parts.append(
            f"Your latest program:\n```python\n{code.strip()}\n```\n\n"
            f"What happened when it was run against unit tests:\n{results.strip()}"
        )
    if memory:
        lessons = "\n\n".join(f"Lesson {i}: {text.strip()}" for i, text in enumerate(memory, 1))
        parts.append(f"Lessons you drew from your failed attempts, oldest first:\n\n{lessons}")
    parts.append(
        "Take these lessons into account and do not repeat the same mistakes. Work through the "
        "problem step by step, then state your final answer."
    )
    return "\n\n".join(parts)


def judge_prompt(task: Task, attempt: str) -> str:
    return (
        f"Question:\n{task.prompt()}\n\nAttempted answer:\n{attempt.strip()}\n\n"
        "Judge this attempt on your own: redo the key steps, check the reasoning and the final "
        'result. Set "correct" to true only if you are confident the final answer is right.'
    )


def tests_prompt(task: Task, count: int) -> str:
    return (
        f"Here is a programming task:\n\n{task.prompt()}\n\n"
        f"Write up to {count} unit tests for a correct solution, covering typical inputs and "
        "edge cases. Do not solve the task. Each test must be a single line of the form "
        "`assert <call of the function> == <expected value>`, using the exact function name "
        "and signature the task asks for. Put all the tests in one ```python code block, one "
        "per line, and nothing else in it."
    )


def reflect_prompt(task: Task, attempt: str, evaluation: str) -> str:
    return (
        f"Task:\n{task.prompt()}\n\nAn attempt at it:\n{attempt.strip()}\n\n"
        f"This attempt was judged a failure. The evaluation:\n{evaluation.strip()}\n\n"
        "In a few sentences, work out why the attempt failed: name the concrete mistake or "
        "wrong assumption, and state a specific plan for what to do differently on the next "
        "attempt. Do not write a new full answer; write only the diagnosis and the plan."
    )


# --- the method ----------------------------------------------------------------------------------


@register_method("reflexion")
class Reflexion(Method):
    """Act, evaluate, reflect on failure; retry with the reflections (≤ 3T-1, code ≤ 2T calls)."""

    roles = (ACTOR, EVALUATOR, REFLECTOR)
    paper = "Shinn et al., arXiv 2303.11366"
    category = "single-agent trial-and-error with verbal memory (actor, evaluator, reflector)"
    calls = (
        "3t−1 if trial t passes the self-evaluation (2 to 3T−1, T = 5: 2–14); code tasks (self-"
        "written unit tests run in the sandbox): 2t (2–10)"
    )

    class Config(MethodConfig):
        max_trials: int = Field(5, ge=1)
        memory: int = Field(3, ge=1)
        max_tests: int = Field(6, ge=1)

    config: Config

    def structure(self) -> Topology:
        """The evaluator and the reflector read the actor's attempt, the reflector reads the
        evaluation, and the actor reads the reflections (the loop)."""
        edges = [(ACTOR, EVALUATOR), (ACTOR, REFLECTOR), (EVALUATOR, REFLECTOR), (REFLECTOR, ACTOR)]
        return Topology.from_edges(edges, name="reflexion")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        actor, evaluator, reflector = (ctx.agent(name) for name in (ACTOR, EVALUATOR, REFLECTOR))
        code_task = task.answer_type == "code"

        memory: deque[str] = deque(maxlen=cfg.memory)
        previous: tuple[str, str] | None = None  # code tasks: (latest program, its test results)
        tests: list[str] = []
        metadata: dict[str, Any] = {"evaluation": "tests" if code_task else "self"}
        parsed: list[bool] = []
        results: list[tuple[int, int]] = []
        attempt, passed, trial = "", False, 0
        for trial in range(1, cfg.max_trials + 1):
            r = trial - 1
            prompt = actor_prompt(task, list(memory), previous)
            attempt = (await actor.reply(prompt, round=r, remember=False)).content
            ctx.propose(attempt, round=r)
            if code_task:
                if trial == 1:  # written from the question alone, after the first attempt
                    said = await evaluator.reply(
                        tests_prompt(task, cfg.max_tests), round=0, kind="tests", remember=False
                    )
                    tests = parse_tests(said.content, cfg.max_tests)
                    metadata["tests"] = tests
                run = await run_tests(task, attempt, tests)
                ctx.post(EVALUATOR, run.feedback, round=r, kind="test_results")
                passed, evaluation = run.passed, run.feedback
                results.append(run.counts)
                code = extract_answer(attempt, "code", entry_point=task.entry_point)
                previous = (code, evaluation) if code is not None else None
            else:
                passed, evaluation = await self._judge(task, evaluator, attempt, r, parsed)
            if passed or trial == cfg.max_trials:
                break
            reflection = await reflector.reply(
                reflect_prompt(task, attempt, evaluation), round=r, remember=False
            )
            if reflection.content.strip():
                memory.append(reflection.content)
        metadata.update(trials=trial, passed=passed, reflections=list(memory))
        metadata.update({"test_results": results} if code_task else {"parsed": parsed})
        return Solution(answer=attempt, metadata=metadata)

    @staticmethod
    async def _judge(
        task: Task, evaluator: Agent, attempt: str, r: int, parsed: list[bool]
    ) -> tuple[bool, str]:
        said, judgement = await ask(
            evaluator,
            judge_prompt(task, attempt),
            Judgement,
            round=r,
            kind="critique",
            remember=False,
        )
        parsed.append(judgement is not None)
        if judgement is None:
            return False, said.content
        return judgement.correct, judgement.feedback or said.content
