"""Tool agent: one agent with all of the task's functions, calling them until it is done, turn
after turn of the episode. The baseline every agentic method is compared against.

Papers: ReAct (Yao et al., "ReAct: Synergizing Reasoning and Acting in Language Models", arXiv
2210.03629): the agent interleaves its reasoning with actions and reads each observation before
it goes on; and the single-model setup of the Berkeley Function-Calling Leaderboard (Patil et
al., "Gorilla", arXiv 2305.15334; BFCL v4): at each user turn the model calls functions, sees
their results, and the turn ends with a reply that makes no call, or at a cap of steps.

Algorithm, at each turn of the episode (:meth:`maslab.core.context.Context.episode`): the agent
gets the user's message and the turn's functions and works on it in one tool loop
(:func:`maslab.kit.acting.act`): native tool calls where its model has them, JSON calls in the
text elsewhere; the calls of one reply run in order, every result (errors too) comes back, and
the loop ends at a reply without a call or after ``max_steps`` replies. Its history runs through
the whole episode. On a task whose tools are only declared (no environment) the answer is the
calls of its first reply that makes any, as JSON (``[]``: it made none); on a task without
tools it replies once.

Deviations:
- The system prompt is ours, not BFCL's (which also asks for its own call syntax; the native
  and text paths here have theirs, :mod:`maslab.kit.acting`).
- BFCL counts a step per reply that makes calls and quits after 20 of them (its
  ``MAXIMUM_STEP_LIMIT``); ``max_steps`` counts every reply of a turn, the last one too, so 20
  here allows 19 replies with calls and a closing one. As in BFCL, a turn cut off at the cap
  ends the episode: the later turns are not taken.
- A turn with no new message (one that only adds functions) gets our own line saying that
  more functions are available, where BFCL has its own.
- No reasoning trace is asked for (ReAct's "Thought"): a model reasons in its reply as it likes.

Budget stop: the calls made so far stand; on an environment they are the answer.
"""

from __future__ import annotations

from pydantic import Field

from maslab.core.context import Context
from maslab.core.episode import calls_json
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.kit.acting import Acted, act

SYSTEM = (
    "You carry out the user's requests. When functions are offered, call them to act and to "
    "find out what you need, read each result (an error too) before going on, and call no "
    "function you were not offered. When the request is done, or cannot be done with the "
    "functions you have, answer in plain text without a call: say what you did or what is "
    "missing."
)


@register_method("tool_agent")
class ToolAgent(Method):
    """One agent with every function of the task, in one tool loop per turn (ReAct; BFCL's
    single-model setup)."""

    roles = ("agent",)
    paper = "Yao et al., arXiv 2210.03629 (ReAct); BFCL's single-model setup (Patil et al.)"
    category = "single-agent tool use (function calling)"
    calls = (
        "at most max_steps per turn: ≤ max_steps·(1 + turns) (default 20 per turn); declared "
        "tools only: ≤ max_steps; no tools: 1 per turn"
    )

    class Config(MethodConfig):
        max_steps: int = Field(
            20, ge=1, description="Replies per turn at most, the closing one too (BFCL: 20)."
        )

    config: Config

    async def solve(self, task: Task, ctx: Context) -> Solution:
        agent = ctx.agent("agent", system=SYSTEM)
        acted: Acted | None = None
        steps = []
        async for turn in ctx.episode(task):
            prompt = turn.request
            acted = await act(
                agent, prompt, turn.functions, max_steps=self.config.max_steps, round=turn.index
            )
            steps.append(acted.steps)
            if acted.capped:
                break
        assert acted is not None  # an episode has a first turn
        declared = ctx.environment is None and bool(task.tools)
        calls = ((call.name, call.arguments) for call in acted.calls)
        answer = calls_json(calls) if declared else acted.message.content
        return Solution(answer=answer, metadata={"steps": steps, "capped": acted.capped})
