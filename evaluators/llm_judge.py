"""``llm_judge``: a judge model extracts the final answer, then compares it with the gold.

Both steps run at temperature 0. The judge never sees the gold while extracting, and only the
extracted answer (not the whole response) while comparing. A reply that is neither CORRECT nor
INCORRECT scores wrong ("unclear verdict: ..."); judge failures (:class:`LLMError`) propagate so
the runner records the sample as an error to retry, never as a silent score. A judge model that
supports structured output is held to the :class:`Verdict` reply
(``{"verdict": "CORRECT" | "INCORRECT"}``), which reads the same way.

``mode="xverify"`` asks the judge as an xVerify verifier expects (Chen et al., "xVerify:
Efficient Answer Verifier for Reasoning Model Evaluations", arXiv 2504.10481), the protocol
MASLab scores with: one call per answer, one user turn (no system turn, so the served model's
chat template adds the default one it was fine-tuned under) holding an instruction and then the
question, the whole response and the gold, in that order and labelled as xVerify's published
template labels them (IAAR-Shanghai/xVerify ``src/xVerify/prompts/judge_prompt.py``, also
MASLab's ``evaluations/evaluate_xverify.py``). The instruction is in our own words. xVerify
finds the final answer in the response itself, so there is no extraction step; the reply is
one word, Correct or Incorrect (:func:`parse_xverify_verdict`), and anything else scores as an
unclear verdict does in the default mode. The call runs at temperature 0 (xVerify's own client
uses 0.1, MASLab's 0.5).
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


_XVERIFY_PROMPT = """You grade a response to a question against the question's correct answer. \
You are given the question, the response (the output sentence) and the correct answer. Reply \
with one word: Correct if the response answers the question with the correct answer, \
Incorrect if it does not.

How to grade:
1. If the response gives more than one answer, grade the one it settles on last; a final \
answer that is missing or unclear is Incorrect.
2. In mathematics, an answer written in another form but equal in value is Correct.
3. If the question lists options, naming the right option by its label or by its text is \
Correct.
4. If the question lists no options, the response must say what the correct answer says, in \
meaning.

Question: \"\"\"{question}\"\"\"

Output sentence: \"\"\"{response}\"\"\"

Correct answer: {gold}

Judgement:
"""


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


_XVERIFY_VERDICT = re.compile(r"\W*(correct|incorrect)\W*", re.IGNORECASE)


def parse_xverify_verdict(reply: str) -> bool | None:
    """True/False for an xVerify reply that is the one word Correct/Incorrect (any case, with
    markup or punctuation around it: "[Correct]", "**incorrect**."), None for anything else."""
    match = _XVERIFY_VERDICT.fullmatch(reply)
    return None if match is None else match.group(1).lower() == "correct"


@register_evaluator("llm_judge")
class LLMJudgeEvaluator(Evaluator):
    """LLM judge at temperature 0: extract the final answer, then compare with gold; or, in
    ``xverify`` mode, one xVerify-style call on the whole response."""

    class Config(PluginConfig):
        judge: str = Field(description="the judge model's spec (openai:gpt-4o-mini)")
        mode: Literal["default", "xverify"] = Field(
            "default",
            description="default: extract, then compare (two calls); xverify: one call in the "
            "form an xVerify verifier model expects (question, response, gold), read as "
            "Correct / Incorrect",
        )

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
        if self.config.mode == "xverify":
            return await self._xverify(question, answer, gold, ctx)
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

    async def _xverify(self, question: str, answer: str, gold: str, ctx: Context | None) -> Score:
        """One call in xVerify's form; ``extracted`` is the response as judged (xVerify names
        no extracted answer)."""
        prompt = _XVERIFY_PROMPT.format(question=question, response=answer, gold=gold)
        reply = await self.judge.ask(None, prompt, ctx)
        verdict = parse_xverify_verdict(reply)
        if verdict is None:
            return Score.graded(False, answer, gold, f"unclear verdict: {reply.strip()[:200]!r}")
        return Score.graded(verdict, answer, gold, "" if verdict else "xVerify: Incorrect")

    async def aclose(self) -> None:
        await self.judge.aclose()
