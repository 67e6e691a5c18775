"""Vanilla: one model call on the task prompt. The floor every multi-agent method must beat.

Budget stop: no answer; the single call is the answer, so there is nothing to propose.
"""

from __future__ import annotations

from maslab.core.context import Context
from maslab.core.method import Method, register_method
from maslab.core.task import Solution, Task


@register_method("vanilla")
class Vanilla(Method):
    """A single agent answers the task prompt once (1 call)."""

    roles = ("solver",)
    paper = "—"
    category = "single-agent baseline"
    calls = "1"

    async def solve(self, task: Task, ctx: Context) -> Solution:
        message = await ctx.agent("solver").reply(task.prompt(), round=0)
        return Solution(answer=message.content)
