"""Self-Consistency.

Wang, Wei, Schuurmans, Le, Chi, Narang, Chowdhery, Zhou. "Self-Consistency Improves Chain of
Thought Reasoning in Language Models". arXiv:2203.11171 (ICLR 2023).

Algorithm (k samples):

1. Sample k chain-of-thought completions of the same prompt, all concurrently. Each sample is
   its own agent, so it draws from its own random stream: the samples are independent and are
   cached separately.
2. Extract the final answer of each and return a completion whose answer wins the majority
   vote (the reasoning paths are marginalised out); ties go to the earliest sample.

LLM calls: k (k + 1 with ``aggregate="llm"``; ``preset=maslab``: 5 + 1 = 6).

Budget stop: the vote over the samples completed so far, in sample order.

Deviations: k = 5 by default (the paper uses 40; 5 is the usual multi-agent baseline setting);
the sampling temperature is the run's (default 0.5; the paper uses 0.5-0.7). The prompt is
zero-shot CoT (see ``methods.cot``) instead of the paper's few-shot exemplars.

Options (off by default, not the paper's): ``prompt="raw"`` sends the task's prompt alone, with
no step-by-step instruction; ``aggregate="llm"`` replaces the vote by one aggregator call that
reads the k completions in sample order and states the final answer (the kit's aggregator
prompt, our wording).

MASLab's protocol (``preset=maslab``, on the command line ``--config preset=maslab``; MASLab's
``methods/self_consistency`` at commit 74265c7): ``k=5`` (``configs/config_main.yaml``,
``parallel_num: 5``), ``prompt="raw"`` (``self_consistency_main.py`` sends ``sample["query"]``
unchanged to every sample) and ``aggregate="llm"`` (the same file's
``get_final_decision_instruction``: one more call over the task and all the solutions, whose
reply is the response, not a vote): 6 calls, as MASLab's. The preset sets only the settings
left at their defaults (``preset=maslab k=3`` keeps k = 3). Differences that remain: the
prompts are ours (our task prompt carries the benchmark's answer-format instruction, MASLab's
query is the bare question); MASLab draws its samples one after another, we draw them
concurrently (same prompts, same number of calls).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.kit.aggregation import decide, propose_vote
from maslab.kit.prompts import cot_prompt

PRESETS: dict[str, dict[str, Any]] = {
    "maslab": {"k": 5, "prompt": "raw", "aggregate": "llm"},
}
"""Other implementations' protocols by name (see the module docstring for their sources)."""


@register_method("self_consistency")
class SelfConsistency(Method):
    """k independent CoT samples, majority vote over their extracted answers."""

    roles = ("sample", "aggregator")
    paper = "Wang et al., arXiv 2203.11171"
    category = "baseline (sampling + vote)"
    calls = "k (default 5); k+1 with `aggregate=llm` (MASLab's variant); `preset=maslab`: 5 + 1 = 6"

    class Config(MethodConfig):
        presets: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
        preset: Literal["maslab"] | None = Field(
            None,
            description="another protocol's values (PRESETS) for the settings left at their "
            "defaults: maslab",
        )
        k: int = Field(5, ge=1, description="the number of independent samples")
        prompt: Literal["cot", "raw"] = Field(
            "cot",
            description="what each sample is sent: cot (the zero-shot step-by-step prompt) or "
            "raw (the task's prompt alone, MASLab's)",
        )
        aggregate: Literal["majority", "llm"] = Field(
            "majority",
            description="how the samples become one answer: majority (vote over the extracted "
            "answers) or llm (one aggregator call, MASLab's)",
        )

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered("sample", self.config.k)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        prompt = cot_prompt(task) if self.config.prompt == "cot" else task.prompt()
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
