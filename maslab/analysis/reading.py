"""A reader's verdict on a sample: is its transcript worth a researcher's time? An LLM judge
reads the task, the gold, the answer and the transcript against a fixed rubric, and says yes or
no with a reason: what the signals study (:mod:`maslab.studies.catalogue.signals`) measures
triage's precision against.

One call per sample, at temperature 0, in a context keyed like the sample's (its run seed,
task and repeat). An unreadable reply is no verdict (None), counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from maslab.analysis.attribution import case_text, log_text
from maslab.core.context import Context
from maslab.kit.parsing import Flag, Text
from maslab.kit.structured import Reply, ask
from maslab.store.records import ResultRecord, Trace

READER = "reader"
RUBRIC = (
    "You help a researcher decide which runs of a multi-agent system to read closely. A sample "
    "is worth reading when its transcript shows something the researcher should see: a wrong "
    "answer reached through a visible mistake, a right answer abandoned for a wrong one, "
    "agents who disagree and never settle it, replies that repeat themselves or break the "
    "asked format, a reply cut short, or a score that looks wrong for the answer given. A "
    "transcript that reaches its answer plainly, right or wrong, is not worth reading."
)


class Worth(Reply):
    """The reader's verdict."""

    worth_reading: Flag = Field(description="true if the researcher should read this sample")
    reason: Text = Field("", description="why, in one sentence")


@dataclass(frozen=True)
class Reading:
    """A verdict (None: the reply held none) and its reason."""

    worth: bool | None
    reason: str


async def read(reader: Context, record: ResultRecord, trace: Trace) -> Reading:
    """``reader``'s verdict on the sample ``record`` with its ``trace``."""
    n = len(trace.messages)
    log = log_text(trace, 0, n - 1) if n else "(no messages recorded)"
    prompt = (
        f"{case_text(trace, record)}\nIts verdict: {'right' if record.correct else 'wrong'}"
        f"\n\nThe transcript, {n} steps:\n\n{log}\n\nIs this sample worth reading?"
    )
    _, verdict = await ask(reader.agent(READER, system=RUBRIC), prompt, Worth)
    if verdict is None:
        return Reading(None, "")
    return Reading(verdict.worth_reading, verdict.reason)
