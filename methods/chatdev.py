"""ChatDev: a virtual software company whose role pairs chat their way through a phase chain.

Qian, Liu, Liu, Chen, Dang, Li, Yang, Chen, Su, Cong, Xu, Li, Liu, Sun. "ChatDev: Communicative
Agents for Software Development". arXiv:2307.07924 (ACL 2024). Code: github.com/OpenBMB/ChatDev;
MASLab ``methods/chatdev/chatdev_srdd.py`` (SRDD only).

ChatDev runs a waterfall "chat chain": every phase is a dialogue between an instructor and an
assistant role that ends on a conclusion marker (``<INFO>``) or a turn cap, and hands its result
(here: the code) to the next phase. This is the chain REDUCED to what a function-level code task
(HumanEval, MBPP: ``answer_type == "code"``) needs. Every phase starts afresh: a role sees the
request, the current code and what its partner said in this phase, never earlier chats.

1. Coding (CTO instructs, Programmer writes; T = ``coding_turns``). The CTO's opening instruction
   is a fixed template (no call): the request, and "write the named function(s) in one
   ```python block". Turn t = 1..T: the programmer replies with code (its history is this chat).
   Unless t = T, the CTO (its history is this chat too) reads the reply and either ends the
   chat with ``<INFO> Finished`` or gives the next instruction.
2. Code review (Reviewer comments, Programmer modifies; ≤ m = ``review_cycles`` cycles). Cycle c:
   the reviewer reads the request and the current code and names the most important problem, or
   says ``<INFO> Finished``, which ends the phase. Otherwise the programmer reads the request,
   the code and the comments and writes the revised code.
3. Testing (Tester ↔ Programmer; ≤ n = ``test_cycles`` fixes). The examples the request shows
   (:func:`maslab.kit.code_tests.public_tests`: HumanEval's doctests, MBPP's shown assert; with
   none,
   the program only has to run without error) are run against the current code in the sandbox
   (:func:`maslab.kit.code_tests.run_tests`, no model call). If they pass, or n fixes were made, the
   phase ends. Otherwise the tester reads the request, the code and the test report and writes a
   diagnosis; the programmer reads all of that and writes the fixed code. The hidden tests that
   score the answer (``task.tests``) are never run and never shown.
4. The answer is the latest code, in a ```python block (what the ``code`` evaluator reads). A
   programmer reply with no code keeps the previous code.

LLM calls, C + R + E:

* coding C = 2t if the CTO ends the chat after the programmer's turn t < T, else 2T − 1;
* review R = 2c − 1 if the reviewer says ``<INFO> Finished`` in cycle c ≤ m, else 2m;
* testing E = 2f, f ≤ n the failing test runs that were followed by a fix (a tester diagnosis and
  a programmer fix each); the sandbox runs, f + 1 at most, call no model.

Defaults: 2 to 13 calls, with T = 1 (ChatDev's Coding phase) and m = n = 3 (MASLab's caps; the
official ChatDev config allows 10 review cycles and 3 test cycles).

Budget stop: the latest code (proposed whenever the programmer writes code).

What was left out, and why (the paper's chain on SRDD is DemandAnalysis, LanguageChoose,
Coding, CodeComplete, CodeReview, Test, EnvironmentDoc, Manual):

* DemandAnalysis (CEO ↔ CPO: the product's modality) and LanguageChoose (CEO ↔ CTO: the
  programming language): a function-level task fixes both (a Python function of a given
  signature), so there is nothing to decide; with them, the CEO and CPO roles go.
* GUI design and art (ChatDev's ``gui_design``, its image-making phases): no GUI exists here.
* CodeComplete (filling in unimplemented files of a multi-file project) and the multi-file
  layout itself (``main.py`` plus modules, files written under a project directory): the answer
  is one code block; an unfinished function is caught by review and testing instead.
* EnvironmentDoc (``requirements.txt``) and Manual (the user manual): they do not change the
  code, which alone is scored.
* Communicative dehallucination (the assistant asking back for details) is not prompted for.

Other deviations: prompts and role descriptions are our own wording. ChatDev's Test phase runs
``main.py`` and looks for errors; we run the request's own examples, as a function has no main
program (with no example, only whether the code runs is checked, as in ChatDev). ChatDev's error
summary is written by the programmer with the tester as instructor; here the tester writes it.
MASLab looks for the review's marker in the programmer's modified code (its check of the
reviewer's comment is commented out), so there a finished review still costs a modification
call; we end the phase on the reviewer's marker. ChatDev's multi-turn chats call the instructor
after the last turn too; our coding chat does not (that reply could not change the code). After
the n-th fix the tests run once more for ``metadata["passed"]`` (no model sees it). A reviewer or
CTO reply without the marker counts as comments or an instruction whatever it says (the prompts
name the marker, so a model that only echoes its prompt ends the phase). The method is for code
tasks: on another task the answer is still a code block. Code runs in :mod:`maslab.sandbox`,
not unsandboxed in the host as in ChatDev and MASLab.
"""

from __future__ import annotations

import re

from pydantic import Field

from maslab.core.agents import Agent
from maslab.core.answers import extract_answer
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.code_tests import public_tests, run_tests

CTO, PROGRAMMER, REVIEWER, TESTER = "cto", "programmer", "reviewer", "tester"
FINISHED = "<INFO> Finished"

_FINISHED = re.compile(r"<INFO>\s*Finished", re.IGNORECASE)

_COMPANY = (
    "You work at a software company whose staff are all AI agents; together you turn a "
    "customer's request into correct, working Python code."
)
_DUTIES = {
    CTO: (
        "You are the Chief Technology Officer. You instruct the programmer and check what they "
        "deliver against the customer's request."
    ),
    PROGRAMMER: (
        "You are a Programmer. You write complete, correct Python code that does exactly what "
        "the request asks, and you always give the whole code in one ```python block."
    ),
    REVIEWER: (
        "You are a Code Reviewer. You read code closely and find what would make it fail the "
        "customer's request: bugs, missing cases, wrong names or signatures, placeholders."
    ),
    TESTER: (
        "You are a Software Test Engineer. You read test reports and work out which mistake in "
        "the code causes each failure."
    ),
}


def role_system(role: str) -> str:
    return f"{_COMPANY}\n\n{_DUTIES[role]}"


def show_code(code: str | None) -> str:
    return f"```python\n{code}\n```" if code is not None else "(there is no code yet)"


def coding_instruction(task: Task) -> str:
    """The CTO's opening of the coding chat: a template, not a model call."""
    return (
        f"The customer's request:\n\n{task.prompt()}\n\n"
        "Write the Python code for it. This is a single-function job: write exactly the "
        "function(s) the request names, with the exact names and signatures it gives, plus the "
        "imports and helpers they need. No user interface, no input() reads, nothing that runs "
        "on import. Think the approach through briefly, then give the complete code in one "
        "```python block."
    )


def cto_prompt(reply: str, opening: str | None) -> str:
    """The CTO's turn in the coding chat: the programmer's latest reply (after its own opening
    instruction on the first turn)."""
    before = f"You instructed the programmer:\n\n{opening}\n\n" if opening is not None else ""
    return (
        f"{before}The programmer replied:\n\n{reply.strip()}\n\n"
        "Check the code against the request. If it is complete and correct, reply with exactly "
        f"{FINISHED}. Otherwise give the programmer your next instruction: say precisely what "
        "to change."
    )


def review_prompt(task: Task, code: str | None) -> str:
    return (
        f"The customer's request:\n\n{task.prompt()}\n\n"
        f"The programmer's current code:\n\n{show_code(code)}\n\n"
        "Review it: are the requested functions there with the exact names and signatures, with "
        "every import they need? Is anything left unimplemented? Is the logic right, including "
        "the edge cases the request implies? If you find problems, name the most important one "
        "and say exactly how to fix it. If the code needs no change at all, reply with exactly "
        f"{FINISHED}."
    )


def modify_prompt(task: Task, code: str | None, comments: str) -> str:
    return (
        f"The customer's request:\n\n{task.prompt()}\n\n"
        f"Your current code:\n\n{show_code(code)}\n\n"
        f"The code reviewer's comments:\n\n{comments.strip()}\n\n"
        "Revise the code to deal with the comments. Give the complete revised code in one "
        "```python block."
    )


def tester_prompt(task: Task, code: str | None, report: str) -> str:
    return (
        f"The customer's request:\n\n{task.prompt()}\n\n"
        f"The programmer's current code:\n\n{show_code(code)}\n\n"
        "We ran the code in a sandbox against the examples the request shows. The test "
        f"report:\n\n{report.strip()}\n\n"
        "Explain what in the code causes each failure and how it must change. Do not write the "
        "whole program."
    )


def fix_prompt(task: Task, code: str | None, report: str, diagnosis: str) -> str:
    return (
        f"The customer's request:\n\n{task.prompt()}\n\n"
        f"Your current code:\n\n{show_code(code)}\n\n"
        "It was run against the examples the request shows. The test report:\n\n"
        f"{report.strip()}\n\n"
        f"The test engineer's diagnosis:\n\n{diagnosis.strip()}\n\n"
        "Fix the code so that the examples pass and the request is met. Give the complete fixed "
        "code in one ```python block."
    )


def finished(text: str) -> bool:
    """Whether a reply holds the phase's conclusion marker."""
    return _FINISHED.search(text) is not None


@register_method("chatdev")
class ChatDev(Method):
    """Coding chat, code review and sandboxed testing, phase by phase; the latest code wins."""

    roles = (CTO, PROGRAMMER, REVIEWER, TESTER)
    paper = "Qian et al., arXiv 2307.07924 (ChatDev)"
    category = "software-company phase chain (role-pair chats; review, sandboxed testing)"
    calls = (
        "coding 2t if the CTO ends it after turn t < T, else 2T−1; + review 2c−1 if the "
        "reviewer finishes in cycle c ≤ m, else 2m; + testing 2f (f ≤ n failing runs fixed); "
        "defaults T = 1, m = n = 3: 2–13"
    )

    class Config(MethodConfig):
        coding_turns: int = Field(1, ge=1)
        """T: programmer turns of the coding chat (ChatDev's Coding phase: 1)."""
        review_cycles: int = Field(3, ge=0)
        """m: comment-and-modify cycles of code review (MASLab: 3; ChatDev's config: 10)."""
        test_cycles: int = Field(3, ge=0)
        """n: fixes after failing tests (ChatDev's and MASLab's Test: 3)."""

    config: Config

    def structure(self) -> Topology:
        """The coding chat (CTO ↔ programmer), review (reviewer ↔ programmer) and testing
        (tester ↔ programmer)."""
        partners = (CTO, REVIEWER, TESTER)
        edges = [edge for p in partners for edge in ((p, PROGRAMMER), (PROGRAMMER, p))]
        return Topology.from_edges(edges, name="chatdev")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        state = _Code(ctx, task.entry_point)

        def member(role: str) -> Agent:  # a fresh chat: each phase starts with no history
            return ctx.agent(role, system=role_system(role))

        # 1. coding: the CTO's templated opening, then programmer turns and CTO replies
        programmer, cto = member(PROGRAMMER), member(CTO)
        opening = coding_instruction(task)
        ctx.post(CTO, opening, round=0, kind="instruction", metadata={"phase": "coding"})
        instruction, cto_finished, turn = opening, False, 0
        for turn in range(1, cfg.coding_turns + 1):
            said = await programmer.reply(instruction, round=turn - 1, metadata={"phase": "coding"})
            state.update(said.content, round=turn - 1)
            if turn == cfg.coding_turns:
                break
            first = opening if turn == 1 else None
            instruction = (await cto.reply(cto_prompt(said.content, first), round=turn - 1)).content
            if finished(instruction):
                cto_finished = True
                break
        r = turn

        # 2. code review: reviewer comments, programmer modifies, until the reviewer finishes
        reviews, review_finished = 0, False
        for _ in range(cfg.review_cycles):
            comments = await member(REVIEWER).reply(
                review_prompt(task, state.code), round=r, kind="critique"
            )
            reviews += 1
            if finished(comments.content):
                review_finished = True
                break
            said = await member(PROGRAMMER).reply(
                modify_prompt(task, state.code, comments.content),
                round=r,
                metadata={"phase": "review"},
            )
            state.update(said.content, round=r)
            r += 1

        # 3. testing: run the request's examples in the sandbox; on failure diagnose and fix
        tests = public_tests(task)
        results: list[tuple[int, int]] = []
        passed = False
        for cycle in range(cfg.test_cycles + 1):
            run = await run_tests(task, state.answer, tests)
            results.append(run.counts)
            passed = run.passed
            ctx.post(TESTER, run.feedback, round=r, kind="test_results")
            if passed or cycle == cfg.test_cycles:
                break
            diagnosis = await member(TESTER).reply(
                tester_prompt(task, state.code, run.feedback), round=r, kind="critique"
            )
            said = await member(PROGRAMMER).reply(
                fix_prompt(task, state.code, run.feedback, diagnosis.content),
                round=r,
                metadata={"phase": "testing"},
            )
            state.update(said.content, round=r)
            r += 1

        return Solution(
            answer=state.answer,
            metadata={
                "coding_turns": turn,
                "cto_finished": cto_finished,
                "reviews": reviews,
                "review_finished": review_finished,
                "public_tests": tests,
                "test_results": results,
                "fixes": len(results) - 1,
                "passed": passed,
                "replies_without_code": state.missing,
            },
        )


class _Code:
    """The team's latest code: the answer, proposed whenever the programmer writes code."""

    def __init__(self, ctx: Context, entry_point: str | None) -> None:
        self.ctx = ctx
        self.entry_point = entry_point
        self.code: str | None = None
        self.last_reply = ""
        self.missing = 0

    @property
    def answer(self) -> str:
        """The latest code in a ```python block; before any, the programmer's last reply."""
        return show_code(self.code) if self.code is not None else self.last_reply

    def update(self, reply: str, *, round: int) -> None:
        self.last_reply = reply
        code = extract_answer(reply, "code", entry_point=self.entry_point)
        if code is None:
            self.missing += 1
            return
        self.code = code
        self.ctx.propose(self.answer, round=round)
