"""Multi-Agent Verification (BoN-MAV): best of n candidates by the approvals of m verifiers.

Lifshitz, McIlraith, Du. "Multi-Agent Verification: Scaling Test-Time Compute with Multiple
Verifiers". arXiv:2502.20379.

Algorithm (n candidates, m aspect verifiers):

1. A generator samples n candidate solutions of the question, each its own independent draw
   (agents ``generator_1`` .. ``generator_n`` send the same chain-of-thought prompt, so each
   draws from its own random stream, as in ``self_consistency``). All run concurrently.
2. The verifiers' aspects: all of ``aspects``, or, with ``draw = m``, m of them drawn at random
   from the sample's random stream, the same m for every candidate.
3. Every aspect verifier judges every candidate on its own: it reads the question and that
   one candidate (never the other candidates, nor the other verifiers' verdicts) and returns
   a binary verdict, approve or reject, from the point of view of its one aspect (say,
   arithmetic correctness): in one JSON call (``verification="json"``), or in a free critique
   followed, in the same conversation, by an approval call (``verification="critique"``).
   All n·m verifications run concurrently.
4. The answer is the candidate with the most approvals; ties go to the earliest candidate
   (``tie_break="first"``), or, with ``tie_break="majority"``, to the earliest tied candidate
   whose extracted answer wins the majority vote among the tied candidates.

LLM calls: n + n·m, n + 2·n·m with ``verification="critique"`` (default 16 + 16·4 = 80; n = 5
for a budget like ``self_consistency``'s: 25; ``preset=maslab``: 2 + 2·2·2 = 10).

Budget stop: before any verdict, the first candidate (in candidate order) that has been
written; then the candidate with the most approvals among the verdicts received so far (ties:
the earliest candidate). A stop during generation verifies nothing.

The paper's: generate n candidates independently, have a set of verifiers, each a (model,
aspect) pair prompted to approve or reject a candidate with a binary True/False verdict, judge
every candidate, and pick the candidate with the most approvals (BoN-MAV); verifiers may be put
on several models (here with model roles: ``verifier_j`` checks the sample's j-th aspect, so
``--model-role verifier_2=...`` puts one aspect on another model). n = 16 is the paper's main
comparison setting (it also scales n and m further).

MASLab's reference (``methods/mav``; the paper's code has no general-task version) differs
from our defaults: n = 2; two verifiers drawn at random from a list of eight aspects (once per
method instance, i.e. per sample, from Python's global random state), the same two for both
candidates; each verification is a critique call, then an approval call that sees the
critique, both at temperature 0; the highest approval fraction wins (ties: the first): 10
calls. Our defaults are the paper's n = 16 with four fixed aspects, one JSON call per
verification at the run's sampling settings: 80 calls. ``preset=maslab`` (on the command line
``--config preset=maslab``) runs MASLab's protocol with our prompts: n = 2,
``aspects=MASLAB_ASPECTS`` (our wording of its eight), ``draw=2`` from the sample's seeded
random stream, ``verification="critique"`` and ``verifier_temperature=0``; it sets only the
settings left at our defaults (``preset=maslab n=4`` keeps n = 4).

Our choices (deviations): the prompts and the aspect catalogue (``ASPECTS``) are our own
wording, zero-shot and task-generic; the paper has its own, larger, domain-selected pool of
aspect prompts and verifier strategies, and several verifier models. The default is four
aspects (arithmetic, logic, final answer, constraints) on the run's model. A verdict is
requested as JSON (``reasoning`` and ``approve``; the approval call: ``approve`` alone),
natively where the model supports structured output, else read from the text (a JSON object,
then an ``approve: true/false`` line); a verdict that cannot be read counts as a reject and is
recorded as ``None`` in ``metadata["verdicts"]``. The tie rule (earliest candidate) is ours;
``tie_break="majority"`` is an option of ours too.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import majority_decision
from maslab.kit.prompts import cot_prompt
from maslab.kit.structured import Reply, ask

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
    "units": (
        "units and quantities: follow every quantity through the solution and check that its "
        "unit, or what it counts, stays right at every step and in the answer"
    ),
    "summary": (
        "the argument as a whole: retell the solution in your own words, step by step, and "
        "probe every part of it that looks doubtful"
    ),
    "edge_cases": (
        "edge cases: try the extreme values, boundary conditions and special cases the "
        "question allows, and check that the solution still holds for each of them"
    ),
    "mistakes": (
        "typical slips: look for the errors commonly made on problems of this kind, such as "
        "miscalculations, sign errors, misread conditions and misconceptions"
    ),
    "domain": (
        "use of the subject: check that the solution applies the knowledge, established "
        "results and standard methods of the relevant field correctly"
    ),
    "rederive": (
        "an independent view: explain the solution differently from how it is written, by "
        "another route to its result, and look for the flaws this brings to light"
    ),
}
Aspect = Literal[
    "arithmetic", "logic", "final_answer", "constraints", "facts", "completeness", "units",
    "summary", "edge_cases", "mistakes", "domain", "rederive",
]  # fmt: skip
DEFAULT_ASPECTS: tuple[Aspect, ...] = ("arithmetic", "logic", "final_answer", "constraints")
MASLAB_ASPECTS: tuple[Aspect, ...] = (
    "units", "summary", "edge_cases", "mistakes", "domain", "arithmetic", "logic", "rederive",
)  # fmt: skip
"""Our counterparts of MASLab's eight verifier aspects, in its order."""
PRESETS: dict[str, dict[str, Any]] = {
    "maslab": {
        "n": 2,
        "aspects": MASLAB_ASPECTS,
        "draw": 2,
        "verification": "critique",
        "verifier_temperature": 0.0,
    },
}


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "approve", "1"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"false", "no", "reject", "0"}:
        return False
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    raise ValueError("approve must be true or false")


Approve = Annotated[bool, BeforeValidator(_flag)]


class Approval(Reply):
    """The approval call's JSON reply (after a critique): whether the verifier approves."""

    approve: Approve


class Verdict(Reply):
    """A verifier's JSON reply: its reasoning and whether it approves the candidate."""

    reasoning: Annotated[str, BeforeValidator(lambda v: "" if v is None else str(v))] = Field(
        "", description="a short account of what you checked and found"
    )
    approve: Approve


APPROVAL_PROMPT = (
    "From your review above, give your verdict on the proposed solution: approve it if you "
    "found no error in the aspect you checked, reject it if you found one."
)
# "approve: true" in a reply without JSON; not the shape "approve": true or false it was shown
_APPROVE_LINE = re.compile(
    r"\bapprove\b\W{0,3}\s*[:=]\s*\W{0,2}(true|false)\b(?!\s+or\b)", re.IGNORECASE
)


def read_verdict(text: str) -> bool | None:
    """True (approve), False (reject) or None (unreadable) from a verifier's reply."""
    verdict = Verdict.parse(text)
    if verdict is not None:
        return verdict.approve
    found = _APPROVE_LINE.findall(text)
    return found[-1].lower() == "true" if found else None


def _assignment(task: Task, candidate: str, aspect: str) -> str:
    return (
        "You are checking one proposed solution, and only one aspect of it.\n\n"
        f"Question:\n{task.prompt()}\n\nProposed solution:\n{candidate.strip()}\n\n"
        f"The aspect you check is {ASPECTS[aspect]}.\n\n"
    )


def verify_prompt(task: Task, candidate: str, aspect: str) -> str:
    return _assignment(task, candidate, aspect) + (
        "Work through that aspect carefully. Approve the solution only if you find no error "
        "in it; reject it if you find one."
    )


def critique_prompt(task: Task, candidate: str, aspect: str) -> str:
    return _assignment(task, candidate, aspect) + (
        "Work through that aspect step by step, thinking out loud. If you come to an error, "
        "stop there and explain it; if you find none, say that the solution holds up."
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
    calls = (
        "n + n·m; n + 2·n·m with `verification=critique` (default 16 + 16·4 = 80; `n=5`: 25; "
        "`preset=maslab`: 2 + 2·2·2 = 10)"
    )

    class Config(MethodConfig):
        presets: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
        preset: Literal["maslab"] | None = None
        """Another protocol's values (``PRESETS``) for the settings left at their defaults."""
        n: int = Field(16, ge=1)
        aspects: tuple[Aspect, ...] = Field(DEFAULT_ASPECTS, min_length=1)
        draw: int | None = Field(None, ge=1)
        """m, the aspects each sample draws at random from ``aspects``; None: all of them."""
        verification: Literal["json", "critique"] = "json"
        verifier_temperature: float | None = Field(None, ge=0)
        """The verifiers' sampling temperature; None: the run's."""
        tie_break: Literal["first", "majority"] = "first"

        @field_validator("aspects")
        @classmethod
        def _distinct(cls, aspects: tuple[str, ...]) -> tuple[str, ...]:
            if len(set(aspects)) != len(aspects):
                raise ValueError("each aspect may appear once")
            return aspects

        @model_validator(mode="after")
        def _draw_fits(self) -> MultiAgentVerification.Config:
            if self.draw is not None and self.draw > len(self.aspects):
                raise ValueError(f"draw {self.draw} exceeds the {len(self.aspects)} aspects")
            return self

        @property
        def verifiers(self) -> int:
            """m, the verifiers of a sample."""
            return self.draw or len(self.aspects)

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered(GENERATOR, self.config.n) + numbered(VERIFIER, self.config.verifiers)

    def structure(self) -> Topology:
        """Every verifier reads every generator's candidate."""
        cfg = self.config
        return Topology.layered([numbered(GENERATOR, cfg.n), numbered(VERIFIER, cfg.verifiers)])

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        aspects = ctx.rng.sample(cfg.aspects, cfg.draw) if cfg.draw else list(cfg.aspects)
        generator_names = numbered(GENERATOR, cfg.n)
        verifier_names = numbered(VERIFIER, len(aspects))
        ctx.topology = self.structure()
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

        temperature = cfg.verifier_temperature
        sampling = {} if temperature is None else {"temperature": temperature}
        verdicts: list[list[bool | None]] = [[None] * len(aspects) for _ in candidates]
        approvals = [0] * len(candidates)

        async def verify(i: int, j: int) -> None:
            # verifier_j checks aspect j; a fresh conversation for each candidate
            agent = ctx.agent(verifier_names[j], role=VERIFIER, **sampling)
            if cfg.verification == "critique":
                prompt = critique_prompt(task, candidates[i], aspects[j])
                await agent.reply(prompt, round=1, kind="critique")
                said, _ = await ask(agent, APPROVAL_PROMPT, Approval, round=1, kind="verdict")
            else:
                prompt = verify_prompt(task, candidates[i], aspects[j])
                said, _ = await ask(agent, prompt, Verdict, round=1, kind="verdict")
            verdicts[i][j] = read_verdict(said.content)
            approvals[i] += verdicts[i][j] is True
            best = best_candidate(approvals)
            ctx.propose(candidates[best], candidate=best + 1, approvals=list(approvals))

        await asyncio.gather(
            *(verify(i, j) for i in range(len(candidates)) for j in range(len(aspects)))
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
                "aspects": aspects,
                "chosen": chosen + 1,
                "approvals": approvals,
                "tied": [i + 1 for i in tied],
                "verdicts": verdicts,
                "unreadable": sum(v is None for row in verdicts for v in row),
            },
        )
