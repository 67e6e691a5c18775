"""AgentVerse: recruit experts, discuss vertically (solver and critics), evaluate, repeat.

Chen, Su, Zuo, Yang, Yuan, Chan, Yu, Lu, Hung, Qian, Qin, Cong, Xie, Liu, Sun, Zhou.
"AgentVerse: Facilitating Multi-Agent Collaboration and Exploring Emergent Behaviors".
arXiv:2308.10848 (ICLR 2024). Code: github.com/OpenBMB/AgentVerse; MASLab's
``methods/agentverse`` (cnt_agents 2, max_turn 3, max_criticizing_rounds 3 are our defaults).

Algorithm (N = ``experts``, R = ``max_criticizing_rounds``, M = ``max_turns``). Each turn:

1. Expert recruitment: the recruiter reads the question (and, after the first turn, the
   evaluator's advice) and describes N experts as JSON (a numbered or bulleted list is read
   too). The first expert is the solver, the others are the critics ``critic_1`` ..
   ``critic_{N-1}``; each agent's system message says which expert it is.
2. Collaborative decision-making, vertical structure: the solver drafts a solution (after the
   first turn it also sees the previous turn's solution and the evaluator's advice). Then, in
   critique round k = 1..R, every critic, independently and concurrently, reads the question
   and the current solution only, works the problem itself, criticises the solution, and ends
   with ``[Agree]`` if it agrees with it. If every critic agrees, the discussion ends.
   Otherwise the solver reads its current solution and the reviews of the critics that did not
   agree (in critic order) and writes a revised solution.
3. Action execution: for these question-answering tasks the solution itself is the action.
4. Evaluation: the evaluator reads the question, the experts and the solution and returns JSON
   (``correct``, ``advice``). If it judges the solution correct, the method stops; otherwise
   the next turn recruits again, told the advice.

The answer is the last solution the solver wrote.

``context`` chooses what the solver and the critics read. ``"current"`` (the default): as
above, critics the current solution only, the solver its current solution and this round's
disagreeing reviews (a new turn's draft: the previous solution and the advice). ``"shared"``
(MASLab's): one discussion history per task, across its turns, holds every solution the solver
writes, every review that does not agree and, at the start of each later turn, the evaluator's
advice, each under its author's expert description; the solver (draft and revisions) reads
its last ``solver_window`` items (none for the first draft), every critic the last
``critic_window`` items as of the latest solution (that solution last).

LLM calls: a turn whose discussion ran c critique rounds costs 3 + (N-1)·c + r, with r = c - 1
revisions if all critics agreed in round c, else r = c = R; so between N + 2 (consensus at
once) and N·R + 3 per turn. The method stops after the first turn the evaluator passes, else
after M turns: between N + 2 and M·(N·R + 3) calls in all (defaults N = 2, R = 3, M = 3: 4 to
27; ``preset=maslab`` the same: 4 to 27).

Budget stop: the latest solution (every draft and revision is proposed as it is written).

Native structured output: the recruiter's and the evaluator's replies are requested with their
JSON schemas where the model handle supports it (same prompts, same calls).

``preset=maslab`` (``--config preset=maslab``) runs MASLab's protocol (``methods/agentverse``
at commit 74265c7: ``agentverse_main.py``, ``configs/config_main.yaml``; its ``_mgsm`` and
``_humaneval`` configs are the same) with our prompts, for the settings left at their
defaults: ``experts=2`` (``cnt_agents: 2``), ``max_turns=3`` (``max_turn: 3``),
``max_criticizing_rounds=3`` (``max_criticizing_rounds: 3``), all three our defaults already,
and ``context="shared"`` with ``solver_window=5`` and ``critic_window=3``
(``group_vertical_solver_first``: ``max_history_solver = 5``, ``max_history_critic = 3`` over
its ``self.history``). At most 27 calls, as in MASLab: (1 + 1 + 3·(1 + 1) + 1)·3. MASLab never
clears its list of disagreeing reviews between critique rounds (``nonempty_reviews``), so once
a critic has disagreed the discussion runs all R rounds even when every critic agrees later;
that bug is not copied (see Deviations): here a later unanimous round ends the discussion, so
a turn may cost fewer calls than MASLab's (6 instead of 9 at N = 2 when the critic disagrees
in round 1 and agrees in round 2), its answer is the solution the critics agreed with rather
than a further revision, and the numbers may differ accordingly.

Deviations: prompts are our own and task-generic. Every piece of state (experts, advice, the
discussion) is local to one task, as in MASLab's runs (it keeps the history and the advice on
the method instance, and its inference script builds a new instance per sample). The consensus
check counts the agreements of the current round only: MASLab never clears its list of
disagreeing reviews between rounds, so once any critic has disagreed its early stop can no
longer fire. A recruiter reply that names fewer than N experts is filled up with generic ones
instead of failing the task (MASLab raises); an evaluator reply that cannot be read counts as
"not correct" with its whole text as the advice. By default each agent sees explicit windows
instead of MASLab's last-k history items (``context="shared"`` has those): critics see the
current solution only, the solver its current solution and the latest disagreeing reviews. The
history items are labelled blocks of one prompt, not chat messages as in MASLab. The evaluator
judges every turn, the last one included, as in MASLab: on the last turn the verdict is
recorded but cannot change the answer. Only the vertical structure is implemented (the paper's
horizontal one and tool execution are not).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.parsing import Text, as_text
from maslab.kit.structured import Reply, ask

RECRUITER, SOLVER, CRITIC, EVALUATOR = "recruiter", "solver", "critic", "evaluator"

GENERIC_EXPERTS = (
    "a careful generalist who solves problems step by step",
    "a meticulous reviewer who checks every step of a solution for errors",
    "a domain specialist in the subject of the question",
)
PRESETS: dict[str, dict[str, Any]] = {
    "maslab": {
        "experts": 2,
        "max_turns": 3,
        "max_criticizing_rounds": 3,
        "context": "shared",
        "solver_window": 5,
        "critic_window": 3,
    },
}
EVALUATOR_LABEL = "Evaluator"
_AGREE = re.compile(r"\[\s*agree\s*\]", re.IGNORECASE)
_LIST_ITEM = re.compile(r"^[ \t>]*(?:\d+[.):]|[-*•])[ \t]+(.+?)[ \t]*$", re.MULTILINE)
# "Correctness: 1" in a reply without JSON; not the shape "correct": true or false it was shown
_CORRECT_TEXT = re.compile(
    r"\bcorrect(?:ness)?\b[\"'*]*\s*[:=]\s*[\"']?(1|true|yes)\b(?!\s+or\b)", re.I
)


def _flag(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"true", "yes", "1", "correct"}
    return value is True or value == 1


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ValueError("a list of strings")
    return [as_text(item) for item in value if as_text(item)]


class Recruits(Reply):
    """The recruiter's JSON reply: one description per expert."""

    json_name = "experts"

    experts: Annotated[
        list[Annotated[str, Field(description="one expert's description")]],
        BeforeValidator(_texts),
    ]


class Verdict(Reply):
    """The evaluator's JSON reply: whether the solution is correct, and advice."""

    correct: Annotated[bool, BeforeValidator(_flag)]
    advice: Text = Field(
        "",
        description="what is wrong and how to fix it, or why it is right, and which kinds of "
        "experts the team would need to do better",
    )


def recruit_prompt(task: Task, experts: int, advice: str | None) -> str:
    text = (
        f"You are putting together a small team of {experts} experts to work on the problem "
        f"below. One of them will write the solution and the others will review it.\n\n"
        f"Problem:\n{task.prompt()}\n\n"
    )
    if advice:
        text += (
            "A previous team already tried and its solution was judged not good enough. "
            f"The reviewer's advice:\n{advice.strip()}\n\n"
        )
    return text + (
        f"Describe the {experts} experts whose knowledge and skills best fit the problem, "
        "one short description each (field, speciality, what they would check), the one who "
        "writes the solution first."
    )


def solver_system(expert: str) -> str:
    return (
        f"You are {expert}. You solve the problem you are given on your own, with what is in "
        "front of you, without asking for more information."
    )


def critic_system(expert: str) -> str:
    return f"You are {expert}, reviewing a proposed solution as part of a team."


def draft_prompt(task: Task, previous: str | None, advice: str | None) -> str:
    text = f"Problem:\n{task.prompt()}\n\n"
    if previous is not None:
        text += (
            f"An earlier solution to this problem:\n{previous.strip()}\n\n"
            f"It was judged not good enough. The reviewer's advice:\n{(advice or '').strip()}"
            "\n\n"
        )
    return text + (
        "Write a correct solution to the problem: reason step by step, then state your final "
        "answer as the problem asks."
    )


CRITIQUE_ASK = (
    "First solve the problem yourself, step by step. Then compare your result and reasoning "
    "with the proposed solution and point out every mistake or gap in it; give criticism "
    "only, do not rewrite the solution. If its final answer matches yours and its "
    "reasoning holds, end your reply with the token [Agree]."
)


def critique_prompt(task: Task, solution: str) -> str:
    return f"Problem:\n{task.prompt()}\n\nProposed solution:\n{solution.strip()}\n\n{CRITIQUE_ASK}"


def discussion(items: Sequence[tuple[str, str]]) -> str:
    """History items (author, text), oldest first, as labelled blocks."""
    return "\n\n".join(f"[{who}]\n{text.strip()}" for who, text in items)


def shared_solve_prompt(task: Task, items: Sequence[tuple[str, str]]) -> str:
    return (
        f"Problem:\n{task.prompt()}\n\nThe latest part of your team's discussion, oldest "
        "first (solutions, reviews that disagreed with them, the evaluator's advice):\n\n"
        f"{discussion(items)}\n\nTaking the discussion into account, write a correct solution "
        "to the problem: reason step by step, then state your final answer as the problem asks."
    )


def shared_critique_prompt(task: Task, items: Sequence[tuple[str, str]]) -> str:
    return (
        f"Problem:\n{task.prompt()}\n\nThe latest part of your team's discussion, oldest "
        "first; its last solution is the proposed solution you review:\n\n"
        f"{discussion(items)}\n\n{CRITIQUE_ASK}"
    )


def revise_prompt(task: Task, solution: str, reviews: list[tuple[str, str]]) -> str:
    shown = "\n\n".join(f"--- Review by {who} ---\n{text.strip()}" for who, text in reviews)
    return (
        f"Problem:\n{task.prompt()}\n\nYour current solution:\n{solution.strip()}\n\n"
        f"Reviewers disagreed with it:\n\n{shown}\n\n"
        "Weigh their criticism against your own reasoning, fix what is wrong, and write a "
        "complete revised solution: reason step by step, then state your final answer as the "
        "problem asks."
    )


def evaluate_prompt(task: Task, experts: list[str], solution: str) -> str:
    team = "\n".join(f"- {expert}" for expert in experts)
    return (
        f"Problem:\n{task.prompt()}\n\nThe team that worked on it:\n{team}\n\n"
        f"Their solution:\n{solution.strip()}\n\n"
        "Judge whether the solution is correct: check its reasoning and its final answer."
    )


def read_experts(reply: str, count: int) -> tuple[list[str], str]:
    """Exactly ``count`` expert descriptions from the recruiter's ``reply`` and how they were
    read: ``"json"``, ``"text"`` (a list), or ``"fallback"`` (generic experts fill in)."""
    recruits = Recruits.parse(reply)
    how = "json"
    found = recruits.experts if recruits is not None else []
    if not found:
        found = [item.strip(" *_") for item in _LIST_ITEM.findall(reply)]
        found = [item for item in found if item]
        how = "text"
    if len(found) < count:
        how = "fallback"
        generic = [e for e in GENERIC_EXPERTS if e not in found]
        found += [generic[i % len(generic)] for i in range(count - len(found))]
    return found[:count], how


def read_verdict(reply: str) -> tuple[Verdict, bool]:
    """The evaluator's verdict and whether its JSON was read; unread, it is "correct" only if
    the text says so (``Correctness: 1``), with the whole reply as the advice."""
    verdict = Verdict.parse(reply)
    if verdict is not None:
        return verdict, True
    return Verdict(correct=bool(_CORRECT_TEXT.search(reply)), advice=reply), False


def agrees(review: str) -> bool:
    return bool(_AGREE.search(review))


@register_method("agentverse")
class AgentVerse(Method):
    """Recruit N experts; a solver and N-1 critics discuss; an evaluator decides (≤ 27 calls)."""

    roles = (RECRUITER, SOLVER, CRITIC, EVALUATOR)
    paper = "Chen et al., arXiv 2308.10848 (AgentVerse)"
    category = "expert recruitment + vertical discussion (solver, critics) + evaluator loop"
    calls = (
        "per turn 3 + (N−1)·c + r (c ≤ R critique rounds, r revisions: c−1 on `[Agree]` "
        "consensus, else R); turns stop at the evaluator's pass, ≤ M; N + 2 to M·(N·R + 3) "
        "(default N=2, R=3, M=3: 4–27; `preset=maslab`: 4–27)"
    )

    class Config(MethodConfig):
        presets: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
        preset: Literal["maslab"] | None = None
        """Another protocol's values (``PRESETS``) for the settings left at their defaults."""
        experts: int = Field(2, ge=2)
        """N: experts recruited per turn, the solver and N - 1 critics (MASLab cnt_agents)."""
        max_turns: int = Field(3, ge=1)
        """M: recruit-discuss-evaluate turns at most (MASLab max_turn)."""
        max_criticizing_rounds: int = Field(3, ge=1)
        """R: critique rounds per discussion at most."""
        context: Literal["current", "shared"] = Field(
            "current",
            description="what the solver and critics read: 'current' (the solution under "
            "review, and its disagreeing reviews) or 'shared' (MASLab's: the last items of "
            "the task's discussion history)",
        )
        solver_window: int = Field(
            5, ge=1, description="history items the solver reads with context=shared"
        )
        critic_window: int = Field(
            3, ge=1, description="history items a critic reads with context=shared"
        )

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered(CRITIC, self.config.experts - 1)

    def structure(self) -> Topology:
        """The recruiter describes every expert; the solver and each critic read each other;
        the evaluator reads the solution and advises the recruiter and the solver (next turn)."""
        critics = self.agent_names()
        edges = [(RECRUITER, name) for name in (SOLVER, *critics, EVALUATOR)]
        edges += [edge for critic in critics for edge in ((SOLVER, critic), (critic, SOLVER))]
        edges += [(SOLVER, EVALUATOR), (EVALUATOR, RECRUITER), (EVALUATOR, SOLVER)]
        return Topology.from_edges(edges, name="agentverse")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        critics = list(self.agent_names())
        ctx.topology = self.structure()

        solution: str | None = None
        advice: str | None = None
        turns: list[dict[str, Any]] = []
        passed = False
        shared = cfg.context == "shared"
        history: list[tuple[str, str]] = []  # shared: (author, text), oldest first
        for turn in range(cfg.max_turns):
            recruiter = ctx.agent(RECRUITER)
            said, _ = await ask(
                recruiter,
                recruit_prompt(task, cfg.experts, advice),
                Recruits,
                round=turn,
                kind="recruit",
                remember=False,
            )
            experts, read_as = read_experts(said.content, cfg.experts)
            log: dict[str, Any] = {"experts": experts, "recruit": read_as}
            turns.append(log)

            solver = ctx.agent(SOLVER, system=solver_system(experts[0]))
            panel = [
                ctx.agent(name, role=CRITIC, system=critic_system(expert))
                for name, expert in zip(critics, experts[1:], strict=True)
            ]
            if shared and advice is not None:
                history.append((EVALUATOR_LABEL, advice))
            draft = (
                shared_solve_prompt(task, history[-cfg.solver_window :])
                if shared and history
                else draft_prompt(task, solution, advice)
            )
            solution = (await solver.reply(draft, round=turn, kind="draft", remember=False)).content
            ctx.propose(solution, turn=turn, revision=0)
            history.append((experts[0], solution))

            authors = dict(zip(critics, experts[1:], strict=True))
            consensus = False
            rounds = revisions = 0
            for _ in range(cfg.max_criticizing_rounds):
                rounds += 1
                shown = solution
                ask_critic = (
                    shared_critique_prompt(task, history[-cfg.critic_window :])
                    if shared
                    else critique_prompt(task, shown)
                )
                reviews = await asyncio.gather(
                    *(
                        critic.reply(
                            ask_critic,
                            round=turn,
                            kind="critique",
                            recipients=(SOLVER,),
                            remember=False,
                        )
                        for critic in panel
                    )
                )  # in critic order, whichever finished first
                objections = [(m.sender, m.content) for m in reviews if not agrees(m.content)]
                history += [(authors[who], text) for who, text in objections]
                if not objections:  # this round's critics all agree
                    consensus = True
                    break
                revisions += 1
                revise = (
                    shared_solve_prompt(task, history[-cfg.solver_window :])
                    if shared
                    else revise_prompt(task, shown, objections)
                )
                solution = (
                    await solver.reply(revise, round=turn, kind="revision", remember=False)
                ).content
                ctx.propose(solution, turn=turn, revision=revisions)
                history.append((experts[0], solution))
            log.update(rounds=rounds, revisions=revisions, consensus=consensus)

            evaluator = ctx.agent(EVALUATOR)
            judged, _ = await ask(
                evaluator,
                evaluate_prompt(task, experts, solution),
                Verdict,
                round=turn,
                kind="evaluation",
                remember=False,
            )
            verdict, parsed = read_verdict(judged.content)
            log.update(correct=verdict.correct, verdict_parsed=parsed)
            if verdict.correct:
                passed = True
                break
            advice = verdict.advice or judged.content

        assert solution is not None  # max_turns >= 1
        return Solution(answer=solution, metadata={"turns": turns, "passed": passed})
