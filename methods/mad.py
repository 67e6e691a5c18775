"""MAD: Multi-Agent Debate with an affirmative side, a negative side and a moderator.

Liang, He, Jiao, Wang, Wang, Wang, Yang, Shi, Tu. "Encouraging Divergent Thinking in Large
Language Models through Multi-Agent Debate". arXiv:2305.19118 (EMNLP 2024).

Algorithm (R = ``max_rounds``), strictly sequential:

1. Round r = 1..R: the affirmative debater speaks (round 1: answers the question; later: replies
   to the negative's latest argument), then the negative debater (round 1: is told it disagrees
   with the affirmative's answer; later: replies to the affirmative's latest argument), then the
   moderator reads both arguments of the round and returns a JSON verdict (preference yes/no,
   supported side, reason, answer). Each debater keeps its own history; so does the moderator.
2. Stop as soon as a verdict states a preference and a non-empty answer: that answer is final.
3. Otherwise, after R rounds, a judge (the moderator's system prompt) lists the candidate
   answers of both sides' first-round arguments, then decides; its answer is final.

The solution text is "Final answer:" and the decided answer alone, so evaluators extract that
answer and not a candidate quoted in the reason; the reason is in ``metadata["reason"]``.

LLM calls: 3r for an early stop after round r, else 3R + 2; between 3 and 3R + 2 (3-11 at R=3).

Budget stop: the latest debater argument (a verdict or ruling that decides ends the run anyway).

Native structured output: where the model handle supports it, the verdict and the ruling are
requested with their JSON schema as well (same prompt, same calls); either way they are parsed
as below.

Deviations: prompts are our own paraphrase, and the JSON keys are ours. Verdicts are parsed
defensively (never ``eval``, unlike the official code and MASLab): a malformed verdict counts
as "no preference yet" and is recorded as ``None`` in ``metadata["verdicts"]``; an unparsable
judge ruling falls back to the judge's raw reply (``metadata["judge_parsed"] = False``). The
official code stops on any non-empty answer; we also require the stated preference, which is
what the moderator is asked to signal. MASLab returns only the bare answer string; we mark it
as the final answer and keep the reason in the metadata.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.parsing import Text
from maslab.kit.structured import Reply, ask

AFFIRMATIVE, NEGATIVE, MODERATOR, JUDGE = "affirmative", "negative", "moderator", "judge"


def _yes(value: object) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower().startswith("yes"))


ANSWER = Field(
    "", description="the answer, as the question's instructions ask for it, backslashes escaped"
)


class Ruling(Reply):
    """The judge's JSON reply: why, and the final answer (empty when it gave none)."""

    reason: Text = ""
    answer: Text = ANSWER


class Verdict(Reply):
    """The moderator's JSON reply after a round; ``preference`` must be present."""

    preference: Annotated[
        bool, BeforeValidator(_yes), WithJsonSchema({"type": "string", "enum": ["yes", "no"]})
    ]
    supported_side: Annotated[
        Text, WithJsonSchema({"type": "string", "enum": [AFFIRMATIVE, NEGATIVE]})
    ] = ""
    reason: Text = ""
    answer: Text = ANSWER


def debater_system(task: Task) -> str:
    return (
        "You are a debater taking part in a debate. The two sides need not end up agreeing: "
        f"the goal is to find the correct answer.\n\nThe topic of the debate is:\n\n{task.prompt()}"
    )


def moderator_system(task: Task) -> str:
    return (
        "You moderate a debate between two debaters, who will present and defend their answers "
        f"to this question:\n\n{task.prompt()}\n\nAt the end of each round you weigh their "
        "answers and decide which one is correct."
    )


def opening_prompt(task: Task) -> str:
    return f"{task.prompt()}\n\nGive your answer and the reasoning behind it."


def dissent_prompt(affirmative: str) -> str:
    return f"{affirmative}\n\nYou disagree with this answer. Give your own answer and your reasons."


def rebuttal_prompt(opponent: str) -> str:
    return f"{opponent}\n\nDo you agree with this view? Give your reasons and your answer."


def moderation_prompt(round: int, affirmative: str, negative: str) -> str:
    return (
        f"Round {round} of the debate is over.\n\nAffirmative side:\n{affirmative}\n\n"
        f"Negative side:\n{negative}\n\nJudge whether one answer is clearly the better one. If so, "
        "explain why you support that side and give the answer you believe is correct; the "
        "debate then ends. If not, leave the answer empty and the debate goes on."
    )


def candidates_prompt(affirmative: str, negative: str) -> str:
    return (
        f"Affirmative side:\n{affirmative}\n\nNegative side:\n{negative}\n\n"
        "Which candidate answers are on the table? List them without reasons."
    )


def judgement_prompt(task: Task) -> str:
    return (
        f"Back to the question:\n\n{task.prompt()}\n\nSummarise your reasons and give the answer "
        "you believe is correct."
    )


def final_text(ruling: Ruling | Verdict) -> str:
    """The decided answer alone, marked as final (a reason may quote other candidates)."""
    return f"Final answer:\n{ruling.answer}"


@register_method("mad")
class MAD(Method):
    """Affirmative vs negative debate; a moderator ends it early, else a judge decides."""

    roles = (AFFIRMATIVE, NEGATIVE, MODERATOR, JUDGE)
    paper = "Liang et al., arXiv 2305.19118"
    category = "debate"
    calls = "3r if the moderator decides in round r, else 3R+2 (3–11 at R=3)"

    class Config(MethodConfig):
        max_rounds: int = Field(3, ge=1)

    config: Config

    def structure(self) -> Topology:
        """The debaters read each other, the moderator reads both sides every round, and the
        judge (called when no verdict ends the debate) reads both sides' opening arguments."""
        edges = [
            (AFFIRMATIVE, NEGATIVE), (NEGATIVE, AFFIRMATIVE),
            (AFFIRMATIVE, MODERATOR), (NEGATIVE, MODERATOR),
            (AFFIRMATIVE, JUDGE), (NEGATIVE, JUDGE),
        ]  # fmt: skip
        return Topology.from_edges(edges, name="mad")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        rounds = self.config.max_rounds
        ctx.topology = self.structure()
        affirmative = ctx.agent(AFFIRMATIVE, system=debater_system(task))
        negative = ctx.agent(NEGATIVE, system=debater_system(task))
        moderator = ctx.agent(MODERATOR, system=moderator_system(task))

        async def argue(debater: Agent, r: int, prompt: str) -> str:
            said = await debater.reply(prompt, round=r)
            ctx.propose(said.content, side=debater.name, round=r)
            return said.content

        verdicts: list[dict[str, Any] | None] = []
        neg = ""
        for r in range(1, rounds + 1):
            if r == 1:
                aff = await argue(affirmative, r, opening_prompt(task))
                neg = await argue(negative, r, dissent_prompt(aff))
            else:
                aff = await argue(affirmative, r, rebuttal_prompt(neg))
                neg = await argue(negative, r, rebuttal_prompt(aff))
            _, verdict = await ask(
                moderator, moderation_prompt(r, aff, neg), Verdict, round=r, kind="verdict"
            )
            verdicts.append(None if verdict is None else verdict.model_dump())
            if verdict is not None and verdict.preference and verdict.answer:
                return Solution(
                    answer=final_text(verdict),
                    metadata={
                        "decided_by": MODERATOR,
                        "rounds": r,
                        "reason": verdict.reason,
                        "verdicts": verdicts,
                    },
                )

        judge = ctx.agent(JUDGE, system=moderator_system(task))
        openings = []
        for side in (AFFIRMATIVE, NEGATIVE):
            openings.append(ctx.transcript.filter(sender=side, round=1)[0].content)
        await judge.reply(candidates_prompt(*openings), round=rounds + 1, kind="judge")
        said, parsed = await ask(
            judge, judgement_prompt(task), Ruling, round=rounds + 1, kind="judge"
        )
        ruling = parsed or Ruling()
        return Solution(
            answer=final_text(ruling) if ruling.answer else said.content,
            metadata={
                "decided_by": JUDGE,
                "rounds": rounds,
                "reason": ruling.reason,
                "verdicts": verdicts,
                "judge_parsed": bool(ruling.answer),
            },
        )
