"""MACM: multi-agent condition mining (Thinker, Judge, Executor) for mathematical problems.

Lei, Zhang, Zuo, Payani, Ding. "MACM: Utilizing a Multi-Agent System for Condition Mining in
Solving Complex Mathematical Problems". arXiv:2404.04735 (NeurIPS 2024). Code:
github.com/bin123apple/MACM.

Algorithm (T mining rounds, n Judge checks per new condition, V_min to V_max attempts). An
attempt a has agents of its own: ``thinker_a``, ``judge_a`` and ``executor_a``.

1. The Thinker reads the problem and writes its conditions (what the problem states, taken
   from its text without deduction) and its objective (what it asks for): the condition list.
2. Condition mining, round i = 1..T:
   a. The Thinker reads the condition list and the objective (no longer the problem) and
      proposes one new condition that follows directly from known ones, with the conditions
      it rests on and its reason.
   b. The Judge checks the proposal against the condition list, up to n times, one check after
      another; the first rejection discards it. A proposal no check rejects is added to the
      list (verified conditions only).
   c. The Judge decides whether the objective can now be reached from the condition list (or
      is one of its conditions). If so, mining stops.
3. The Thinker designs the steps from the condition list to the objective.
4. The Executor carries out the steps on the condition list, then, in the same conversation,
   states the final answer in the form the task asks for: the attempt's answer.
5. Voting: V_min attempts run concurrently; the answer is the majority vote over their
   answers (in attempt order; ties go to the earliest). While two or more answers share the
   most votes and fewer than V_max attempts have run, one more attempt runs and votes.

Each Thinker and Judge call is a fresh conversation (the official code opens a new thread for
each); the Executor's two calls are one conversation.

LLM calls: per attempt 4 + Σ_{i=1..k} (2 + j_i): the analysis, the plan and the Executor's two
calls, and per mining round one proposal, j_i ≤ n checks (the first rejection ends them; 0 for
a proposal that cannot be read) and one sufficiency check; k ≤ T (mining ends at the first
round judged sufficient). A run is the sum over its V attempts, V_min ≤ V ≤ V_max; with readable
proposals an attempt makes 7 to 4 + T·(2 + n) calls. Default (T = 5, n = 1, V = 5..7): 35 to 133.

Budget stop: the majority vote over the attempts that have an answer so far, in attempt order;
an attempt has one once its Executor has carried out the steps (that worked text, until its
final answer replaces it). Before any Executor has done so there is no answer: it is empty.

Defaults (the official code's ``main.py``): T = 5 (``times``, "the upper limit of the mining
times"), n = 1 (``n``, "verification times"), V_min = 5 and V_max = 7 (``min_voters``,
``max_voters``).

Deviations:

- The prompts are our own words, zero-shot (the official ones hold worked examples). Every
  Thinker and Judge reply is a JSON :class:`~maslab.kit.structured.Reply` (conditions and
  objective, new condition, verdict, sufficiency, plan) asked in one call, where the official
  code adds a follow-up turn in the same thread for the short form ("Based on Known condition
  ..., we can get: ...", "True" or "False"): one call for each proposal, check and sufficiency
  check here, two model runs each there.
- No code interpreter: the official agents run on the OpenAI Assistants API with its code
  interpreter and are told to compute with code; ours compute in text.
- The Executor's final call shows the task's options and answer-format instruction, instead
  of asking for a float in ``\\boxed{}``; like there, it never sees the problem's text.
- Unreadable replies (the official code has no JSON): an analysis without conditions takes the
  problem's text as its one condition (and "answer the problem's question" as the objective
  if it has none); a proposal without a condition is discarded unjudged; a verdict that
  cannot be read rejects the proposal, and a sufficiency check that cannot be read says "not
  yet" (the official code reads any reply without the word "False" as True); a plan without
  steps becomes one step, "reach the objective from the known conditions"; a final reply
  without a readable answer gives way to the worked text, if that has one. Each is recorded
  in the attempt's metadata (``unreadable``).
- The vote compares extracted, normalised answers (:mod:`maslab.kit.aggregation`); an attempt
  without a readable answer abstains (the official code counts "No match found" as an answer).
  The first V_min attempts run concurrently (one after another there); a tie adds attempts
  one at a time, as there.
- The official code also defines a Judge check of each initial condition against the problem
  and a Thinker fix for a wrong one; its main loop calls neither, and neither do we.
- Sampling is the run's: the official code's Assistants-API calls pass no temperature.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Annotated

from pydantic import Field, model_validator

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import Decision, majority_decision, propose_vote
from maslab.kit.parsing import Flag, Text
from maslab.kit.plans import Plan, listed, steps_of
from maslab.kit.structured import Reply, ask

THINKER, JUDGE, EXECUTOR = "thinker", "judge", "executor"
THINKER_SYSTEM = (
    "You are the Thinker of a team that solves mathematical problems. You read a problem "
    "closely, set out what it states and what it asks, derive new facts from known ones one "
    "careful step at a time, and plan solutions."
)
JUDGE_SYSTEM = (
    "You are the Judge of a team that solves mathematical problems. You are strict: you redo "
    "every calculation yourself and accept a statement only when it really follows from what "
    "is known."
)
EXECUTOR_SYSTEM = (
    "You are the Executor of a team that solves mathematical problems. You carry out the steps "
    "you are given on the known conditions, computing every value carefully and showing your "
    "work."
)
DEFAULT_OBJECTIVE = "Answer the problem's question."
DEFAULT_STEP = "Reach the objective from the known conditions."


class Analysis(Reply):
    """The Thinker's reading of the problem: its conditions and its objective."""

    conditions: list[Annotated[Text, Field(description="a condition the problem states")]]
    objective: Text = Field(description="what the problem asks for")


class NewCondition(Reply):
    """A condition the Thinker derives from the known ones."""

    based_on: Text = Field("", description="the numbers of the known conditions it follows from")
    reason: Text = Field("", description="why it follows from them, with any calculation")
    condition: Text = Field(description="the new condition, stated on its own")


class Verdict(Reply):
    """The Judge's check of a new condition."""

    reasoning: Text = Field("", description="your check, calculations redone")
    correct: Flag


class Sufficiency(Reply):
    """The Judge's decision whether the known conditions reach the objective."""

    reasoning: Text = Field("", description="how the objective follows, or what is missing")
    sufficient: Flag


def problem_text(task: Task) -> str:
    """The problem as the Thinker reads it: the question and its options, without the answer
    format (which only the Executor's final call needs)."""
    return task.model_copy(update={"instruction": ""}).prompt()


def answer_format(task: Task) -> str:
    """What the final answer must look like: the task's options and its format instruction."""
    if task.choices:
        return task.model_copy(update={"question": "The options:"}).prompt()
    return task.instruction.strip()


def known(conditions: Sequence[str], objective: str) -> str:
    return f"Known conditions:\n{listed(conditions)}\n\nObjective:\n{objective}"


def analysis_prompt(task: Task) -> str:
    return (
        f"Problem:\n{problem_text(task)}\n\n"
        "Before anyone solves this problem, set out its conditions and its objective. The "
        "conditions are the facts and quantities the problem states, each taken directly from "
        "its text: no deduction or calculation of your own. The objective is the one thing the "
        "problem asks for. Do not solve the problem."
    )


def propose_prompt(conditions: Sequence[str], objective: str) -> str:
    return (
        f"{known(conditions, objective)}\n\n"
        "Derive one new condition that follows directly from the known conditions and brings "
        "the objective closer: the most immediate consequence, not a leap over several steps. "
        "Use only the known conditions, compute any value carefully, and say which known "
        "conditions it follows from."
    )


def statement(proposal: NewCondition) -> str:
    """A proposal as the Judge reads it: its basis, the condition and its reason."""
    basis = f"From known conditions {proposal.based_on}: " if proposal.based_on else ""
    reason = f"\nReason given: {proposal.reason}" if proposal.reason else ""
    return f"{basis}{proposal.condition}{reason}"


def check_prompt(conditions: Sequence[str], proposal: NewCondition) -> str:
    return (
        f"Known conditions:\n{listed(conditions)}\n\nStatement:\n{statement(proposal)}\n\n"
        "Check carefully whether the statement is correct: it must follow from the known "
        "conditions, and every calculation it relies on must be right (redo each one)."
    )


def sufficiency_prompt(conditions: Sequence[str], objective: str) -> str:
    return (
        f"{known(conditions, objective)}\n\n"
        "Decide whether the objective can now be reached from the known conditions alone, or "
        "is already one of them, so that only carrying out calculations remains."
    )


def plan_prompt(conditions: Sequence[str], objective: str) -> str:
    return (
        f"{known(conditions, objective)}\n\n"
        "Design one solution that reaches the objective from the known conditions: a short "
        "sequence of concrete steps, each a calculation or deduction that later steps build on."
    )


def execute_prompt(conditions: Sequence[str], objective: str, steps: Sequence[str]) -> str:
    return (
        f"{known(conditions, objective)}\n\nSteps:\n{listed(steps)}\n\n"
        "Carry out the steps in order on the known conditions, computing every value carefully "
        "and showing your work, until you reach the objective."
    )


def final_prompt(task: Task) -> str:
    form = answer_format(task) or "State it clearly."
    return f"Now give the final answer to the objective, as your work above found it.\n\n{form}"


@dataclass
class Round:
    """One mining round: the proposed condition (None: unreadable), the Judge's verdicts on it
    in order (None: unreadable, a rejection), whether it was added, and the sufficiency
    decision (None: unreadable, not yet)."""

    proposal: str | None
    verdicts: list[bool | None] = field(default_factory=list)
    accepted: bool = False
    sufficient: bool | None = None


@dataclass
class Attempt:
    """One attempt: what it mined, planned and answered, and its unreadable replies."""

    index: int
    objective: str
    given: list[str]
    added: list[str] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    answer: str = ""
    unreadable: list[str] = field(default_factory=list)


def tied(decision: Decision) -> bool:
    """Whether two or more answers share the most votes."""
    counts = list(decision.vote.counts.values())
    return counts.count(max(counts, default=0)) > 1


@register_method("macm")
class MACM(Method):
    """Thinker, Judge and Executor mine verified conditions, plan and compute; several
    attempts vote."""

    roles = (THINKER, JUDGE, EXECUTOR)
    paper = "Lei et al., arXiv 2404.04735 (MACM)"
    category = "condition mining (thinker, judge, executor) + vote"
    calls = (
        "per attempt 4 + Σ_{i≤k} (2 + j_i), k ≤ T mining rounds, j_i ≤ n checks; V_min ≤ V ≤ "
        "V_max attempts (more than V_min only on a tied vote); default T = 5, n = 1, V = 5..7: "
        "35–133"
    )

    class Config(MethodConfig):
        mining_rounds: int = Field(
            5, ge=1, description="T: condition-mining rounds per attempt at most (official: 5)."
        )
        checks: int = Field(
            1,
            ge=1,
            description="n: Judge checks of each new condition; the first rejection discards it "
            "(official: 1).",
        )
        min_voters: int = Field(
            5, ge=1, description="V_min: attempts that always run and vote (official: 5)."
        )
        max_voters: int = Field(
            7,
            ge=1,
            description="V_max: attempts at most; more than V_min run only while the vote is "
            "tied (official: 7).",
        )

        @model_validator(mode="after")
        def _voters(self) -> MACM.Config:
            if self.max_voters < self.min_voters:
                raise ValueError(f"max_voters {self.max_voters} < min_voters {self.min_voters}")
            return self

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        v = self.config.max_voters
        return numbered(THINKER, v) + numbered(JUDGE, v) + numbered(EXECUTOR, v)

    def structure(self) -> Topology:
        """Per attempt: the Thinker's proposals go to the Judge, its verdicts back to the
        Thinker, and the Thinker's conditions and plan to the Executor."""
        edges = [
            edge
            for a in range(1, self.config.max_voters + 1)
            for edge in (
                (f"{THINKER}_{a}", f"{JUDGE}_{a}"),
                (f"{JUDGE}_{a}", f"{THINKER}_{a}"),
                (f"{THINKER}_{a}", f"{EXECUTOR}_{a}"),
            )
        ]
        return Topology.from_edges(edges, name="macm")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        answers: dict[int, str] = {}

        def offer(index: int, answer: str) -> None:
            """An attempt's answer so far; the vote over all of them, in attempt order, is the
            best answer so far."""
            answers[index] = answer
            shown = sorted(answers)
            propose_vote(ctx, task, [answers[i] for i in shown], attempts=shown)

        first = [self.attempt(task, ctx, a, offer) for a in range(1, cfg.min_voters + 1)]
        attempts = list(await asyncio.gather(*first))
        decision = majority_decision(task, [a.answer for a in attempts])
        while tied(decision) and len(attempts) < cfg.max_voters:
            attempts.append(await self.attempt(task, ctx, len(attempts) + 1, offer))
            decision = majority_decision(task, [a.answer for a in attempts])
        return Solution(
            answer=decision.response,
            metadata={
                "voters": len(attempts),
                "votes": decision.vote.counts,
                "extracted": list(decision.extracted),
                "tied": tied(decision),
                "attempts": [asdict(a) for a in attempts],
                "unreadable": sum(len(a.unreadable) for a in attempts),
            },
        )

    async def attempt(
        self, task: Task, ctx: Context, index: int, offer: Callable[[int, str], None]
    ) -> Attempt:
        """Attempt ``index``: analyse, mine conditions, plan, execute; its answer is offered to
        the vote as soon as the Executor has worked and again once it has answered."""
        thinker = ctx.agent(f"{THINKER}_{index}", role=THINKER, system=THINKER_SYSTEM)
        judge = ctx.agent(f"{JUDGE}_{index}", role=JUDGE, system=JUDGE_SYSTEM)
        executor = ctx.agent(f"{EXECUTOR}_{index}", role=EXECUTOR, system=EXECUTOR_SYSTEM)
        prompt = analysis_prompt(task)
        _, analysis = await ask(thinker, prompt, Analysis, round=0, kind="analysis", remember=False)
        given = [c for c in analysis.conditions if c] if analysis is not None else []
        objective = analysis.objective if analysis is not None else ""
        record = Attempt(index, objective or DEFAULT_OBJECTIVE, given or [task.question.strip()])
        if not given:
            record.unreadable.append("analysis")
        elif not objective:
            record.unreadable.append("objective")

        conditions = list(record.given)
        for r in range(1, self.config.mining_rounds + 1):
            if (await self.mine(thinker, judge, conditions, record, r)).sufficient:
                break

        last = len(record.rounds) + 1
        prompt = plan_prompt(conditions, record.objective)
        _, plan = await ask(thinker, prompt, Plan, round=last, kind="plan", remember=False)
        record.steps = steps_of(plan) or [DEFAULT_STEP]
        if not steps_of(plan):
            record.unreadable.append("plan")

        prompt = execute_prompt(conditions, record.objective, record.steps)
        work = (await executor.reply(prompt, round=last, kind="execution")).content
        offer(index, work)
        final = (await executor.reply(final_prompt(task), round=last, kind="answer")).content
        record.answer = final
        if task.answer_in(final) is None:
            record.unreadable.append("answer")
            if task.answer_in(work) is not None:
                record.answer = work
        offer(index, record.answer)
        return record

    async def mine(
        self, thinker: Agent, judge: Agent, conditions: list[str], record: Attempt, r: int
    ) -> Round:
        """Mining round ``r``: a proposal, the Judge's checks of it (the first rejection ends
        them; an accepted proposal joins ``conditions``), then the sufficiency check."""
        prompt = propose_prompt(conditions, record.objective)
        _, proposal = await ask(
            thinker, prompt, NewCondition, round=r, kind="proposal", remember=False
        )
        if proposal is None or not proposal.condition:
            mined = Round(None)
            record.unreadable.append(f"proposal {r}")
        else:
            mined = Round(proposal.condition)
            for _ in range(self.config.checks):
                prompt = check_prompt(conditions, proposal)
                _, verdict = await ask(
                    judge, prompt, Verdict, round=r, kind="check", remember=False
                )
                mined.verdicts.append(verdict.correct if verdict is not None else None)
                if verdict is None:
                    record.unreadable.append(f"verdict {r}")
                if mined.verdicts[-1] is not True:
                    break
            mined.accepted = all(v is True for v in mined.verdicts)
            if mined.accepted:
                conditions.append(proposal.condition)
                record.added.append(proposal.condition)
        record.rounds.append(mined)
        prompt = sufficiency_prompt(conditions, record.objective)
        _, judged = await ask(
            judge, prompt, Sufficiency, round=r, kind="sufficiency", remember=False
        )
        mined.sufficient = judged.sufficient if judged is not None else None
        if judged is None:
            record.unreadable.append(f"sufficiency {r}")
        return mined
