"""Self-Consistency.

Wang, Wei, Schuurmans, Le, Chi, Narang, Chowdhery, Zhou. "Self-Consistency Improves Chain of
Thought Reasoning in Language Models". arXiv:2203.11171 (ICLR 2023).

Algorithm (k samples):

1. Sample k chain-of-thought completions of the same prompt, all concurrently. Each sample is
   its own agent, so it draws from its own random stream: the samples are independent and are
   cached separately.
2. Extract the final answer of each and return a completion whose answer wins the majority
   vote (the reasoning paths are marginalised out); ties go to the earliest sample.

LLM calls: k (k + 1 with ``aggregate="llm"``).

Budget stop: the vote over the samples completed so far, in sample order.

Deviations: k = 5 by default (the paper uses 40; 5 is the usual multi-agent baseline setting);
the sampling temperature is the run's (default 0.5; the paper uses 0.5-0.7). The prompt is
zero-shot CoT (see ``methods.cot``) instead of the paper's few-shot exemplars.
``aggregate="llm"`` replaces the vote by one aggregator call over the k completions: that is
MASLab's variant (it also samples the raw query without CoT), not the paper's, and is off by
default.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from pydantic import Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.kit.aggregation import decide, propose_vote
from maslab.kit.prompts import cot_prompt


@register_method("self_consistency")
class SelfConsistency(Method):
    """k independent CoT samples, majority vote over their extracted answers."""

    roles = ("sample", "aggregator")
    paper = "Wang et al., arXiv 2203.11171"
    category = "baseline (sampling + vote)"
    calls = "k (default 5); k+1 with `aggregate=llm` (MASLab's variant)"

    class Config(MethodConfig):
        k: int = Field(5, ge=1)
        aggregate: Literal["majority", "llm"] = "majority"

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered("sample", self.config.k)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        prompt = cot_prompt(task)
        names = self.agent_names()
        done: dict[int, str] = {}

        async def sample(i: int) -> str:
            message = await ctx.agent(names[i], role="sample").reply(prompt, round=0)
            done[i] = message.content
            # sample order, not completion order: the vote must not depend on timing
            propose_vote(ctx, task, [done[j] for j in sorted(done)], samples=len(done))
            return message.content

        responses = await asyncio.gather(*(sample(i) for i in range(len(names))))
        return await decide(ctx, task, responses, self.config.aggregate, round=1)
