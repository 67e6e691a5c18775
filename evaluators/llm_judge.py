"""``llm_judge``: a judge model extracts the final answer, then compares it with the gold.

Both steps run at temperature 0. The judge never sees the gold while extracting, and only the
extracted answer (not the whole response) while comparing. A reply that is neither CORRECT nor
INCORRECT scores wrong ("unclear verdict: ..."); judge failures (:class:`LLMError`) propagate so
the runner records the sample as an error to retry, never as a silent score. A judge model that
supports structured output is held to the :class:`Verdict` reply
(``{"verdict": "CORRECT" | "INCORRECT"}``), which reads the same way.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from maslab.bench.evaluation import (
    Evaluator,
    Judge,
    Score,
    gold_of,
    model_spec,
    register_evaluator,
)
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.kit.structured import Reply
from maslab.llm import ChatModel, ModelPool
from maslab.plugin_config import PluginConfig, Settings

NO_ANSWER = "NO_ANSWER"

_EXTRACT_SYSTEM = (
    "You read a response to a question and report the final answer the response commits to. "
    "You do not solve the question yourself and you do not judge whether the answer is right."
)
_EXTRACT_USER = """Question:
{question}

Response:
{response}

What final answer does the response give? Reply with that answer only, as the response states \
it, without any explanation. If the response gives no final answer, reply {no_answer}."""

_COMPARE_SYSTEM = (
    "You check whether a candidate answer to a question matches the reference answer. "
    "Judge meaning, not form: equal numbers, equivalent expressions, the same quantity with or "
    "without units, or an option letter and that option's text all count as a match."
)
_COMPARE_USER = """Question:
{question}

Reference answer: {gold}
Candidate answer: {candidate}

Does the candidate answer match the reference answer? Reply with one word: CORRECT or INCORRECT."""


class Verdict(Reply):
    """The comparison's reply where the judge model supports structured output (in text, the
    verdict word alone)."""

    verdict: Literal["CORRECT", "INCORRECT"]


_NO_ANSWER_REPLY = re.compile(r"\W*no[\s_-]*answer\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z]+")
_VERDICTS = {"correct": True, "incorrect": False}
_NEGATIONS = {"not", "no", "isn"}


def parse_verdict(reply: str) -> bool | None:
    """True/False for a CORRECT/INCORRECT reply, None if the reply does not say which.

    A JSON :class:`Verdict` is taken as it says. A reply that starts with a verdict word is
    taken at that word ("Incorrect: the candidate is not correct"); otherwise exactly one kind
    of verdict word must appear, and "correct" only counts with no negation in the reply ("the
    candidate is not correct" is unclear).
    """
    structured = Verdict.parse(reply)
    if structured is not None:
        return structured.verdict == "CORRECT"
    words = _WORD.findall(reply.lower())
    if words and words[0] in _VERDICTS:
        return _VERDICTS[words[0]]
    said = {_VERDICTS[word] for word in words if word in _VERDICTS}
    if said == {False}:
        return False
    if said == {True} and _NEGATIONS.isdisjoint(words):
        return True
    return None


@register_evaluator("llm_judge")
class LLMJudgeEvaluator(Evaluator):
    """Two-step LLM judge at temperature 0: extract the final answer, then compare with gold."""

    class Config(PluginConfig):
        judge: str = Field(description="the judge model's spec (openai:gpt-4o-mini)")

    config: Config

    def __init__(
        self,
        config: Settings = None,
        *,
        judge: str | ChatModel,
        models: ModelPool | None = None,
        **options: Any,
    ) -> None:
        """Args:
        config: Options as a mapping or a ``Config``.
        judge: The judge: a spec (the ``judge`` option) or a model handle (its name recorded).
        models: The run's model pool the spec is loaded from (the runner gives it).
        """
        super().__init__(config, judge=model_spec(judge), **options)
        self.judge = Judge(judge, models)

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        gold = gold_of(task)
        question = task.model_copy(update={"instruction": ""}).prompt()  # text and options
        extracted = (
            await self.judge.ask(
                _EXTRACT_SYSTEM,
                _EXTRACT_USER.format(question=question, response=answer, no_answer=NO_ANSWER),
                ctx,
            )
        ).strip()
        if not extracted or _NO_ANSWER_REPLY.match(extracted):
            return Score.unparsable("the judge found no final answer")
        reply = await self.judge.ask(
            _COMPARE_SYSTEM,
            _COMPARE_USER.format(question=question, gold=gold, candidate=extracted),
            ctx,
            **Verdict.native_params(self.judge.model),
        )
        verdict = parse_verdict(reply)
        if verdict is None:
            return Score.graded(False, extracted, gold, f"unclear verdict: {reply.strip()[:200]!r}")
        return Score.graded(verdict, extracted, gold)

    async def aclose(self) -> None:
        await self.judge.aclose()
