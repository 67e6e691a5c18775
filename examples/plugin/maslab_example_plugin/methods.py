"""Two small methods: one documented, one deliberately without a docstring."""

from __future__ import annotations

from pydantic import Field

from maslab import Context, Method, MethodConfig, Solution, Task

CHECK = (
    "{prompt}\n\nA proposed solution:\n{draft}\n\nCheck it step by step. If it is wrong, "
    "correct it. End with the final answer in the format asked for above."
)
AGAIN = (
    "Look over your answer once more. If you find a mistake, fix it. End with the final answer "
    "in the same format."
)


class SolveAndCheck(Method):
    """A solver answers, a checker reviews the solution and gives the final answer (2 calls)."""

    class Config(MethodConfig):
        checker_temperature: float = Field(0.0, ge=0, le=2)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        draft = await ctx.agent("solver").reply(task.prompt(), round=0)
        ctx.propose(draft.content)  # a budget stop during the check scores the draft
        checker = ctx.agent("checker", temperature=self.config.checker_temperature)
        check = CHECK.format(prompt=task.prompt(), draft=draft.content)
        review = await checker.reply(check, round=1)
        return Solution(answer=review.content)


class ReflectOnce(Method):
    # No docstring on purpose: `maslab list methods` shows "(no description)" for it.

    async def solve(self, task: Task, ctx: Context) -> Solution:
        agent = ctx.agent("solver")
        first = await agent.reply(task.prompt(), round=0)
        ctx.propose(first.content)
        second = await agent.reply(AGAIN, round=1)  # the agent remembers its first answer
        return Solution(answer=second.content)
