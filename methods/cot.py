"""Zero-shot Chain-of-Thought.

Wei, Wang, Schuurmans, Bosma, Ichter, Xia, Chi, Le, Zhou. "Chain-of-Thought Prompting Elicits
Reasoning in Large Language Models". arXiv:2201.11903 (NeurIPS 2022).
Kojima, Gu, Reid, Matsuo, Iwasawa. "Large Language Models are Zero-Shot Reasoners".
arXiv:2205.11916 (NeurIPS 2022).

Algorithm: one agent gets the task prompt followed by an instruction to reason step by step
before answering; the final answer is read from its reasoning.

LLM calls: 1.

Budget stop: no answer; the single call is the answer, so there is nothing to propose.

Deviations: the step-by-step instruction is our own wording, not Kojima's trigger sentence.
Kojima's second call (answer extraction) is dropped, as in MASLab: the task prompt already says
how to state the final answer, and the evaluator extracts it. No few-shot exemplars (Wei et al.).
"""

from __future__ import annotations

from maslab.core.context import Context
from maslab.core.method import Method, register_method
from maslab.core.task import Solution, Task
from maslab.kit.prompts import cot_prompt


@register_method("cot")
class CoT(Method):
    """One agent reasons step by step, then answers (1 call)."""

    roles = ("solver",)
    paper = "Wei et al. arXiv 2201.11903; Kojima et al. arXiv 2205.11916 (zero-shot)"
    category = "single-agent baseline"
    calls = "1"

    async def solve(self, task: Task, ctx: Context) -> Solution:
        message = await ctx.agent("solver").reply(cot_prompt(task), round=0)
        return Solution(answer=message.content)
