"""Step verifier: an actor works each turn in a tool loop, and a separate verifier agent checks
every step's calls and results before the actor takes the next one.

Paper: CRITIC (Gou et al., "CRITIC: Large Language Models Can Self-Correct with
Tool-Interactive Critiquing", arXiv 2305.11738): a model's output is verified (with tools) and
the critique drives a correction, until the verification passes. Here the verification is a
second agent and runs after every step of the tool loop (see Deviations).

Algorithm, at each turn of the episode (:meth:`maslab.core.context.Context.episode`):

1. The actor gets the user's message and the turn's functions and takes one step: one reply
   and the calls it makes, run in order (:func:`maslab.kit.acting.act` with ``max_steps=1``;
   native tool calls where its model has them, JSON calls in the text elsewhere).
2. A step without calls ends the turn (the actor's final text).
3. After a step with calls the verifier reads the turn's request and the step's calls and
   results, and answers a :class:`Check`: ``"continue"``: the actor takes its next step (no
   new prompt: the results are its last turn); ``"retry"``: the actor gets the verifier's hint
   as its next prompt; ``"done"``: the turn ends. A reply with no valid JSON counts as
   ``"continue"``.
4. At ``max_steps`` actor replies the turn is cut off (unless the verifier said ``"done"``) and,
   as in ``tool_agent`` and BFCL, the episode ends: the later turns are not taken.

Both agents keep their histories through the episode. On a task whose tools are only declared
(no environment) nothing runs: at each turn the actor proposes once; if it proposed calls the
verifier checks them once, and on ``"retry"`` the actor proposes once more with the hint. The
answer is the last turn's last proposal as JSON (``[]``: it proposed none). On a task without
tools the actor replies once per turn.

LLM calls per turn, on an environment: ``s + c``, s ≤ max_steps actor replies, c the replies
with calls (c = s when the verifier says done or at the cap, else s − 1): ≤ 2·max_steps
(default 20). Declared tools only: 1 (no calls), 2 (checked), 3 (retried). No tools: 1.

Budget stop: the calls made so far stand; on an environment they are the answer, on declared
tools the latest proposal (``ctx.propose``).

Deviations:
- In CRITIC the same model verifies its own output (with external tools: search, a code
  interpreter) and then corrects it; here a separate verifier agent (its own role, so another
  model through model roles) checks every step of the tool loop, and its hint is the actor's
  next prompt: a multi-agent, per-step variant.
- Calls run before they are checked (the environment is not rolled back): a ``"retry"`` asks
  the actor to correct course from the state the step left.
- The prompts are ours. On the text path every step's prompt lists the functions again
  (:func:`~maslab.kit.acting.act`'s text path).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.episode import Turn, calls_json
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.acting import Acted, Call, Function, act
from maslab.kit.parsing import Text
from maslab.kit.structured import Reply, ask
from maslab.llm.types import ChatMessage, FunctionCall

ACTOR, VERIFIER = "actor", "verifier"
ACTOR_SYSTEM = (
    "You carry out the user's requests. When functions are offered, call them to act and to "
    "find out what you need, read each result (an error too) before going on, and call no "
    "function you were not offered. A reviewer checks each of your steps and may tell you what "
    "to correct. When the request is done, or cannot be done with the functions you have, "
    "answer in plain text without a call: say what you did or what is missing."
)
VERIFIER_SYSTEM = (
    "You check an agent that carries out a user's request by calling functions, one step at a "
    "time. After each step you see its calls and their results. Say whether the step was right "
    "and what should happen next: continue (the agent goes on), retry (a call was wrong, "
    "missing or not asked for: say how to correct it), or done (the request is fully carried "
    "out)."
)
RETRY = "The reviewer found a problem with your last step. Check it and correct it."
NOT_RUN = "not run: the functions are only declared"


class Check(Reply):
    """The verifier's verdict on one step."""

    verdict: Literal["continue", "retry", "done"] = Field(
        description="continue, retry (with a hint) or done"
    )
    hint: Text = Field("", description="for retry: what the agent should do instead")


def check_prompt(request: str, calls: Sequence[Call]) -> str:
    """What the verifier reads: the turn's request and the step's calls with their results."""
    lines = [
        f"[{i}] {call.name}({json.dumps(call.arguments, ensure_ascii=False)}) -> "
        f"{call.outcome.result if call.outcome is not None else NOT_RUN}"
        for i, call in enumerate(calls, 1)
    ]
    return f"The user's request: {request}\n\nThe agent's step, its calls in order:\n" + "\n".join(
        lines
    )


@register_method("step_verifier")
class StepVerifier(Method):
    """An actor in a tool loop whose every step a verifier checks: continue, retry with a
    hint, or done (CRITIC-style verification, per step, by a separate agent)."""

    roles = (ACTOR, VERIFIER)
    paper = "Gou et al., arXiv 2305.11738 (CRITIC; verifier as a separate agent, per step)"
    category = "tool use with a step verifier (actor + verifier)"
    calls = (
        "per turn s + c ≤ 2·max_steps (s ≤ max_steps actor replies, c of them with calls, one "
        "check each; default ≤ 20); declared tools only: ≤ 3 per turn; no tools: 1 per turn"
    )

    class Config(MethodConfig):
        max_steps: int = Field(
            10, ge=1, description="Actor replies per turn at most, the closing one too."
        )

    config: Config

    def structure(self) -> Topology:
        """The actor's steps go to the verifier, its verdicts back to the actor."""
        return Topology.from_edges([(ACTOR, VERIFIER), (VERIFIER, ACTOR)])

    async def solve(self, task: Task, ctx: Context) -> Solution:
        ctx.topology = self.structure()
        actor = ctx.agent(ACTOR, system=ACTOR_SYSTEM)
        verifier = ctx.agent(VERIFIER, system=VERIFIER_SYSTEM)
        declared = ctx.environment is None and bool(task.tools)
        answer, steps, verdicts, capped = "", [], [], False
        async for turn in ctx.episode(task):
            request = turn.request
            said: list[str] = []
            verdicts.append(said)
            if declared:
                answer = await self.propose(
                    actor, verifier, request, turn.functions, said, turn.index
                )
                steps.append(2 if "retry" in said else 1)
                continue
            answer, replies, capped = await self.work(actor, verifier, request, turn, said)
            steps.append(replies)
            if capped:
                break
        metadata = {"steps": steps, "verdicts": verdicts, "capped": capped}
        return Solution(answer=answer, metadata=metadata)

    async def work(
        self, actor: Agent, verifier: Agent, request: str, turn: Turn, said: list[str]
    ) -> tuple[str, int, bool]:
        """A turn on an environment (or without tools): step, check, until a step without calls,
        a "done" or the cap. Returns the actor's last text, its replies, and whether the cap cut
        the turn off."""
        prompt: str | None = request
        for replies in range(1, self.config.max_steps + 1):
            acted = await act(actor, prompt, turn.functions, max_steps=1, round=turn.index)
            if not acted.calls:
                return acted.message.content, replies, False
            verdict, hint = await self.check(verifier, request, acted.calls, turn.index)
            said.append(verdict)
            if verdict == "done":
                return acted.message.content, replies, False
            prompt = (hint or RETRY) if verdict == "retry" else None
        return acted.message.content, self.config.max_steps, True

    async def check(
        self, verifier: Agent, request: str, calls: Sequence[Call], index: int
    ) -> tuple[str, str]:
        """The verifier's verdict and hint on a step; no valid JSON: ``"continue"``."""
        _, check = await ask(verifier, check_prompt(request, calls), Check, round=index)
        return (check.verdict, check.hint) if check is not None else ("continue", "")

    async def propose(
        self,
        actor: Agent,
        verifier: Agent,
        request: str,
        functions: Sequence[Function],
        said: list[str],
        index: int,
    ) -> str:
        """A declared-only turn: the actor proposes, the verifier checks once, a retry
        proposes once more; the last proposal as JSON."""
        acted = await self.proposal(actor, request, functions, index)
        if acted.calls:
            verdict, hint = await self.check(verifier, request, acted.calls, index)
            said.append(verdict)
            if verdict == "retry":
                acted = await self.proposal(actor, hint or RETRY, functions, index)
        return calls_json((call.name, call.arguments) for call in acted.calls)

    async def proposal(
        self, actor: Agent, prompt: str, functions: Sequence[Function], index: int
    ) -> Acted:
        """One proposal of the actor, recorded as the answer so far; its native calls are
        answered in its history (nothing ran), so that a next prompt may follow them."""
        acted = await act(actor, prompt, functions, max_steps=1, round=index)
        actor.ctx.propose(calls_json((call.name, call.arguments) for call in acted.calls))
        wire: list[FunctionCall] = list(acted.message.metadata.get("tool_calls", ()))
        answered: list[ChatMessage] = [
            {"role": "tool", "tool_call_id": c.id, "name": c.name, "content": NOT_RUN} for c in wire
        ]
        actor.remember(*answered)
        return acted
