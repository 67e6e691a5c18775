"""Self-organising team with a hidden or revealed expert (and the expert alone).

Pappu, El, Cao, di Nolfo, Sun, Cao, Zou. "Multi-Agent Teams Hold Experts Back".
arXiv:2602.01011 (ICML 2026).

Algorithm (N members ``member_1`` .. ``member_N``, R rounds, one of them the ``expert``):

1. Every member gets the same system message: it is one of N members of a team that answers
   the question together on one shared thread, with no roles and no procedure imposed. The
   ``condition`` adds to it:

   - ``no_information`` (the control): nothing. Nobody is told about expertise and the
     ``expert_note`` is given to no one; members differ only by their models (model roles).
   - ``expert_not_mentioned``: the expert's system message also holds ``expert_note`` (its
     private information, when set); the team is not told who the expert is.
   - ``reveal_expert``: as ``expert_not_mentioned``, and every member's system message also
     holds the same note naming the expert (:func:`reveal_note`, our own wording; the paper
     tuned its note with GEPA).
   - ``best_individual``: no team. The expert alone answers step by step, with its note.

2. Rounds r = 0..R-1: members take turns on the shared transcript. Each turn is one call whose
   prompt shows the question and every earlier turn in the order spoken (earlier turns of the
   same round, the member's own included); the member adds a free-form contribution ending
   with the answer it currently favours (prompts grow with the thread: a model that echoes its
   prompt, like ``scripted:echo``, doubles it every turn). ``schedule="round_robin"``: every
   member speaks once a round, ``member_1`` first (the paper's balanced schedule).
   ``schedule="random"``: each round a fresh random subset of ``speakers`` members (default:
   all N) speaks, in a random order, both drawn from the sample's seeded ``ctx.rng``.
3. The final answer: with ``elicit_final`` (the default) every member, after reading the whole
   discussion, is asked for its own final answer (N concurrent calls); otherwise a member's
   final answer is its last turn (a member that never spoke has none). ``final="majority"``
   (the default) votes over them; ``final="random_member"`` takes the final answer of one
   member drawn from ``ctx.rng`` (after the schedule's draws).

``Solution.metadata`` holds each member's first-turn and final answer (as extracted; None when
unreadable or missing), the turn order of every round and how the answer was decided.

LLM calls: S + N, S = N·R discussion turns (``schedule="random"``: R·k, k = ``speakers``);
+ 0 instead of N with ``elicit_final=false``. Default 4·4 + 4 = 20. ``best_individual``: 1.

Budget stop: the majority vote over each member's latest turn so far (updated after every
turn); after the final calls, the final decision.

Synergy: :mod:`maslab.analysis.synergy` compares finished runs (team against each member alone, and
the conditions against each other: synergy gaps, identification and leveraging gaps). A
member's individual run is ``condition=best_individual`` with ``expert`` set to that member
(and no ``expert_note`` unless that member holds it).

Deviations: prompts and the reveal note are our own. The paper's digests say the final team
answer is a majority vote after the discussion, while a code audit reports the answer of a
randomly selected agent: the aggregation rule is [UNVERIFIED], so both are offered, majority by
default. Whether final answers are elicited with separate calls is [UNVERIFIED] too
(``elicit_final``). The size of the paper's random subsets is not known; ``speakers`` sets it.
Only the questions-with-a-gold-answer setting is covered (the paper's ranking and hidden-profile
tasks, distributed expertise, voting-on-the-expert and adversarial variants are not).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import Field, model_validator

from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import majority_decision, propose_vote
from maslab.kit.prompts import cot_prompt

ROLE = "member"
TURN, FINAL = "turn", "final"

Condition = Literal["no_information", "expert_not_mentioned", "reveal_expert", "best_individual"]


def team_system(name: str, members: int) -> str:
    return (
        f"You are {name}, one of {members} members of a team answering a question together. "
        "The team talks on one shared thread: everyone reads every message. No one has a "
        "role and there is no set procedure; organise the discussion however you think best."
    )


def solo_system() -> str:
    return "You are answering a question on your own."


def reveal_note(expert: str) -> str:
    """What every member is told in ``reveal_expert``: who the expert is."""
    return (
        f"Note for the whole team: {expert} is the team's expert on questions like this one. "
        f"On this question, {expert}'s judgement is the most reliable in the team."
    )


def private_note(note: str) -> str:
    """How the expert's private information is shown to the expert (and to no one else)."""
    return f"Information only you have (the other members do not):\n{note.strip()}"


def thread(turns: list[Message]) -> str:
    if not turns:
        return "No one has spoken yet."
    return "\n\n".join(f"[{m.sender}]:\n{m.content.strip()}" for m in turns)


def turn_prompt(task: Task, turns: list[Message], round: int, rounds: int) -> str:
    return (
        f"Question:\n{task.prompt()}\n\nThe team's discussion so far:\n\n{thread(turns)}\n\n"
        f"It is your turn (round {round + 1} of {rounds}). Add your contribution to the "
        "discussion, then end with the answer you currently favour, in the required format."
    )


def final_prompt(task: Task, turns: list[Message]) -> str:
    return (
        f"Question:\n{task.prompt()}\n\nThe team's discussion:\n\n{thread(turns)}\n\n"
        "The discussion is over. Give your own final answer to the question, in the required "
        "format."
    )


@register_method("self_org_team")
class SelfOrgTeam(Method):
    """N members discuss R rounds on one shared thread; an expert may be hidden or revealed."""

    roles = (ROLE,)
    paper = 'Pappu et al., "Multi-Agent Teams Hold Experts Back", arXiv 2602.01011'
    category = "self-organising team (heterogeneous expertise, synergy gap)"
    calls = (
        "N·R + N (default 4·4 + 4 = 20); N·R with `elicit_final=false`; "
        "`schedule=random`: R·k + N; `best_individual`: 1"
    )

    class Config(MethodConfig):
        members: int = Field(4, ge=2)
        rounds: int = Field(4, ge=1)
        schedule: Literal["round_robin", "random"] = "round_robin"
        speakers: int | None = Field(None, ge=1)
        """k: members who speak in a ``random`` round (None: all N)."""
        condition: Condition = "expert_not_mentioned"
        expert: str = "member_1"
        expert_note: str | None = None
        """Private information for the expert (information heterogeneity); None: none."""
        final: Literal["majority", "random_member"] = "majority"
        elicit_final: bool = True
        """Ask every member for a final answer after the discussion (N calls), or use its last
        turn."""

        @model_validator(mode="after")
        def _check(self) -> SelfOrgTeam.Config:
            names = numbered(ROLE, self.members)
            if self.expert not in names:
                raise ValueError(f"expert must be one of {', '.join(names)}, got {self.expert!r}")
            if self.speakers is not None:
                if self.schedule != "random":
                    raise ValueError("speakers needs schedule=random")
                if self.speakers > self.members:
                    raise ValueError(f"speakers must be at most members ({self.members})")
            return self

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered(ROLE, self.config.members)

    def system(self, name: str) -> str:
        """Member ``name``'s system message under the configured condition."""
        cfg = self.config
        condition = cfg.condition
        parts = [
            solo_system() if condition == "best_individual" else team_system(name, cfg.members)
        ]
        if condition == "reveal_expert":
            parts.append(reveal_note(cfg.expert))
        if cfg.expert_note and name == cfg.expert and condition != "no_information":
            parts.append(private_note(cfg.expert_note))
        return "\n\n".join(parts)

    def order(self, ctx: Context) -> list[str]:
        """The speakers of one round, in speaking order."""
        names = list(self.agent_names())
        if self.config.schedule == "round_robin":
            return names
        return ctx.rng.sample(names, self.config.speakers or len(names))

    def structure(self) -> Topology:
        """Every member reads every other one; with ``best_individual``, the expert alone."""
        if self.config.condition == "best_individual":
            return Topology.chain([self.config.expert])
        return Topology.complete(self.agent_names())

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        names = list(self.agent_names())

        def answer_of(text: str) -> str | None:
            return task.answer_in(text)

        ctx.topology = self.structure()
        if cfg.condition == "best_individual":
            solo = ctx.agent(cfg.expert, role=ROLE, system=self.system(cfg.expert))
            said = (await solo.reply(cot_prompt(task), round=0)).content
            answers = {cfg.expert: answer_of(said)}
            return Solution(
                answer=said,
                metadata={"first_answers": answers, "final_answers": answers, "decided": "alone"},
            )

        agents = {n: ctx.agent(n, role=ROLE, system=self.system(n)) for n in names}
        latest: dict[str, str] = {}  # each member's latest turn
        orders: list[list[str]] = []
        for r in range(cfg.rounds):
            orders.append(self.order(ctx))
            for name in orders[-1]:
                turns = ctx.transcript.filter(kind=TURN)
                prompt = turn_prompt(task, turns, r, cfg.rounds)
                turn = await agents[name].reply(prompt, round=r, kind=TURN, remember=False)
                latest[name] = turn.content
                propose_vote(ctx, task, [latest[n] for n in names if n in latest], round=r)

        first = {n: ctx.transcript.filter(sender=n, kind=TURN)[:1] for n in names}
        if cfg.elicit_final:
            prompt = final_prompt(task, ctx.transcript.filter(kind=TURN))
            replies = await asyncio.gather(
                *(
                    agents[n].reply(prompt, round=cfg.rounds, kind=FINAL, remember=False)
                    for n in names
                )
            )
            finals = {n: m.content for n, m in zip(names, replies, strict=True)}
        else:
            finals = {n: latest[n] for n in names if n in latest}
        metadata = {
            "first_answers": {n: answer_of(m[0].content) if m else None for n, m in first.items()},
            "final_answers": {n: answer_of(finals[n]) if n in finals else None for n in names},
            "orders": orders,
        }
        if cfg.final == "random_member":
            chosen = ctx.rng.choice(list(finals))
            return Solution(answer=finals[chosen], metadata={**metadata, "decided": chosen})
        decision = majority_decision(task, list(finals.values()))
        return Solution(
            answer=decision.response,
            metadata={**metadata, "decided": "majority", "votes": decision.vote.counts},
        )
