"""Multi-Agent Verification (BoN-MAV): best of n candidates by the approvals of m verifiers.

Lifshitz, McIlraith, Du. "Multi-Agent Verification: Scaling Test-Time Compute with Multiple
Verifiers". arXiv:2502.20379.

Algorithm (n candidates, m aspect verifiers):

1. A generator samples n candidate solutions of the question, each its own independent draw
   (agents ``generator_1`` .. ``generator_n`` send the same chain-of-thought prompt, so each
   draws from its own random stream, as in ``self_consistency``). All run concurrently.
2. Every aspect verifier judges every candidate on its own: it reads the question and that
   one candidate (never the other candidates, nor the other verifiers' verdicts) and returns
   a binary verdict, approve or reject, from the point of view of its one aspect (say,
   arithmetic correctness). All n·m verifications run concurrently.
3. The answer is the candidate with the most approvals; ties go to the earliest candidate
   (``tie_break="first"``), or, with ``tie_break="majority"``, to the earliest tied candidate
   whose extracted answer wins the majority vote among the tied candidates.

LLM calls: n + n·m (default 16 + 16·4 = 80; n = 5 for a budget like ``self_consistency``'s:
25).

Budget stop: before any verdict, the first candidate (in candidate order) that has been
written; then the candidate with the most approvals among the verdicts received so far (ties:
the earliest candidate). A stop during generation verifies nothing.

The paper's: generate n candidates independently, have a set of verifiers, each a (model,
aspect) pair prompted to approve or reject a candidate with a binary True/False verdict,
judge every candidate, and pick the candidate with the most approvals (BoN-MAV); verifiers
may be put on several models (here with model roles: ``verifier_j`` is aspect j, so
``--model-role verifier_2=...`` puts one aspect on another model). n = 16 is the paper's
main comparison setting (it also scales n and m further).

Our choices (deviations): the prompts and the aspect catalogue (``ASPECTS``) are our own
wording, zero-shot and task-generic; the paper has its own, larger, domain-selected pool of
aspect prompts and verifier strategies, and several verifier models. The default is four
aspects (arithmetic, logic, final answer, constraints) on the run's model. A verdict is
requested as JSON (``reasoning`` and ``approve``), natively where the model supports
structured output, else read from the text (a JSON object, then an ``approve: true/false``
line); a verdict that cannot be read counts as a reject and is recorded as ``None`` in
``metadata["verdicts"]``. The tie rule (earliest candidate) is ours; ``tie_break="majority"``
is an option of ours too.
"""

from __future__ import annotations

import asyncio
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, Field, field_validator

from maslab.aggregation import majority_decision
from maslab.context import Context
from maslab.method import Method, MethodConfig, register_method
from maslab.methods.cot import cot_prompt
from maslab.parsing import parse_model
from maslab.roles import numbered
from maslab.structured import STRING, json_params, object_schema
from maslab.task import Solution, Task
from maslab.topology import Topology

GENERATOR, VERIFIER = "generator", "verifier"

ASPECTS: dict[str, str] = {
    "arithmetic": (
        "arithmetic and algebra: redo every calculation and every algebraic manipulation in "
        "the solution and check that each one is computed correctly"
    ),
    "logic": (
        "logical soundness: check that every step follows from the question or from earlier "
        "steps, with no unjustified leap, circular argument or hidden assumption"
    ),
    "final_answer": (
        "the final answer: check that it answers exactly what the question asks (the right "
        "quantity, units and form) and that it agrees with the work that leads to it"
    ),
    "constraints": (
        "constraints and edge cases: check that every condition stated in the question is "
        "used and respected, and that special or boundary cases are handled"
    ),
    "facts": "factual accuracy: check every fact, definition and formula the solution uses",
    "completeness": (
        "completeness: check that the solution covers every part of the question and does "
        "not stop before reaching a definite answer"
    ),
}
Aspect = Literal["arithmetic", "logic", "final_answer", "constraints", "facts", "completeness"]
DEFAULT_ASPECTS: tuple[Aspect, ...] = ("arithmetic", "logic", "final_answer", "constraints")


def _flag(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "approve", "1"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"false", "no", "reject", "0"}:
        return False
    if isinstance(value, int):
        return value == 1 if value in (0, 1) else None
    return None


class Verdict(BaseModel):
    """A verifier's JSON reply: its reasoning and whether it approves the candidate."""

    reasoning: Annotated[str, BeforeValidator(lambda v: "" if v is None else str(v))] = ""
    approve: Annotated[bool | None, BeforeValidator(_flag)]

    @field_validator("approve")
    @classmethod
    def _readable(cls, value: bool | None) -> bool:
        if value is None:
            raise ValueError("approve must be true or false")
        return value


VERDICT_SCHEMA = object_schema(reasoning=STRING, approve={"type": "boolean"})
_APPROVE_LINE = re.compile(r"\bapprove\b\W{0,3}\s*[:=]\s*\W{0,2}(true|false)\b", re.IGNORECASE)


def read_verdict(text: str) -> bool | None:
    """True (approve), False (reject) or None (unreadable) from a verifier's reply."""
    verdict = parse_model(text, Verdict)
    if verdict is not None:
        return verdict.approve
    found = _APPROVE_LINE.findall(text)
    return found[-1].lower() == "true" if found else None


def verify_prompt(task: Task, candidate: str, aspect: str) -> str:
    return (
        "You are checking one proposed solution, and only one aspect of it.\n\n"
        f"Question:\n{task.prompt()}\n\nProposed solution:\n{candidate.strip()}\n\n"
        f"The aspect you check is {ASPECTS[aspect]}.\n\n"
        "Work through that aspect carefully. Approve the solution only if you find no error "
        "in it; reject it if you find one. Reply with a JSON object with two keys: "
        '"reasoning", a short account of what you checked and found, as a string, and '
        '"approve", true to approve the solution or false to reject it.'
    )


def best_candidate(approvals: list[int]) -> int:
    """The index of the candidate with the most approvals; ties go to the earliest."""
    return max(range(len(approvals)), key=lambda i: (approvals[i], -i))


@register_method("mav")
class MultiAgentVerification(Method):
    """n independent candidates, each judged by m aspect verifiers; most approvals wins."""

    roles = (GENERATOR, VERIFIER)
    paper = "Lifshitz et al., arXiv 2502.20379 (Multi-Agent Verification, BoN-MAV)"
    category = "generation + multi-verifier selection"
    calls = "n + n·m (default 16 + 16·4 = 80; `n=5`: 25)"

    class Config(MethodConfig):
        n: int = Field(16, ge=1)
        aspects: tuple[Aspect, ...] = Field(DEFAULT_ASPECTS, min_length=1)
        tie_break: Literal["first", "majority"] = "first"

        @field_validator("aspects")
        @classmethod
        def _distinct(cls, aspects: tuple[str, ...]) -> tuple[str, ...]:
            if len(set(aspects)) != len(aspects):
                raise ValueError("each aspect may appear once")
            return aspects

    def agent_names(self) -> tuple[str, ...]:
        return numbered(GENERATOR, self.config.n) + numbered(VERIFIER, len(self.config.aspects))

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        generator_names = numbered(GENERATOR, cfg.n)
        verifier_names = numbered(VERIFIER, len(cfg.aspects))
        ctx.topology = Topology.layered([generator_names, verifier_names])
        prompt = cot_prompt(task)
        written: dict[int, str] = {}

        async def generate(i: int) -> str:
            agent = ctx.agent(generator_names[i], role=GENERATOR)
            message = await agent.reply(prompt, round=0)
            written[i] = message.content
            first = min(written)  # candidate order, not completion order
            ctx.propose(written[first], candidate=first + 1, verified=False)
            return message.content

        candidates = list(await asyncio.gather(*(generate(i) for i in range(cfg.n))))

        verifiers = [ctx.agent(name, role=VERIFIER) for name in verifier_names]  # one per aspect
        verdicts: list[list[bool | None]] = [[None] * len(verifiers) for _ in candidates]
        approvals = [0] * len(candidates)

        async def verify(i: int, j: int) -> None:
            agent = verifiers[j]
            said = await agent.reply(
                verify_prompt(task, candidates[i], cfg.aspects[j]),
                round=1,
                kind="verdict",
                remember=False,
                **json_params(agent.model, "verdict", VERDICT_SCHEMA),
            )
            verdicts[i][j] = read_verdict(said.content)
            approvals[i] += verdicts[i][j] is True
            best = best_candidate(approvals)
            ctx.propose(candidates[best], candidate=best + 1, approvals=list(approvals))

        await asyncio.gather(
            *(verify(i, j) for i in range(len(candidates)) for j in range(len(verifiers)))
        )

        top = max(approvals)
        tied = [i for i, a in enumerate(approvals) if a == top]
        chosen = tied[0]
        if cfg.tie_break == "majority" and len(tied) > 1:
            decision = majority_decision(task, [candidates[i] for i in tied])
            chosen = next(i for i in tied if candidates[i] == decision.response)
        return Solution(
            answer=candidates[chosen],
            metadata={
                "chosen": chosen + 1,
                "approvals": approvals,
                "tied": [i + 1 for i in tied],
                "verdicts": verdicts,
                "unreadable": sum(v is None for row in verdicts for v in row),
            },
        )
