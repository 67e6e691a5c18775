"""LLM Debate.

Du, Li, Torralba, Tenenbaum, Mordatch. "Improving Factuality and Reasoning in Language Models
through Multiagent Debate". arXiv:2305.14325 (ICML 2024).

Algorithm (N agents, R rounds, fully connected):

1. Round 0: every agent answers the question on its own, explaining its reasoning.
2. Round r = 1..R-1: every agent receives, as a new turn of its own conversation, the other
   agents' round r-1 answers, and gives an updated answer. A lone agent is asked to re-check
   its own answer instead. All agents of a round run concurrently.
3. The final answer is the majority vote over the answers extracted from round R-1.

LLM calls: N·R (N·R + 1 with ``aggregate="llm"``; ``preset=maslab``: 3·2 + 1 = 7).

Budget stop: the majority vote over the last complete round (a partial round never counts).

Deviations: prompts are our own paraphrase; other agents' answers are shown verbatim as in
the official code. ``aggregate="llm"`` replaces the vote by one aggregator call over the
final answers (in agent order; the kit's aggregator prompt, our wording): that is MASLab's
variant, not the paper's, and is off by default.

MASLab's protocol (``preset=maslab``, on the command line ``--config preset=maslab``; MASLab's
``methods/llm_debate`` at commit 74265c7): ``agents=3`` and ``rounds=2``
(``configs/config_main.yaml``: ``agents_num: 3``, ``rounds_num: 2``) and ``aggregate="llm"``
(``llm_debate_main.py``, ``aggregate``: one call over the task and the agents' last answers,
whose reply is the response): 3·2 + 1 = 7 calls, as MASLab's. The preset sets only the
settings left at their defaults (``preset=maslab agents=4`` keeps N = 4). What MASLab's
debate turn shows matches ours (the other agents' previous answers, verbatim, then the
question again); its prompts' wording differs (ours are our own), and it runs a round's
agents one after another where ours run concurrently, with the same prompts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import decide, propose_vote
from maslab.kit.prompts import debate_prompt

PRESETS: dict[str, dict[str, Any]] = {
    "maslab": {"agents": 3, "rounds": 2, "aggregate": "llm"},
}
"""Other implementations' protocols by name (see the module docstring for their sources)."""


def opening_prompt(task: Task) -> str:
    return f"{task.prompt()}\n\nExplain your reasoning step by step, then give your final answer."


@register_method("llm_debate")
class LLMDebate(Method):
    """N agents debate for R rounds, seeing each other's previous answers; majority vote."""

    roles = ("debater", "aggregator")
    paper = "Du et al., arXiv 2305.14325"
    category = "debate"
    calls = (
        "N·R (default 3·2 = 6); +1 with `aggregate=llm` (MASLab's variant); `preset=maslab`: "
        "3·2 + 1 = 7"
    )

    class Config(MethodConfig):
        presets: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
        preset: Literal["maslab"] | None = Field(
            None,
            description="another protocol's values (PRESETS) for the settings left at their "
            "defaults: maslab",
        )
        agents: int = Field(3, ge=1, description="N, the debaters")
        rounds: int = Field(2, ge=1, description="R, the rounds (round 0 included)")
        aggregate: Literal["majority", "llm"] = Field(
            "majority",
            description="how the last round's answers become one: majority (vote over the "
            "extracted answers) or llm (one aggregator call, MASLab's)",
        )

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered("debater", self.config.agents)

    def structure(self) -> Topology:
        """Every debater reads every other one (one debater alone: a single node)."""
        names = list(self.agent_names())
        return Topology.complete(names) if self.config.agents > 1 else Topology.chain(names)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        topology = ctx.topology = self.structure()
        agents = [ctx.agent(name, role="debater") for name in topology.nodes]

        async def turn(agent: Agent, r: int) -> Message:
            if r == 0:
                return await agent.reply(opening_prompt(task), round=0)
            others = topology.visible_messages(agent.name, ctx.transcript, r)
            return await agent.reply(debate_prompt(task, others), round=r)

        responses: list[str] = []
        for r in range(cfg.rounds):
            responses = [m.content for m in await asyncio.gather(*(turn(a, r) for a in agents))]
            propose_vote(ctx, task, responses, round=r)

        return await decide(ctx, task, responses, cfg.aggregate, round=cfg.rounds)
