"""MedAgents: multi-disciplinary collaboration of domain experts around one report.

Tang, Zou, Zhang, Li, Zhao, Zhang, Cohan, Gerstein. "MedAgents: Large Language Models as
Collaborators for Zero-shot Medical Reasoning". arXiv:2311.10537 (Findings of ACL 2024).
Code: github.com/gersteinlab/MedAgents (method ``syn_verif``).

Algorithm (N question experts, M option experts, R consultation rounds at most):

1. Expert gathering: one classifier names the N subfields of the discipline (medicine) the
   question touches; another, reading the question and its options, names the M subfields
   that best tell the options apart. Both run concurrently; each answers with a JSON list.
2. Analysis proposition: question expert i (system: an expert in question domain i) analyses
   the question alone; then option expert j (an expert in option domain j) reads the question,
   the options and the N question analyses (in expert order) and weighs each option. The N
   question experts run concurrently, then the M option experts.
3. Report summarisation: a synthesizer reads the question, the options and the N + M analyses
   (in expert order) and writes a report: its key knowledge and its total analysis.
4. Collaborative consultation, round r = 1..R: every expert (question then option experts, all
   concurrently) reads the question, the options and the current report and votes whether it
   agrees with it, giving revision advice if not (one JSON reply). If all agree, the
   consultation ends. Otherwise the synthesizer revises the report from the advice of the
   experts who disagreed (in expert order); this happens in round R too.
5. Decision making: a decider reads the final report and the question and answers it.

Without options (a free-form question) there are no option experts: M = 0, and the option
classifier is not asked.

LLM calls: d + N + M + 1 + Σ_{r=1..c} (N + M + v_r) + 1, where d = 2 domain calls (1 when
M = 0), c ≤ R the rounds run (up to the first unanimous one) and v_r = 1 if round r had a
disagreeing vote (its revision), else 0; ``advice="separate"`` adds one call per disagreeing
vote. Defaults (N = 5, M = 2, R = 3): 18 (unanimous at once) to 35; a free-form question:
1 + 5 + 1 + 5..18 + 1 = 13 to 26.

Budget stop: empty before every analysis is in; then the majority vote over the answers
extracted from the N + M analyses (``propose_vote``: expert order, ties to the earliest, the
first analysis if none has an answer); then each report (the first and every revision) from
which the task's answer can be extracted replaces it. Only the decider's reply is the answer
of a finished run.

Defaults, all from the official code: N = 5 and M = 2 (``prompt_generator.py``: ``NUM_QD``,
``NUM_OD``), R = 3 (``run.py`` and ``inference.sh``: ``max_attempt_vote``), temperature 0 for
every call (``utils.py``).

Deviations:

- Prompts are our own words. They name the subfields of ``discipline`` (default "medicine";
  with "physics" the classifiers name subfields of physics), so any multiple-choice or
  free-form benchmark runs. The domain lists and the votes are JSON replies (``Domains``,
  ``Vote``), natively structured where the model supports it, instead of ``Medical Field: A |
  B`` and ``yes``/``no`` lines.
- The official code calls the experts of a step one after another; they are independent, so
  here they run concurrently (the same prompts, used in expert order).
- The official code asks each disagreeing expert for its advice in a second call;
  ``advice="joint"`` (default) takes the vote and the advice in one reply, and
  ``advice="separate"`` keeps the two calls (the vote, then the advice for a "no").
- Exactly N and M domains: a list that cannot be read or is short is filled with
  "general <discipline>" (the official code's fallback for a failed call, "General
  Medicine"), a longer one is cut; the official code takes as many experts as the reply names.
  The fills are counted in ``metadata["domain_fallbacks"]``.
- A vote that cannot be read counts as agreement (the official code reads a reply with
  neither "yes" nor "no" as "yes"); it is recorded as None in ``metadata["votes"]``.
- The report keeps both parts (the official ``cleansing_syn_report`` keeps only the total
  analysis, through a membership test that never matches "Key Knowledge"); a revision
  rewrites the whole report, not only the total analysis. The decider is shown the task's own
  prompt (with its answer format) after the report; the official one reads the report alone
  (whose copy of the question holds the options) and answers with a letter.
- No per-call token caps (the official code caps analyses at 300 tokens, votes at 30); the
  temperature is a setting (None: the run's). Every call is a fresh conversation, as in the
  official code.
"""

from __future__ import annotations

import asyncio
import string
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import propose_vote
from maslab.kit.parsing import Flag, Text, as_text
from maslab.kit.structured import Reply, ask

CLASSIFIER, QUESTION_EXPERT, OPTION_EXPERT = "classifier", "question_expert", "option_expert"
SYNTHESIZER, DECIDER = "synthesizer", "decider"
QUESTION_CLASSIFIER, OPTION_CLASSIFIER = "question_classifier", "option_classifier"


def _names(value: object) -> list[str]:
    """A list of domain names: a JSON list, or one string of names split on "|" or ","."""
    if isinstance(value, str):
        value = value.replace("|", ",").split(",")
    if not isinstance(value, list):
        raise ValueError("a list of names")
    return [text for text in map(as_text, value) if text]


class Domains(Reply):
    """A classifier's JSON reply: the subfields, most relevant first."""

    json_name = "medagents_domains"

    domains: Annotated[
        list[Annotated[str, Field(description="the name of one subfield")]],
        BeforeValidator(_names),
    ]


class Agreement(Reply):
    """An expert's vote on the report (``advice="separate"``: the advice is asked apart)."""

    json_name = "medagents_agreement"

    agree: Flag


class Vote(Agreement):
    """An expert's vote on the report with its revision advice (``advice="joint"``)."""

    json_name = "medagents_vote"

    advice: Text = Field(
        "", description="if you disagree: what the report should change, and why; else empty"
    )


def options_text(task: Task) -> str:
    """The task's options, lettered as :meth:`Task.prompt` letters them."""
    choices = task.choices or ()
    lettered = zip(string.ascii_uppercase, choices, strict=False)
    return "\n".join(f"({letter}) {choice}" for letter, choice in lettered)


def case_text(task: Task) -> str:
    """The question and its lettered options, without the answer-format instruction."""
    parts = [task.question.strip(), *([options_text(task)] if task.choices else [])]
    return "\n\n".join(parts)


def labelled(analyses: Sequence[tuple[str, str]]) -> str:
    """Analyses as ``(domain, text)`` blocks, in expert order."""
    return "\n\n".join(f"--- Analysis by the {d} expert ---\n{t.strip()}" for d, t in analyses)


def expert_system(domain: str, discipline: str) -> str:
    return f"You are an expert in {domain}, a subfield of {discipline}."


def question_domains_prompt(task: Task, count: int, discipline: str) -> str:
    return (
        f"Question:\n{task.question.strip()}\n\nWhich {count} subfields of {discipline} does "
        f"the situation in this question involve? Name {count} different subfields, the most "
        "relevant first."
    )


def option_domains_prompt(task: Task, count: int, discipline: str) -> str:
    return (
        f"Question:\n{task.question.strip()}\n\nOptions:\n{options_text(task)}\n\nThink about "
        f"how the options relate to the question. Which {count} subfields of {discipline} "
        f"are needed to tell the right option from the others? Name {count} different "
        "subfields, the most relevant first."
    )


def question_analysis_prompt(task: Task, domain: str) -> str:
    return (
        f"Question:\n{task.question.strip()}\n\nWith your knowledge of {domain}, interpret the "
        "situation this question describes, then point out the findings and facts that matter "
        "most for answering it, and why."
    )


def option_analysis_prompt(task: Task, domain: str, analyses: Sequence[tuple[str, str]]) -> str:
    return (
        f"Question:\n{task.question.strip()}\n\nExperts of other fields analysed this question:"
        f"\n\n{labelled(analyses)}\n\nOptions:\n{options_text(task)}\n\nWith their analyses and "
        f"your own knowledge of {domain}, go through the options one by one: say whether each "
        "is plausible or should be ruled out, and why. Mind the differences between the "
        "options: some may look right at first sight and still be wrong."
    )


REPORT_PARTS = (
    "Write it in two parts: under 'Key knowledge:' the facts from the analyses that matter for "
    "the question, and under 'Total analysis:' one coherent analysis that brings them together."
)


def report_prompt(task: Task, analyses: Sequence[tuple[str, str]]) -> str:
    return (
        f"{case_text(task)}\n\nExperts of several fields analysed this question:\n\n"
        f"{labelled(analyses)}\n\nConsider every analysis with care and write the panel's "
        f"report. {REPORT_PARTS}"
    )


def vote_prompt(task: Task, report: str, domain: str) -> str:
    return (
        f"{case_text(task)}\n\nThe panel's report on this question:\n\n{report.strip()}\n\n"
        f"As the {domain} expert, read the report with care and decide whether it agrees with "
        "your own view of the question."
    )


def advice_prompt(task: Task, report: str, domain: str) -> str:
    return (
        f"{case_text(task)}\n\nThe panel's report on this question:\n\n{report.strip()}\n\n"
        f"As the {domain} expert, you disagree with this report. Using your expertise, say what "
        "the report should change, and why."
    )


def revision_prompt(task: Task, report: str, advice: Sequence[tuple[str, str]]) -> str:
    shown = "\n\n".join(f"--- Advice from the {d} expert ---\n{t.strip()}" for d, t in advice)
    return (
        f"{case_text(task)}\n\nThe panel's current report:\n\n{report.strip()}\n\nExperts who "
        f"disagreed with it advise:\n\n{shown}\n\nRevise the report, taking up the advice "
        f"where it is right. {REPORT_PARTS}"
    )


def decision_prompt(task: Task, report: str) -> str:
    options = " An option that states anything false cannot be the answer." if task.choices else ""
    return (
        f"A panel of experts wrote this report on the question below:\n\n{report.strip()}\n\n"
        f"Question:\n{task.prompt()}\n\nUsing the report, answer the question.{options}"
    )


def read_domains(reply: Domains | None, count: int, discipline: str) -> tuple[list[str], int]:
    """Exactly ``count`` domains from a classifier's reply, and how many were filled in."""
    found = (reply.domains if reply is not None else [])[:count]
    missing = count - len(found)
    return found + [f"general {discipline}"] * missing, missing


@register_method("medagents")
class MedAgents(Method):
    """Domain experts analyse, a report is voted on and revised to consensus, then decided."""

    roles = (CLASSIFIER, QUESTION_EXPERT, OPTION_EXPERT, SYNTHESIZER, DECIDER)
    paper = "Tang et al., arXiv 2311.10537 (MedAgents)"
    category = "multi-disciplinary consultation (domain experts, report, voting to consensus)"
    calls = (
        "d + N + M + 1 + Σ_{r≤c} (N + M + v_r) + 1 (d = 2 domain calls; no options: M = 0, "
        "d = 1; c ≤ R rounds, to the first unanimous one; v_r = 1 revision if round r had a "
        "no); +1 per no with `advice=separate` (default N=5, M=2, R=3: 18–35)"
    )

    class Config(MethodConfig):
        question_experts: int = Field(
            5, ge=1, description="N, the question-domain experts (official code: NUM_QD = 5)"
        )
        option_experts: int = Field(
            2,
            ge=0,
            description="M, the option-domain experts (official code: NUM_OD = 2); a task "
            "without options has none",
        )
        max_rounds: int = Field(
            3,
            ge=1,
            description="R, consultation rounds at most (official code: max_attempt_vote = 3)",
        )
        advice: Literal["joint", "separate"] = Field(
            "joint",
            description="joint: the vote and the advice in one reply; separate: the official "
            "code's advice call after each no vote",
        )
        discipline: str = Field(
            "medicine", min_length=1, description="the field whose subfields the experts hold"
        )
        temperature: float | None = Field(
            0.0,
            ge=0,
            le=2,
            description="every agent's sampling temperature (official code: 0); None: the run's",
        )

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        cfg = self.config
        options = (OPTION_CLASSIFIER,) if cfg.option_experts else ()
        return (
            QUESTION_CLASSIFIER,
            *options,
            *numbered(QUESTION_EXPERT, cfg.question_experts),
            *numbered(OPTION_EXPERT, cfg.option_experts),
            SYNTHESIZER,
            DECIDER,
        )

    @staticmethod
    def topology(question: Sequence[str], option: Sequence[str]) -> Topology:
        """Classifiers name the experts' domains; option experts read the question experts;
        every expert and the synthesizer read each other (analyses, report, votes, advice);
        the decider reads the synthesizer's report."""
        experts = [*question, *option]
        edges = [(QUESTION_CLASSIFIER, name) for name in question]
        edges += [(OPTION_CLASSIFIER, name) for name in option]
        edges += [(q, o) for q in question for o in option]
        edges += [edge for e in experts for edge in ((e, SYNTHESIZER), (SYNTHESIZER, e))]
        edges.append((SYNTHESIZER, DECIDER))
        return Topology.from_edges(edges, name="medagents")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        n = cfg.question_experts
        m = cfg.option_experts if task.choices else 0
        question_names, option_names = numbered(QUESTION_EXPERT, n), numbered(OPTION_EXPERT, m)
        ctx.topology = self.topology(question_names, option_names)
        sampling = {} if cfg.temperature is None else {"temperature": cfg.temperature}

        # 1. expert gathering: the question's domains and, with options, the options' domains
        wanted = [(QUESTION_CLASSIFIER, question_domains_prompt(task, n, cfg.discipline))]
        if m:
            wanted.append((OPTION_CLASSIFIER, option_domains_prompt(task, m, cfg.discipline)))
        gathered = await asyncio.gather(
            *(
                ask(
                    ctx.agent(name, role=CLASSIFIER, **sampling),
                    prompt,
                    Domains,
                    round=0,
                    kind="domains",
                )
                for name, prompt in wanted
            )
        )
        question_domains, missing = read_domains(gathered[0][1], n, cfg.discipline)
        option_domains: list[str] = []
        if m:
            option_domains, missing_options = read_domains(gathered[1][1], m, cfg.discipline)
            missing += missing_options
        names = [*question_names, *option_names]
        domains = [*question_domains, *option_domains]

        def expert(k: int) -> Agent:
            """Expert k (question experts first) in a fresh conversation."""
            role = QUESTION_EXPERT if k < n else OPTION_EXPERT
            system = expert_system(domains[k], cfg.discipline)
            return ctx.agent(names[k], role=role, system=system, **sampling)

        # 2. analysis proposition: the question experts, then the option experts
        said = await asyncio.gather(
            *(
                expert(i).reply(
                    question_analysis_prompt(task, domains[i]), round=1, kind="analysis"
                )
                for i in range(n)
            )
        )
        analyses = [(domains[i], s.content) for i, s in enumerate(said)]
        said = await asyncio.gather(
            *(
                expert(n + j).reply(
                    option_analysis_prompt(task, domains[n + j], analyses), round=2, kind="analysis"
                )
                for j in range(m)
            )
        )
        analyses += [(domains[n + j], s.content) for j, s in enumerate(said)]
        propose_vote(ctx, task, [text for _, text in analyses], step="analyses")

        # 3. report summarisation
        synthesizer = ctx.agent(SYNTHESIZER, **sampling)
        written = await synthesizer.reply(
            report_prompt(task, analyses), round=3, kind="report", remember=False
        )
        reports = [written.content]
        if task.answer_in(reports[-1]) is not None:
            ctx.propose(reports[-1], step="report", revision=0)

        # 4. collaborative consultation
        async def vote(k: int, report: str, r: int) -> tuple[bool | None, str]:
            """Expert k's vote on ``report`` (None: unreadable) and its advice on a no."""
            prompt = vote_prompt(task, report, domains[k])
            if cfg.advice == "joint":
                _, joint = await ask(expert(k), prompt, Vote, round=3 + r, kind="vote")
                return (None, "") if joint is None else (joint.agree, joint.advice)
            _, agreement = await ask(expert(k), prompt, Agreement, round=3 + r, kind="vote")
            if agreement is None or agreement.agree:
                return (None if agreement is None else True), ""
            prompt = advice_prompt(task, report, domains[k])
            advice = await expert(k).reply(prompt, round=3 + r, kind="advice")
            return False, advice.content

        votes: list[list[bool | None]] = []
        for r in range(1, cfg.max_rounds + 1):
            cast = await asyncio.gather(*(vote(k, reports[-1], r) for k in range(n + m)))
            votes.append([agree for agree, _ in cast])
            advice = [(domains[k], text) for k, (agree, text) in enumerate(cast) if agree is False]
            if not advice:
                break
            revised = await synthesizer.reply(
                revision_prompt(task, reports[-1], advice),
                round=3 + r,
                kind="revision",
                remember=False,
            )
            reports.append(revised.content)
            if task.answer_in(reports[-1]) is not None:
                ctx.propose(reports[-1], step="report", revision=r)

        # 5. decision making
        decider = ctx.agent(DECIDER, **sampling)
        decision = await decider.reply(
            decision_prompt(task, reports[-1]), round=4 + len(votes), kind="decision"
        )
        return Solution(
            answer=decision.content,
            metadata={
                "question_domains": question_domains,
                "option_domains": option_domains,
                "domain_fallbacks": missing,
                "votes": votes,
                "unreadable_votes": sum(v is None for row in votes for v in row),
                "rounds": len(votes),
                "consensus": False not in votes[-1],
                "reports": reports,
            },
        )
