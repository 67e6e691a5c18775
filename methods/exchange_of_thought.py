"""Exchange-of-Thought (EoT).

Yin, Sun, Chang, Guo, Dai, Huang, Qiu. "Exchange-of-Thought: Enhancing Large Language Model
Capabilities through Cross-Model Communication". arXiv:2312.01823 (EMNLP 2023).

Algorithm (3 persona agents, paradigm P, E = ``max_rounds`` exchange rounds):

1. Round 0: every agent answers the question with step-by-step reasoning. Stop if all three
   extracted answers agree.
2. Round r = 1..E: every agent gets the question, its own previous solution and the previous
   solutions of its predecessors in P's topology (edge u -> v: v reads u), each with that
   agent's confidence from round 2 on, and writes a fresh solution. Stop as soon as all three
   extracted answers agree.
3. The final answer is the majority vote over the last round's extracted answers (ties go to
   the earliest agent, as ``Counter.most_common`` does in the official code).

Paradigms (agents 0, 1, 2, as in the official ``exchange``): memory: everyone reads everyone
(complete); report: agent 0 is a hub that reads 1 and 2, which read only 0 (star, both ways);
relay: 0 reads 1, 1 reads 2, 2 reads 0 (ring); debate: 0 reads 1 and 2, 1 and 2 read each other.
The default paradigm is memory, the official code's default.
Confidence of an agent: how often its most frequent answer occurs in its own answer history,
divided by the history's length (shown once the history has two answers, i.e. from round 2).

LLM calls: 3·(1 + e), where e in 0..E is the number of exchange rounds run; 3 to 3 + 3E
(3 to 18 at the default E = 5, the paper's "3 + 3·rounds"). The calls of a round run
concurrently.

Budget stop: the majority vote over the last complete round.

Deviations: personas and prompts are our own paraphrase; the persona also frames the round-0
answer (the released code reads precomputed round-0 answers). Agents are stateless, as in the
official code: their own previous solution is quoted in the prompt, not kept as chat history.
The personas are the roles, so model roles put them on different models (the paper's
cross-model setting); by default all three use the run's model. Confidence is computed, never
asked for, so there is nothing to parse.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import answer_key, propose_vote
from maslab.kit.prompts import cot_prompt

Paradigm = Literal["memory", "report", "relay", "debate"]

PERSONAS = {
    "Kitty": (
        "You are Kitty, a high-school student known for noticing the details others overlook. "
        "Work through the problem carefully and completely. You will then look over your "
        "friends' solutions and point out what they missed, so that together you reach the "
        "most accurate answer."
    ),
    "Ben": (
        "You are Ben, a high-school student with top grades, above all in mathematics, whom "
        "friends ask for help. Examine the problem rigorously with the principles you know and "
        "explain every step clearly: your friends will compare their solutions with yours."
    ),
    "Peter": (
        "You are Peter, a high-school student known for inventive ways of cracking hard "
        "problems. Take the problem apart with your own strategies and share a solution that "
        "shows your friends Kitty and Ben a different angle, so they may rethink theirs."
    ),
}


def paradigm_topology(paradigm: Paradigm, names: Sequence[str]) -> Topology:
    """Who reads whom in ``paradigm`` for agents ``names`` = (0, 1, 2); edge u -> v: v reads u."""
    a, b, c = names
    if paradigm == "memory":
        topology = Topology.complete(names)
    elif paradigm == "report":
        topology = Topology.star(a, [b, c], direction="both")
    elif paradigm == "relay":
        topology = Topology.ring([a, c, b])
    else:
        topology = Topology()
        for name in names:
            topology.add_node(name)
        for u, v in ((b, a), (c, a), (c, b), (b, c)):
            topology.add_edge(u, v)
    topology.name = paradigm
    return topology


def confidence(answers: Sequence[str | None]) -> float:
    """Share of the agent's answers that equal its most frequent one."""
    return Counter(answers).most_common(1)[0][1] / len(answers)


def exchange_prompt(task: Task, own: str, peers: Sequence[tuple[str, str, float | None]]) -> str:
    """``peers`` holds (name, previous solution, confidence or None) per predecessor."""
    blocks = []
    for name, solution, conf in peers:
        shown = f"--- {name}'s solution ---\n{solution.strip()}"
        if conf is not None:
            shown += f"\n{name}'s confidence in this solution: {conf:.2f}"
        blocks.append(shown)
    caution = (
        " A confidence below 0.5 means that solution is probably wrong, but a confident "
        "solution can be wrong too."
        if any(conf is not None for _, _, conf in peers)
        else ""
    )
    shared = "\n\n".join(blocks)
    return (
        f"{task.prompt()}\n\n--- Your previous solution ---\n{own.strip()}\n\n"
        f"Your friends solved it as well:\n\n{shared}\n\n"
        f"Re-examine your previous answer critically in the light of theirs.{caution} Then write "
        "a fresh step-by-step solution, without commenting on your friends' approaches, and "
        "state your final answer."
    )


@register_method("exchange_of_thought")
class ExchangeOfThought(Method):
    """Three personas exchange solutions along a paradigm's topology until they agree."""

    roles = tuple(PERSONAS)
    paper = "Yin et al., arXiv 2312.01823"
    category = "debate / communication paradigms"
    calls = "3·(1+e), e ≤ 5 exchange rounds (3–18)"

    class Config(MethodConfig):
        paradigm: Paradigm = "memory"
        max_rounds: int = Field(5, ge=1)

    config: Config

    def structure(self) -> Topology:
        return paradigm_topology(self.config.paradigm, list(PERSONAS))

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        names = list(PERSONAS)
        topology = ctx.topology = self.structure()
        agents = {name: ctx.agent(name, system=PERSONAS[name]) for name in names}
        answers: dict[str, list[str | None]] = {name: [] for name in names}
        latest: dict[str, Message] = {}

        async def turn(name: str, r: int) -> Message:
            if r == 0:
                prompt = cot_prompt(task)
            else:
                peers = [
                    (p, latest[p].content, confidence(answers[p]) if len(answers[p]) > 1 else None)
                    for p in topology.predecessors(name)
                ]
                prompt = exchange_prompt(task, latest[name].content, peers)
            return await agents[name].reply(prompt, round=r, remember=False)

        for r in range(cfg.max_rounds + 1):
            replies = await asyncio.gather(*(turn(name, r) for name in names))
            latest = dict(zip(names, replies, strict=True))
            for name, message in latest.items():
                answers[name].append(answer_key(task, message.content))
            decision = propose_vote(ctx, task, [m.content for m in replies], exchange_rounds=r)
            finals = {answers[name][-1] for name in names}
            agreed = None not in finals and len(finals) == 1
            if agreed:
                break

        return Solution(
            answer=decision.response,
            metadata={
                "paradigm": cfg.paradigm,
                "exchange_rounds": r,
                "agreed": agreed,
                "answers": answers,
                "confidence": {name: confidence(answers[name]) for name in names},
                "votes": decision.vote.counts,
            },
        )
