"""EvoAgent: grow a team of expert agents from one seed agent by an evolutionary algorithm.

Yuan, Song, Chen, Tan, Li, Yang. "EvoAgent: Towards Automatic Multi-Agent Generation via
Evolutionary Algorithms". arXiv:2406.14228 (NAACL 2025). Code: github.com/siyuyuan/evoagent.

Algorithm (T = ``generations``, N = ``population``; an agent is its role description):

1. Initialisation: the seed agent (``seed_role``) answers the question. It is the first
   generation's only parent, and its answer is the first result.
2. Crossover and mutation, generation t = 1..T: for each of the N child slots, in slot order,
   the parents to breed from are drawn from the sample's random stream: two of the parents
   (one when there is only one). One breeder call reads the question, every parent's role and
   answer, the role of every agent on the team so far and this plan, and writes the N child
   profiles (name and second-person role): each child crosses its parents (keeps what their
   roles are good at and looks for what their answers got wrong or missed) and mutates the
   result into a role nobody on the team has.
3. Selection: a child whose role is empty, or repeats word for word a role of the team or of an
   earlier child of the generation, is discarded as it is. Every other child goes to the
   quality check: one call per child, all concurrent, which reads the question, the team's
   roles, the child's parents and its profile and says whether to retain it (it keeps what
   makes its parents useful for the question and differs from everyone on the team).
4. Results update: the retained children answer the question on their own, each with its
   role as its system message, all concurrently. If any was retained, the seed agent reads
   its current result and their answers (in slot order) and writes the updated result. The
   retained children join the team and are the next generation's parents; a generation that
   retains none leaves the result and the parents as they were.

The answer is the result after the last generation (the seed's answer if no child was ever
retained).

LLM calls: 1 + Σ_t (1 + c_t + k_t + u_t): one breeder call per generation, c_t ≤ N quality
checks, k_t ≤ c_t answers of the retained children, u_t = 1 update if k_t > 0, else 0. So
1 + T ≤ calls ≤ 1 + T·(2N + 2): 1 + T when no breeder reply yields a new profile, 1 + T·(2N + 2)
when every child is checked, retained and answers (default T = 3, N = 3: 4 to 25).

Budget stop: the latest result: the seed's answer, then each update as it is written.

Defaults: T = 3 generations is the official code's number of iterations (``--ind 3``, "IND is
the number of iterations" in its README); N = 3 children per generation is its population
size for TravelPlanner (``GROUP_NUM=3``, "the population size generated in each iteration"),
where the update over all the retained children (``SELECT_STRATEGY=all``) is its default.
Its NLP and MMMU scripts breed one child per iteration (``population=1`` here). Two parents
per crossover and the seed role are our choices.

Deviations: prompts, the seed role and the reply shapes are our own words. The profiles and
the verdicts are JSON replies (native structured output where the model has it). The paper's
code breeds the children of a generation one at a time, each call seeing the earlier experts
and the current result; we breed the N children in one call, so that they can differ from each
other while their checks and answers run concurrently, and we show the breeder the parents'
own answers (what crossover improves on) and a plan of parents drawn from the sample's seeded
stream (the code draws nothing). Its check is free text where only the word "discard"
discards; an unreadable verdict here is read the same way (retained unless its text says
discard) and recorded as None. An unreadable breeder reply breeds no child that generation
(recorded as ``"unreadable"``); a reply with fewer than N profiles leaves the missing slots
empty. A generation that retains no child goes on to the next one with the same parents (the
official population code stops the evolution there; its one-child scripts re-breed a
discarded expert up to four more times). All calls use the run's sampling; the official
code calls at temperature 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.parsing import Flag, Text
from maslab.kit.prompts import cot_prompt
from maslab.kit.structured import Reply, ask

SEED, BREEDER, CHECKER, CHILD = "seed", "breeder", "checker", "child"
PARENTS = 2  # parents crossed per child (one when the generation has one)

DEFAULT_SEED_ROLE = (
    "You are a careful expert problem solver. You read the question closely, reason step by "
    "step, check your work, and state your final answer in the form the question asks for."
)


def _profiles(value: object) -> object:
    """A lone profile as a list of one; in a list, a string as a profile with that role and
    anything else but an object as an empty profile (discarded later as empty)."""
    items = [value] if isinstance(value, dict | str) else value
    if not isinstance(items, list):
        return items
    return [
        {"role": item} if isinstance(item, str) else item if isinstance(item, dict) else {}
        for item in items
    ]


class Profile(Reply):
    """One child agent's settings: a short name and its role description."""

    name: Text = Field("", description="a short title for the expert")
    role: Text = Field(
        "", description="the expert's role description, in the second person: You are ..."
    )


class Brood(Reply):
    """The breeder's JSON reply: the generation's child profiles, in the plan's order."""

    json_name = "evoagent_children"

    children: Annotated[list[Profile], BeforeValidator(_profiles)] = Field(
        description="one new expert per line of the plan, in its order"
    )


class Check(Reply):
    """The quality check's JSON reply: its reasons and whether to retain the child."""

    json_name = "evoagent_check"

    reason: Text = Field("", description="how the candidate compares with its parents and the team")
    retain: Flag = Field(description="true to retain the candidate, false to discard it")


@dataclass
class Member:
    """An agent of the team: its label (``seed``, or ``<generation>.<slot>``), profile and
    answer."""

    label: str
    name: str
    role: str
    answer: str = ""


def _key(role: str) -> str:
    return " ".join(role.split()).casefold()


def _roster(team: Sequence[Member]) -> str:
    return "\n".join(f"- {m.name}: {m.role}" for m in team)


def breed_prompt(
    task: Task, parents: Sequence[Member], team: Sequence[Member], plan: Sequence[Sequence[int]]
) -> str:
    shown = "\n\n".join(
        f"--- Parent {p}: {m.name} ---\nRole: {m.role}\nAnswer:\n{m.answer.strip()}"
        for p, m in enumerate(parents, start=1)
    )
    lines = []
    for slot, picks in enumerate(plan, start=1):
        if len(picks) == 1:
            how = f"mutate Parent {picks[0] + 1}"
        else:
            how = "cross " + " with ".join(f"Parent {p + 1}" for p in picks)
        lines.append(f"- Expert {slot}: {how}")
    return (
        "You are evolving a team of expert agents that answer the question below. Each expert "
        'is defined by its role description, written to it in the second person ("You are '
        '...").\n\n'
        f"Question:\n{task.prompt()}\n\n"
        f"The parents of this generation, with their answers:\n\n{shown}\n\n"
        f"Everyone on the team so far:\n{_roster(team)}\n\n"
        f"Create {len(plan)} new experts, one for each line of this plan:\n"
        + "\n".join(lines)
        + "\n\nTo cross parents, look at what their answers got wrong or left out, and combine "
        "the strengths of their roles into one new role that would do better. To mutate, change "
        "a role so that it brings a skill or a focus that nobody on the team has; mutate every "
        "crossed role too. Every new expert must differ from everyone on the team and from the "
        "other new experts, and must be able to answer the question alone."
    )


def check_prompt(
    task: Task, team: Sequence[Member], parents: Sequence[Member], child: Profile
) -> str:
    bred_from = " and ".join(m.name for m in parents)
    return (
        "We are hiring one more expert to help answer the question below.\n\n"
        f"Question:\n{task.prompt()}\n\n"
        f"The experts already on the team:\n{_roster(team)}\n\n"
        f"The candidate was bred from {bred_from}. The candidate:\n{child.name}: {child.role}\n\n"
        "Decide whether to retain the candidate. Retain it only if (1) it keeps what makes its "
        "parents useful for this question and can help answer it, and (2) it clearly differs "
        "from every expert already on the team. Otherwise discard it."
    )


def update_prompt(task: Task, current: str, experts: Sequence[Member]) -> str:
    shown = "\n\n".join(f"--- {m.name} ({m.role}) ---\n{m.answer.strip()}" for m in experts)
    return (
        f"{task.prompt()}\n\nYour current answer:\n{current.strip()}\n\n"
        "New experts answered the same question on their own (any of them may be wrong):\n\n"
        f"{shown}\n\n"
        "Weigh their answers critically against yours: take what is right and reject what is "
        "wrong. Then write your updated answer in full: reason step by step, then state your "
        "final answer."
    )


def read_brood(text: str, count: int) -> list[Profile] | None:
    """Exactly ``count`` profiles from a breeder reply: its first ones, then empty ones for the
    slots it left out; None if it holds no readable reply."""
    brood = Brood.parse(text)
    if brood is None:
        return None
    return [*brood.children[:count], *[Profile()] * max(0, count - len(brood.children))]


def screen(profiles: Sequence[Profile], team: Sequence[Member]) -> list[str]:
    """Each profile's status before the quality check: ``"empty"`` (no role), ``"repeat"`` (a
    role of the team, or of an earlier profile, word for word up to case and spacing) or
    ``"new"``."""
    seen = {_key(m.role) for m in team}
    statuses = []
    for profile in profiles:
        key = _key(profile.role)
        statuses.append("empty" if not key else "repeat" if key in seen else "new")
        seen.add(key)
    return statuses


def read_check(text: str) -> tuple[bool, bool | None]:
    """Whether to retain the child, and the verdict as read (None: unreadable, then it is
    retained unless the text says discard, as in the official code)."""
    check = Check.parse(text)
    if check is not None:
        return check.retain, check.retain
    return "discard" not in text.casefold(), None


@register_method("evoagent")
class EvoAgent(Method):
    """A seed agent's team grows by LLM crossover, mutation and quality checks; the seed
    updates its answer with each generation's retained experts."""

    roles = (SEED, BREEDER, CHECKER, CHILD)
    paper = "Yuan et al., arXiv 2406.14228 (EvoAgent)"
    category = "evolutionary agent generation (LLM crossover and mutation, quality check, update)"
    calls = (
        "1 + Σ_t (1 + c_t + k_t + u_t) over T generations (1 breeder call, c_t ≤ N checks, "
        "k_t ≤ c_t retained children's answers, u_t = 1 update if k_t > 0): 1 + T to "
        "1 + T·(2N + 2) (default T = 3, N = 3: 4–25)"
    )

    class Config(MethodConfig):
        seed_role: str = Field(
            DEFAULT_SEED_ROLE,
            min_length=1,
            description="the seed agent's role description (its system message)",
        )
        generations: int = Field(
            3, ge=1, description="T: generations, the official code's iterations (--ind 3)"
        )
        population: int = Field(
            3,
            ge=1,
            description="N: children bred per generation, the official population (GROUP_NUM=3)",
        )

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return numbered(CHILD, self.config.population)

    def structure(self) -> Topology:
        """The seed's and the children's answers reach the breeder; its profiles go to the
        checker and the children; the checker admits the children, whose answers reach the
        seed, which updates the result."""
        edges = [(SEED, BREEDER), (BREEDER, CHECKER)]
        for child in self.agent_names():
            edges += [(child, BREEDER), (BREEDER, child), (CHECKER, child), (child, SEED)]
        return Topology.from_edges(edges, name="evoagent")

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        seed_agent = ctx.agent(SEED, system=cfg.seed_role)
        opening = await seed_agent.reply(cot_prompt(task), round=0, kind="answer", remember=False)
        seed = Member(SEED, "Seed agent", cfg.seed_role, opening.content)
        result = seed.answer
        ctx.propose(result, generation=0)

        team, parents = [seed], [seed]
        generations: list[dict[str, Any]] = []
        for t in range(1, cfg.generations + 1):
            plan = [
                sorted(ctx.rng.sample(range(len(parents)), min(PARENTS, len(parents))))
                for _ in range(cfg.population)
            ]  # drawn in slot order, before the generation's first call
            said, _ = await ask(
                ctx.agent(BREEDER),
                breed_prompt(task, parents, team, plan),
                Brood,
                round=t,
                kind="profiles",
                remember=False,
            )
            bred = read_brood(said.content, cfg.population)
            profiles = bred or [Profile()] * cfg.population
            statuses = screen(profiles, team) if bred else ["unreadable"] * cfg.population

            checker = ctx.agent(CHECKER)
            checked = [i for i, status in enumerate(statuses) if status == "new"]
            checks = await asyncio.gather(
                *(
                    ask(
                        checker,
                        check_prompt(task, team, [parents[p] for p in plan[i]], profiles[i]),
                        Check,
                        round=t,
                        kind="check",
                        remember=False,
                    )
                    for i in checked
                )
            )  # in slot order, whichever finished first
            verdicts: dict[int, bool | None] = {}
            for i, (reply, _) in zip(checked, checks, strict=True):
                retain, verdicts[i] = read_check(reply.content)
                statuses[i] = "retained" if retain else "discarded"

            retained = [i for i, status in enumerate(statuses) if status == "retained"]
            answers = await asyncio.gather(
                *(
                    ctx.agent(f"{CHILD}_{i + 1}", role=CHILD, system=profiles[i].role).reply(
                        cot_prompt(task), round=t, kind="answer", remember=False
                    )
                    for i in retained
                )
            )  # in slot order
            kept = [
                Member(f"{t}.{i + 1}", profiles[i].name or f"Expert {t}.{i + 1}",
                       profiles[i].role, message.content)
                for i, message in zip(retained, answers, strict=True)
            ]  # fmt: skip
            generations.append(
                {
                    "parents": [m.label for m in parents],
                    "children": [
                        {
                            "slot": i + 1,
                            "parents": [parents[p].label for p in plan[i]],
                            "name": profiles[i].name,
                            "role": profiles[i].role,
                            "status": statuses[i],
                            "verdict": verdicts.get(i),
                        }
                        for i in range(cfg.population)
                    ],
                    "updated": bool(kept),
                }
            )
            if kept:
                update = await seed_agent.reply(
                    update_prompt(task, result, kept), round=t, kind="update", remember=False
                )
                result = update.content
                ctx.propose(result, generation=t)
                team += kept
                parents = kept

        children = [c for g in generations for c in g["children"]]
        unreadable = {
            "profiles": sum(g["children"][0]["status"] == "unreadable" for g in generations),
            "checks": sum(c["status"] in {"retained", "discarded"} and c["verdict"] is None
                          for c in children),
        }  # fmt: skip
        return Solution(
            answer=result,
            metadata={
                "generations": generations,
                "team": {m.label: m.name for m in team},
                "unreadable": unreadable,
            },
        )
