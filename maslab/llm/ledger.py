"""The usage ledger: one record per model call, with totals that separate cached from spent.

Calls have a purpose: ``method`` (the method's own work, its cost) or ``scoring`` (an evaluator's
judge, reported apart so that the scorer never changes a method's cost).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from maslab.llm.types import ChatMessage, FunctionCall

Purpose = Literal["method", "scoring"]


@dataclass(slots=True)
class CallRecord:
    """One model call of one sample. Failed calls have ``error`` set and zero tokens.

    ``estimated``: the server reported no token counts, so the tokens are an estimate.
    ``finish_reason``: why the reply ended, as the server said ("length": cut at max_tokens).
    ``tool_calls``: the functions the reply asked for (native tool calling).
    ``attempts``: requests the retry layer sent for the call (1 unless it retried).
    ``queued_s``: of ``latency_s``, the wait at the server before the reply was computed (0
    where the server does not say).
    """

    sample_id: str
    agent: str | None
    round: int | None
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    queued_s: float = 0.0
    cached: bool = False
    estimated: bool = False
    error: str | None = None
    draw: int = 0
    purpose: Purpose = "method"
    messages: tuple[ChatMessage, ...] = ()
    response: str | None = None
    finish_reason: str | None = None
    tool_calls: tuple[FunctionCall, ...] = ()
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Its fields as plain data, for a trace line; the message dicts are shared, not copied."""
        out = {name: getattr(self, name) for name in _RECORD_FIELDS}
        out["tool_calls"] = tuple(
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.tool_calls
        )
        return out


@dataclass(frozen=True, slots=True)
class UsageTotals:
    calls: int = 0
    cached_calls: int = 0
    failed_calls: int = 0
    estimated_calls: int = 0
    prompt_tokens: int = 0  # spent: fresh calls only
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # replayed from the response cache
    cached_completion_tokens: int = 0
    latency_s: float = 0.0
    queued_s: float = 0.0

    @property
    def total_tokens(self) -> int:
        """Newly spent tokens."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def used_tokens(self) -> int:
        """Tokens used: newly spent plus replayed from the cache."""
        return self.total_tokens + self.cached_prompt_tokens + self.cached_completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """Its fields as a dict (what ``dataclasses.asdict`` gives, without its deep copy)."""
        return {name: getattr(self, name) for name in _TOTALS_FIELDS}


_RECORD_FIELDS = tuple(f.name for f in fields(CallRecord))
_TOTALS_FIELDS = tuple(f.name for f in fields(UsageTotals))


def _totals(rows: list[CallRecord]) -> UsageTotals:
    """The sums over ``rows``, in one pass (a sample's record asks for several)."""
    cached = failed = estimated = prompt = completion = cached_prompt = cached_completion = 0
    latency = queued = 0.0
    for r in rows:
        latency += r.latency_s
        queued += r.queued_s
        estimated += r.estimated
        if r.cached:
            cached += 1
            cached_prompt += r.prompt_tokens
            cached_completion += r.completion_tokens
        elif r.error is None:
            prompt += r.prompt_tokens
            completion += r.completion_tokens
        if r.error is not None:
            failed += 1
    return UsageTotals(
        calls=len(rows),
        cached_calls=cached,
        failed_calls=failed,
        estimated_calls=estimated,
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_prompt_tokens=cached_prompt,
        cached_completion_tokens=cached_completion,
        latency_s=latency,
        queued_s=queued,
    )


@dataclass
class UsageLedger:
    records: list[CallRecord] = field(default_factory=list)

    def add(self, record: CallRecord) -> None:
        self.records.append(record)

    def totals(
        self,
        *,
        model: str | None = None,
        agent: str | None = None,
        purpose: Purpose | None = "method",
    ) -> UsageTotals:
        """Sums over the records of ``purpose`` (None: all), optionally of one model or agent."""
        return _totals(
            [
                r
                for r in self.records
                if (model is None or r.model == model)
                and (agent is None or r.agent == agent)
                and (purpose is None or r.purpose == purpose)
            ]
        )

    def by_model(self, purpose: Purpose | None = "method") -> dict[str, UsageTotals]:
        """Totals per model, in the order models were first called."""
        models = dict.fromkeys(
            r.model for r in self.records if purpose is None or r.purpose == purpose
        )
        return {m: self.totals(model=m, purpose=purpose) for m in models}
