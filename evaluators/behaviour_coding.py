"""``behaviour_coding``: a base evaluator's verdict, plus every discussion message coded for six
behaviours by two judge models, so a run can report how often agents do what and how far the
two judges agree (Cohen's kappa per behaviour, :func:`behaviour_agreement`).

Written for ``free_discussion`` (seed paper: "Who Am I, and Who Else Is Here?"; its arXiv id is
not recorded in our notes), whose agents have no roles, to measure whether they differentiate
anyway. The flags, their definitions, the prompt and the two-judge design are OUR OWN, not the
paper's coding scheme. A message may carry any number of flags:

* ``proposes_solution``: it puts forward an answer, or a concrete step toward one, as its own.
* ``challenges``: it disputes, doubts or points out an error in something another participant
  said.
* ``agrees_or_defers``: it endorses another participant's answer or reasoning, or gives up its
  own position in favour of another's.
* ``asks_question``: it asks the group, or one participant, a question.
* ``synthesizes``: it combines or summarizes the contributions of two or more participants.
* ``coordinates``: it organizes the group's work: how to proceed, who does what, or calling
  for a decision.

The verdict (value, correct, extracted) is the ``base`` evaluator's, unchanged. Every message
of the sample's transcript (``ctx.transcript``) is coded by ``judge_a`` and by ``judge_b``: one
call per message per judge, at temperature 0, recorded as scoring (never the method's cost or
budget). A judge reads the question (without its answer-format instruction), the messages that
came before the coded one, and the coded one; never the gold, the verdict, or the other
judge's codes. "Before" is by (round, ``turn`` metadata): free_discussion's turns are fully
ordered; messages of one round of a concurrent method (no turn) do not see each other, as their
agents did not. The reply is a JSON object of six booleans (native structured output where the
judge model supports it); a reply that cannot be read leaves the message uncoded by that judge
(``null``), never an error. A judge that fails (:class:`LLMError`) fails the sample, as in
``llm_judge``.

The codes are in ``Score.details["behaviour"]``::

    {"flags": [...six names...], "judges": {"a": "<model>", "b": "<model>"},
     "messages": [{"sender": "participant_1", "round": 0, "turn": 0, "kind": "message",
                   "a": {"proposes_solution": true, ...} | null, "b": {...} | null}, ...]}
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from maslab.analysis.agreement import Agreement
from maslab.bench.evaluation import (
    Evaluator,
    Judge,
    Score,
    get_evaluator,
    model_spec,
    register_evaluator,
)
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.task import Task
from maslab.harness.sweep import judge_options, unused_judge
from maslab.kit.structured import Reply
from maslab.llm import ChatModel, ModelPool
from maslab.plugin_config import PluginConfig, Settings
from maslab.store.run_store import ResultRecord

NAME = "behaviour_coding"
JUDGES = ("a", "b")


class Codes(Reply):
    """A judge's reply: six behaviour flags of one message (their descriptions are the
    definitions the judges read)."""

    json_name = "behaviour_codes"

    proposes_solution: bool = Field(
        description="the message puts forward an answer, or a concrete step toward one, as its own"
    )
    challenges: bool = Field(
        description="the message disputes, doubts or points out an error in something another "
        "participant said"
    )
    agrees_or_defers: bool = Field(
        description="the message endorses another participant's answer or reasoning, or gives "
        "up its own position in favour of another's"
    )
    asks_question: bool = Field(
        description="the message asks the group, or one participant, a question"
    )
    synthesizes: bool = Field(
        description="the message combines or summarizes the contributions of two or more "
        "participants"
    )
    coordinates: bool = Field(
        description="the message organizes the group's work: how to proceed, who does what, "
        "or calling for a decision"
    )


BEHAVIOURS: tuple[str, ...] = tuple(Codes.model_fields)

SYSTEM = (
    "You code the behaviour of one message from a group discussion about a question. You do "
    "not answer the question yourself, and you do not judge whether anyone is right."
)


def coding_prompt(question: str, earlier: list[Message], message: Message) -> str:
    before = "\n\n".join(f"[{m.sender}]\n{m.content.strip()}" for m in earlier)
    definitions = "\n".join(
        f"- {flag}: true if {Codes.model_fields[flag].description}." for flag in BEHAVIOURS
    )
    return (
        f"The question under discussion:\n\n{question}\n\n"
        f"The discussion before the message:\n\n{before or '(nothing yet)'}\n\n"
        f"The message to code, from {message.sender}:\n\n{message.content.strip()}\n\n"
        f"Code only this message. Each flag is independent of the others:\n{definitions}\n\n"
        f"{Codes.instructions()}"
    )


def _position(message: Message) -> tuple[int, int]:
    turn = message.metadata.get("turn")
    return (message.round or 0, turn if isinstance(turn, int) else 0)


def read_codes(reply: str) -> dict[str, bool] | None:
    """The six flags of a judge's reply, or None when it holds no readable set of them."""
    codes = Codes.parse(reply)
    return None if codes is None else codes.model_dump()


@register_evaluator(NAME)
class BehaviourCodingEvaluator(Evaluator):
    """The base evaluator's verdict; two judges code every message for six behaviours."""

    class Config(PluginConfig):
        judge_a: str = Field(description="the first coding judge's model spec")
        judge_b: str = Field(description="the second coding judge's model spec")
        base: str = Field("numeric", description="the evaluator whose verdict the score is")
        judge: str | None = Field(
            None, description="the base evaluator's judge model, when it asks one (llm_judge)"
        )

        @field_validator("base")
        @classmethod
        def _another(cls, base: str) -> str:
            if base == NAME:
                raise ValueError("base must be another evaluator")
            return base

    config: Config

    def __init__(
        self,
        config: Settings = None,
        *,
        judge_a: str | ChatModel,
        judge_b: str | ChatModel,
        judge: str | ChatModel | None = None,
        models: ModelPool | None = None,
        **options: Any,
    ) -> None:
        """Args:
        config: Options as a mapping or a ``Config`` (``base``, ...).
        judge_a: The first coding judge: a spec (the ``judge_a`` option) or a model handle.
        judge_b: The second coding judge.
        judge: The base evaluator's judge, when it takes one (``llm_judge``).
        models: The run's model pool (the runner gives it).
        **options: Options as keywords (``base``).
        """
        given = {"judge_a": judge_a, "judge_b": judge_b, "judge": judge}
        specs = {key: model_spec(model) for key, model in given.items() if model is not None}
        super().__init__(config, **specs, **options)
        base, judge = self.config.base, judge if judge is not None else self.config.judge
        scoring: dict[str, Any] = judge_options(base, judge)  # type: ignore[arg-type]
        if judge is not None and not scoring:
            raise unused_judge(f"{NAME} judge", [base])
        base_cls = get_evaluator(base)
        if "models" in inspect.signature(base_cls).parameters:
            scoring["models"] = models
        self.base: Evaluator = base_cls(**scoring)
        self.judges = {
            "a": Judge(judge_a, models, agent="judge_a"),
            "b": Judge(judge_b, models, agent="judge_b"),
        }

    def check_gold(self, task: Task) -> None:
        self.base.check_gold(task)

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        verdict, messages = await asyncio.gather(
            self.base.score(task, answer, ctx=ctx), self.code(task, ctx)
        )
        behaviour = {
            "flags": list(BEHAVIOURS),
            "judges": {key: judge.model.name for key, judge in self.judges.items()},
            "messages": messages,
        }
        return verdict.model_copy(update={"details": {**verdict.details, "behaviour": behaviour}})

    async def code(self, task: Task, ctx: Context | None) -> list[dict[str, Any]]:
        """Every message of the sample's transcript with both judges' codes (None: unread)."""
        transcript = list(ctx.transcript) if ctx is not None else []
        question = task.model_copy(update={"instruction": ""}).prompt()

        async def ask(judge: Judge, message: Message) -> dict[str, bool] | None:
            earlier = sorted(
                (m for m in transcript if _position(m) < _position(message)),
                key=lambda m: (*_position(m), m.sender),
            )
            reply = await judge.ask(
                SYSTEM,
                coding_prompt(question, earlier, message),
                ctx,
                **Codes.native_params(judge.model),
            )
            return read_codes(reply)

        codes = await asyncio.gather(
            *(ask(self.judges[key], m) for m in transcript for key in JUDGES)
        )
        return [
            {
                "sender": m.sender,
                "round": m.round,
                "turn": m.metadata.get("turn"),
                "kind": m.kind,
                **dict(zip(JUDGES, codes[2 * i : 2 * i + 2], strict=True)),
            }
            for i, m in enumerate(transcript)
        ]

    async def aclose(self) -> None:
        await asyncio.gather(self.base.aclose(), *(j.aclose() for j in self.judges.values()))


@dataclass(frozen=True)
class BehaviourAgreement:
    """Judge A against judge B over a run's coded messages, per behaviour.

    In each flag's :class:`~maslab.analysis.agreement.Agreement`, ``both_correct`` counts the
    messages
    both judges flagged, ``both_wrong`` those neither flagged, ``only_a`` and ``only_b`` those
    one judge flagged; its ``kappa`` is Cohen's kappa. ``excluded`` counts the messages left
    out because a judge could not code them.
    """

    flags: dict[str, Agreement]
    coded: int
    excluded: int


def behaviour_agreement(records: Iterable[ResultRecord]) -> BehaviourAgreement:
    """Per behaviour, the 2×2 table of judge A's and judge B's flags over every message both
    coded, in the records' ``Score.details["behaviour"]`` (records without it are skipped)."""
    tables: dict[str, Counter[tuple[bool, bool]]] = {flag: Counter() for flag in BEHAVIOURS}
    coded = excluded = 0
    for record in records:
        behaviour = record.score.details.get("behaviour", {}) if record.score else {}
        for message in behaviour.get("messages", []):
            a, b = message["a"], message["b"]
            if a is None or b is None:
                excluded += 1
                continue
            coded += 1
            for flag in BEHAVIOURS:
                tables[flag][a[flag], b[flag]] += 1
    return BehaviourAgreement(
        flags={
            flag: Agreement(
                both_correct=t[True, True],
                both_wrong=t[False, False],
                only_a=t[True, False],
                only_b=t[False, True],
            )
            for flag, t in tables.items()
        },
        coded=coded,
        excluded=excluded,
    )


def format_behaviour_agreement(result: BehaviourAgreement) -> str:
    """One line per behaviour: the four counts, percent agreement and Cohen's kappa."""
    width = max(map(len, BEHAVIOURS))
    lines = [
        f"judge A vs judge B: {result.coded} messages coded by both, {result.excluded} excluded "
        "(uncoded by a judge)",
        f"{'behaviour':<{width}}  both  only A  only B  neither  agreement   kappa",
    ]
    for flag, t in result.flags.items():
        lines.append(
            f"{flag:<{width}}  {t.both_correct:>4}  {t.only_a:>6}  {t.only_b:>6}  "
            f"{t.both_wrong:>7}  {t.percent_agreement:>8.1f}%  {t.kappa:>6.3f}"
        )
    return "\n".join(lines)
