"""Failure attribution: which agent made a failed sample fail, and at which step (after Zhang et
al., "Which Agent Causes Task Failures and When? On Automated Failure Attribution of LLM
Multi-Agent Systems", arXiv 2505.00212, ICML 2025: the Who&When benchmark and its three
strategies).

A sample's log is its transcript: step i is its i-th message (0-based), written by its sender.
An LLM judge reads the task, the gold answer and the sample's final answer beside the log, and
names the responsible agent and the decisive step (the first message that set the sample on
its way to the wrong answer), with a reason. Three strategies, n the log's steps:

- ``all_at_once``: the whole log, one call, which names the step (and so its sender).
  1 call.
- ``step_by_step``: the log up to step i, for i = 0, 1, ...: is step i the decisive one? The
  first yes names it; none names no step. i* + 1 calls for the decisive step i* (n when none).
- ``binary_search``: the steps lo..hi, first the whole log: in which half, lo..mid or
  mid+1..hi, is the decisive step? The chosen half is searched again until one step is left.
  ⌈log₂ n⌉ calls (0 for a log of one step).

The judge's replies are :class:`~maslab.kit.structured.Reply` models. A step out of range, an
unreadable reply, or a yes never given leave the sample unattributed (agent, role and step None)
in ``all_at_once`` and ``step_by_step``; in ``binary_search`` an unreadable reply takes the first
half. The agent is always the named step's sender: a judge cannot name one that did not speak.

Deviations from Who&When: the judge always sees the gold answer (their "with ground truth"
setting) and the sample's final answer and score explanation; the prompts are our own; an
all-at-once judge names only the step, whose sender is the agent (they ask for both).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from maslab.analysis.strategies import Strategy
from maslab.core.context import Context
from maslab.kit.structured import Reply, ask
from maslab.llm.pool import ModelPool
from maslab.store.records import AttributionRecord, ResultRecord, Trace
from maslab.store.run_store import RunStore

JUDGE = "attribution_judge"
SHOWN_CHARS = 2000
"""Characters of one message the judge is shown (a longer one is cut, the cut marked)."""

SYSTEM = (
    "You audit the transcripts of multi-agent systems that failed a task. You find the one "
    "message that set the system on its way to the wrong result, and the agent that wrote it."
)


class StepChoice(Reply):
    """All at once: the decisive step."""

    step: int = Field(description="the number of the decisive step")
    reason: str = Field(description="why this step made the task fail")


class StepCheck(Reply):
    """Step by step: whether the latest step is the decisive one."""

    decisive: bool = Field(description="true if this step is the decisive mistake")
    reason: str = Field(description="why, in one or two sentences")


class HalfChoice(Reply):
    """Binary search: which half holds the decisive step."""

    half: Literal["first", "second"] = Field(description="the half with the decisive step")
    reason: str = Field(description="why, in one or two sentences")


@dataclass(frozen=True)
class Found:
    """A strategy's finding: the decisive step (None: none named) and the reason given."""

    step: int | None
    reason: str


def _shown(text: str) -> str:
    cut = len(text) - SHOWN_CHARS
    return text if cut <= 0 else f"{text[:SHOWN_CHARS]} [... {cut} more characters]"


def log_text(trace: Trace, first: int, last: int) -> str:
    """Steps ``first``..``last`` (inclusive) of the log, each numbered and signed."""
    return "\n\n".join(
        f"[step {i}] {trace.messages[i].sender}:\n{_shown(trace.messages[i].content)}"
        for i in range(first, last + 1)
    )


def case_text(trace: Trace, record: ResultRecord) -> str:
    """What the judge knows of the sample besides its log: the task, the gold answer and the
    answer it gave, and why that was scored wrong."""
    why = record.score.explanation if record.score is not None else ""
    return (
        f"The task:\n{trace.prompt or '(not recorded)'}\n\n"
        f"The correct answer: {record.gold or '(not recorded)'}\n"
        f"The system's final answer: {_shown(record.answer or '(none)')}"
        + (f"\nWhy it was scored wrong: {why}" if why else "")
    )


async def all_at_once(judge: Context, trace: Trace, case: str) -> Found:
    n = len(trace.messages)
    prompt = (
        f"{case}\n\nThe transcript, {n} steps:\n\n{log_text(trace, 0, n - 1)}\n\n"
        "Which step is the decisive mistake: the first message that set the system on its way "
        "to the wrong answer?"
    )
    _, choice = await ask(judge.agent(JUDGE, system=SYSTEM), prompt, StepChoice)
    if choice is None or not 0 <= choice.step < n:
        return Found(None, choice.reason if choice is not None else "")
    return Found(choice.step, choice.reason)


async def step_by_step(judge: Context, trace: Trace, case: str) -> Found:
    agent = judge.agent(JUDGE, system=SYSTEM)
    for i in range(len(trace.messages)):
        prompt = (
            f"{case}\n\nThe transcript up to step {i}:\n\n{log_text(trace, 0, i)}\n\n"
            f"Is step {i} the decisive mistake: the first message that set the system on its "
            "way to the wrong answer? Judge this step only; earlier ones were judged sound."
        )
        _, check = await ask(agent, prompt, StepCheck, remember=False)
        if check is not None and check.decisive:
            return Found(i, check.reason)
    return Found(None, "")


async def binary_search(judge: Context, trace: Trace, case: str) -> Found:
    agent = judge.agent(JUDGE, system=SYSTEM)
    first, last, reason = 0, len(trace.messages) - 1, ""
    while first < last:
        middle = (first + last) // 2
        prompt = (
            f"{case}\n\nSteps {first} to {last} of the transcript:\n\n"
            f"{log_text(trace, first, last)}\n\n"
            f"The decisive mistake (the first message that set the system on its way to the "
            f"wrong answer) is in one of these steps. Is it in the first half (steps {first} to "
            f"{middle}) or the second half (steps {middle + 1} to {last})?"
        )
        _, choice = await ask(agent, prompt, HalfChoice, remember=False)
        second = choice is not None and choice.half == "second"
        first, last = (middle + 1, last) if second else (first, middle)
        reason = choice.reason if choice is not None else ""
    return Found(first, reason)


FINDERS = {"all_at_once": all_at_once, "step_by_step": step_by_step,
           "binary_search": binary_search}  # fmt: skip


def calls_bound(strategy: Strategy, steps: int) -> int:
    """The judge's calls on a log of ``steps`` steps at most (exactly, for all_at_once and
    binary_search)."""
    if strategy == "all_at_once":
        return 1
    if strategy == "step_by_step":
        return steps
    return math.ceil(math.log2(steps)) if steps > 1 else 0


async def attribute(
    judge: Context, judge_name: str, record: ResultRecord, trace: Trace, strategy: Strategy
) -> AttributionRecord:
    """The attribution of one failed sample by ``strategy``, the judge's calls made in
    ``judge`` (a context of its own: its ledger is the sample's analysis spend)."""
    found = Found(None, "no message to judge")
    if trace.messages:
        found = await FINDERS[strategy](judge, trace, case_text(trace, record))
    agent = trace.messages[found.step].sender if found.step is not None else None
    totals = judge.ledger.totals()
    return AttributionRecord(
        task_id=record.task_id,
        repeat=record.repeat,
        strategy=strategy,
        judge=judge_name,
        agent=agent,
        role=trace.roles.get(agent, agent) if agent is not None else None,
        step=found.step,
        reason=found.reason,
        steps=len(trace.messages),
        calls=totals.calls,
        prompt_tokens=totals.prompt_tokens,
        completion_tokens=totals.completion_tokens,
    )


def failed(records: Iterable[ResultRecord]) -> list[ResultRecord]:
    """The samples to attribute: scored wrong (unparsed ones too), not errored (an errored
    sample has no verdict to explain) and not measurements."""
    return [
        r
        for r in records
        if r.status != "error" and r.score is not None and not r.score.measurement and not r.correct
    ]


def tally(attributions: Sequence[AttributionRecord], by: Literal["role", "agent"]) -> Counter[str]:
    """How many failures each role (or agent) is held responsible for; ``(none)`` for those the
    judge attributed to no step."""
    return Counter(getattr(a, by) or "(none)" for a in attributions)


async def attribute_run(
    store: RunStore,
    judge: str,
    strategy: Strategy,
    *,
    models: ModelPool,
    concurrency: int = 4,
) -> list[AttributionRecord]:
    """Attribute every failed sample of the run in ``store`` that ``judge`` has not attributed
    by ``strategy`` yet, ``concurrency`` samples at a time; each attribution is appended to
    the run's ``attributions.jsonl`` as it is made, under the run's lock. The judge samples at
    temperature 0, in a context per sample keyed like the sample's (its run seed, task and
    repeat). Returns the new attributions."""
    seed = store.manifest().seed
    done = {a.key for a in store.attributions()}
    todo = [r for r in failed(store.results()) if (*r.key, strategy, judge) not in done]
    gate = asyncio.Semaphore(concurrency)
    with store.attributing() as append:
        traces = dict(store.traces_of([r.key for r in todo]))

        async def one(record: ResultRecord) -> AttributionRecord | None:
            trace = traces.get(record.key)
            if trace is None:
                return None
            async with gate:
                ctx = Context(
                    judge,
                    models=models,
                    sample_id=record.task_id,
                    repeat=record.repeat,
                    seed=seed,
                    sampling={"temperature": 0},
                )
                made = await attribute(ctx, judge, record, trace, strategy)
            append(made)
            return made

        return [a for a in await asyncio.gather(*map(one, todo)) if a is not None]
