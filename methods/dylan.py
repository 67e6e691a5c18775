"""DyLAN: a dynamic, layered network of role agents with early stop and agent importance.

Liu, Zhang, Li, Liu, Yang. "A Dynamic LLM-Powered Agent Network for Task-Oriented Agent
Collaboration". arXiv:2310.02170 (COLM 2024). Code: github.com/SALT-NLP/DyLAN.

Algorithm (N agents with role system prompts, R > 2 rounds; every round is a layer of nodes,
one per active agent, each reading every active node of the layer before):

1. Round 0: each agent answers the question alone.
2. Round t >= 1: each active agent sees the question and the active round t-1 solutions
   (shuffled), writes an updated solution and rates every solution it saw from 1 to 5 (one
   JSON reply).
3. From round 2 on, if N > 3 and more than 2 agents are active: one listwise-ranker call reads
   the round t-1 solutions (shuffled) and names the best 2; only those agents are active in
   round t. Otherwise the active agents stay active (so the ranker runs in round 2 only).
4. Within a round the active agents are activated in an order drawn from the sample's random
   stream: the first floor(2n/3) + 1 of them run concurrently, the rest one at a time. After
   that first group and after each later node: if the most common answer (normalised as the
   task's votes compare answers) is held by more than floor(2n/3) of the round's n active
   agents, the network stops early and answers with it.
5. Without a consensus: the majority among the last round's active nodes (ties: the earliest
   in activation order).

``agreement`` (default None) chooses what steps 4 and 5 compare: extracted answers (None or
``"answer"``; an explicit ``"answer"`` keeps them under a preset), or, with ``"text"``
(DyLAN's open-ended mode), whole replies: reply b agrees with reply a when at least 90% of b's
words (lowercased, split on whitespace) occur in a (MASLab's simplified BLEU; the official code
uses sacrebleu's BLEU at the same 90 threshold); the reply most others agree with (itself
included, the earliest on ties) is the vote's winner.

``variant="math"`` runs DyLAN's MATH procedure instead (the official
``code/MATH/llmlp_gen_math_listwise_deeper_markov.py`` and MASLab's ``dylan_math.py``): the N
agents are role-less debaters with one system prompt; round 0 as above; in round 1 every agent
reads every round-0 solution in agent order (its own among them) and writes an updated
solution, with no ratings; then, if N > 3, the ranker reads the round-1 solutions in agent
order and picks 2, and if those two agree (same answer) they are the answer at once; otherwise
the two picked agents debate on for rounds 2 .. R-1, each reading the picks' latest solutions
in pick order. Agents run in agent order (the first floor(2n/3) + 1 concurrently, as above);
the consensus check and the final majority (ties: the first pick) compare extracted answers.
``variant="by_task"`` runs the math procedure on tasks whose answer type is "math" and the
network on the others.

Agent Importance Score (backward pass): an edge weight is the successor's rating of that
predecessor divided by 5, normalised over the successor's incoming edges (an unreadable rating
counts as 3, so unreadable ratings give uniform weights; the math procedure rates nothing:
uniform weights). In the last round run, the nodes whose answer is the final one share
importance 1 equally (all get 0 if the final answer has no readable answer); going back a
round, a node's importance is the sum over its outgoing edges of weight x the successor's
importance. An agent's score is the sum over its nodes; it is in
``Solution.metadata["importance"]`` with ``stopped_early``, ``rounds_run`` and ``variant``.

Team optimisation (``optimize``): run the network with the candidate ``pool`` of roles on the
validation tasks, average each role's importance over them, and keep the ``team_size``
best (in pool order; ties go to the earlier role) as the team later ``solve`` calls use.

Agents are ``agent_1`` .. ``agent_N``, agent i holding the i-th role of the team (``team``, or
the one ``optimize`` chose), so model roles can put single agents on other models;
``ranker`` is the listwise ranker.

LLM calls: N > 3: at most N + N + 1 ranker + (R-2)·2 (default 4 + 4 + 1 + 2 = 11), the math
procedure too; N <= 3: at most N·R. Fewer on an early consensus (3 at the least with the
default team; the math procedure also stops after the ranker, at 2N + 1, when its two picks
agree). ``preset=maslab``: at most 4 + 4 + 1 + 2 = 11 (MASLab's ``dylan`` and ``dylan_math``;
with its MMLU team of 7, 7 + 7 + 1 + 2 = 17). ``optimize`` costs one network run per
validation task with N = |pool|.

Budget stop: the majority over the latest round's nodes so far, after each consensus check.

``preset=maslab`` (``--config preset=maslab``) runs MASLab's protocol (``methods/dylan`` at
commit 74265c7) with our prompts, for the settings left at their defaults. MASLab has four
classes and ``inference.py``'s ``get_method_class`` picks one by the dataset's *name*: the
variant whose suffix (``math``, ``mmlu``, ``humaneval``) is a substring of it, else ``dylan``.
A method here does not see the benchmark's name, so the preset chooses by the task's answer
type (``variant="by_task"``), which sends the same benchmarks the same way except MMLU:

- ``dylan`` (``dylan_main.py``, ``configs/config_main.yaml``), on every benchmark but those
  below: ``team`` = 4 x Assistant (``roles``, ``num_agents: 4``), ``rounds=3``
  (``num_rounds: 3``), the listwise ranker (``activation: listwise``) and
  ``agreement="text"`` (``qtype = "open-ended"``: ``cmp_res`` is its word-overlap BLEU >= 90
  on whole replies, for the early stop and the final vote alike).
- ``dylan_math`` (``dylan_math.py``, ``configs/config_math.yaml``), on datasets named like
  "math" (MATH-500 here, the one bundled benchmark whose answer type is "math"):
  ``variant="math"``, 4 agents (``num_agents`` defaults to 4; the config's ``agents: 4`` is
  never read). Its early stop counts the answers so far (floor(2/3·(i+1))), the same rule as
  ours at N = 4.
- ``dylan_mmlu`` (``dylan_mmlu.py``, ``configs/config_mmlu.yaml``), on MMLU and MMLU-Pro: the
  network with 7 roles (``roles``: our ``MMLU_POOL``), 3 rounds, answers compared as choice
  letters. The preset cannot tell MMLU from the other choice benchmarks (which MASLab runs
  with ``dylan``): on MMLU add the team and the agreement, ``--config preset=maslab
  team=[Economist,Doctor,Lawyer,Mathematician,Psychologist,Programmer,Historian]
  agreement=answer`` (at most 17 calls).
- ``dylan_humaneval`` (HumanEval): 4 coders, 4 judges (Tester, Reflector, Debugger,
  QualityManager) and unit tests the Tester writes and runs, at most 4 + 4 + 4 + 1 + 4 + 2 =
  19 calls. It is not implemented: code tasks run the network (see Deviations), so HumanEval
  numbers under the preset are not MASLab's.

MASLab's round-3 selection bug (the second deviation below) is not copied: in its ``dylan``
and ``dylan_mmlu`` the two agents of round 3 are in effect random, here they are the ranker's
picks, so the numbers may differ wherever the ranker's choice matters (its ``dylan_math`` uses
the picks, as we do). MASLab's rankers also clip their parse to two picks that may coincide
(then a single node runs, or the two "agree" at once) and turn an unreadable ranking into a
random pair (``dylan``) or the first two (``dylan_math``); ours always keeps two distinct picks.

Deviations:

- The prompts and role descriptions are our own wording; ratings and the ranker's choice are
  JSON replies (native structured output where the model has it) instead of a
  ``[[1, 5, ...]]`` / ``[1, 2]`` list at the end of free text. Unreadable ratings, or a list
  of the wrong length, count as neutral (3); unreadable or invalid ranker picks are filled
  with the first unused solutions in the order shown.
- Official code (``LLMLP.forward``) and MASLab activate round t >= 2 nodes when their *loop
  position* after shuffling is in the ranker's list of *agent ids* (``if idx in idx_mask``),
  so the activated agents are in effect random. We activate the agents the ranker chose,
  the paper's stated semantics.
- Official code and MASLab call the ranker in every round from 2 on, and it asserts more than
  2 candidates, so R > 3 fails there once round 2 has kept 2; we skip a ranking that would
  have to keep every candidate.
- Official code activates nodes one at a time and checks after each from the
  floor(2n/3)+1-th on; we run that first group concurrently (same call count, same result,
  deterministic whatever the completion order).
- The math procedure is zero-shot: the official code and MASLab put eight worked examples
  before the question (MASLab's ``mode: complex``: MATH problems); importance in it is ours
  (neither computes it there).
- Code tasks: the paper adds judge agents (Tester, Reflector, Debugger, QualityManager) and
  code execution; they are left out, so code tasks run the plain network.
- The default team (Assistant, Mathematician, Economist, Programmer) is our choice; the pool
  default is the paper's MMLU pool of seven roles. The team chosen by ``optimize`` and the
  pool's importance scores are the method's learned state: ``maslab run --optimize-on``
  saves them in the run directory and a resumed run reloads them. ``optimize`` always runs the
  network (with its ``agreement``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.method import FiniteNumber, Method, MethodConfig, MethodState, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import answer_key, propose_vote
from maslab.kit.parsing import Text
from maslab.kit.structured import Reply, ask

AGENT, RANKER = "agent", "ranker"
TOP = 2  # the listwise ranker keeps this many agents
MAX_RATING, NEUTRAL_RATING = 5, 3
DEBATE_SYSTEM = (
    "You are one of several agents who debate the same question over several rounds. Explain "
    "your reasoning thoroughly at every round."
)

ROLE_PROMPTS: dict[str, str] = {
    "Assistant": "You are a careful and knowledgeable general assistant.",
    "Mathematician": (
        "You are a mathematician. You reason precisely, redo every calculation and prefer the "
        "cleanest argument that settles the question."
    ),
    "Economist": (
        "You are an economist. You think in quantities, incentives and trade-offs, and you "
        "check figures and units with care."
    ),
    "Psychologist": (
        "You are a psychologist. You know how people think, feel and behave, and you weigh "
        "the evidence of studies critically."
    ),
    "Lawyer": (
        "You are a lawyer. You read the question closely, apply rules and definitions exactly "
        "and watch for exceptions and loaded wording."
    ),
    "Doctor": (
        "You are a physician. You bring medical and biological knowledge and reason from "
        "mechanisms and findings to a conclusion."
    ),
    "Programmer": (
        "You are a programmer. You break problems into precise steps, think about edge "
        "cases, and write correct, readable code when code is asked for."
    ),
    "Historian": (
        "You are a historian. You know events, people and their contexts across periods and "
        "check every claim against the record."
    ),
}
Role = Literal[
    "Assistant", "Mathematician", "Economist", "Psychologist", "Lawyer", "Doctor", "Programmer",
    "Historian",
]  # fmt: skip
DEFAULT_TEAM: tuple[Role, ...] = ("Assistant", "Mathematician", "Economist", "Programmer")
MMLU_POOL: tuple[Role, ...] = (
    "Economist", "Doctor", "Lawyer", "Mathematician", "Psychologist", "Programmer", "Historian",
)  # fmt: skip


PRESETS: dict[str, dict[str, Any]] = {
    "maslab": {
        "team": ("Assistant",) * 4,
        "rounds": 3,
        "variant": "by_task",
        "agreement": "text",
    },
}


def system_prompt(role: str) -> str:
    return (
        f"{ROLE_PROMPTS[role]} You are one of several agents who answer the same question over "
        "several rounds. Explain your reasoning thoroughly."
    )


def numbered_solutions(solutions: Sequence[str]) -> str:
    return "\n\n".join(f"Solution {i}:\n{s.strip()}" for i, s in enumerate(solutions, start=1))


def update_prompt(task: Task, shown: Sequence[str]) -> str:
    return (
        f"{task.prompt()}\n\nSolutions to this question from the previous round (yours may be "
        f"among them; any of them, or all, may be wrong):\n\n{numbered_solutions(shown)}\n\n"
        "Check your own reasoning and each of these solutions step by step, then write an "
        "updated solution of your own. Also rate each solution above from 1 (wrong or useless) "
        "to 5 (correct and well argued)."
    )


def debate_prompt(task: Task, shown: Sequence[str]) -> str:
    return (
        f"{task.prompt()}\n\nSolutions to this question from the previous round (yours may be "
        f"among them; any of them, or all, may be wrong):\n\n{numbered_solutions(shown)}\n\n"
        "Use them as advice, critically: check your own reasoning and each of these solutions "
        "step by step, then write an updated solution of your own."
    )


def ranker_prompt(task: Task, shown: Sequence[str]) -> str:
    keep = min(TOP, len(shown))
    return (
        f"{task.prompt()}\n\nCandidate solutions to this question:\n\n"
        f"{numbered_solutions(shown)}\n\n"
        f"Decide, step by step, which {keep} solutions are most likely to be correct."
    )


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _number(value: object) -> float | None:
    """A JSON number or numeric string as a float; None for anything else (booleans too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _integers(what: str) -> WithJsonSchema:
    """The wire form of a list of integers, each ``what`` (read leniently, checked on use)."""
    return WithJsonSchema({"type": "array", "items": {"type": "integer", "description": what}})


class Update(Reply):
    """A round >= 1 reply: the updated solution and the ratings of the solutions shown."""

    json_name = "dylan_update"

    solution: Text = Field(
        "",
        description="your updated step-by-step solution ending with the final answer in the "
        "required format",
    )
    ratings: Annotated[
        list[object],
        BeforeValidator(_as_list),
        _integers("a rating from 1 to 5, one per solution, in the order shown"),
    ] = Field(default_factory=list)


class Ranking(Reply):
    """The listwise ranker's reply: its comparison and the numbers of the best solutions."""

    json_name = "dylan_ranking"

    reasoning: Text = Field("", description="your comparison")
    best: Annotated[
        list[object],
        BeforeValidator(_as_list),
        _integers("the number of one of the best solutions, best first"),
    ] = Field(default_factory=list)


def _rating(value: object) -> float:
    number = _number(value)
    return number if number is not None and 1 <= number <= MAX_RATING else NEUTRAL_RATING


def read_update(text: str, shown: int) -> tuple[str, list[float]]:
    """The solution of a round >= 1 reply (the whole reply if it has none) and its ``shown``
    ratings in the order shown: neutral where unreadable, all neutral for a wrong count."""
    update = Update.parse(text) or Update()
    ratings = update.ratings if len(update.ratings) == shown else [None] * shown
    return update.solution or text, [_rating(r) for r in ratings]


def read_ranking(text: str, shown: int) -> list[int]:
    """The 0-based positions of the ranker's ``min(TOP, shown)`` picks: its valid, distinct
    numbers in its order, then the first unused positions."""
    picks: list[int] = []
    for value in (Ranking.parse(text) or Ranking()).best:
        number = _number(value)
        if number is not None and number.is_integer() and 1 <= number <= shown:
            picks.append(int(number) - 1)
    picks = list(dict.fromkeys(picks))
    picks += [i for i in range(shown) if i not in picks]
    return picks[: min(TOP, shown)]


def covers(reference: str, reply: str) -> bool:
    """Whether ``reply`` agrees with ``reference`` as whole texts: at least 90% of its words
    (lowercased, split on whitespace) occur in ``reference`` (MASLab's simplified BLEU)."""
    known = set(reference.lower().split())
    words = reply.lower().split()
    return bool(words) and 10 * sum(word in known for word in words) >= 9 * len(words)


def text_vote(responses: Sequence[str]) -> tuple[int, int]:
    """The position of the first response the most responses agree with (``covers``, itself
    included) and how many agree with it."""
    counts = [sum(covers(r, other) for other in responses) for r in responses]
    best = max(range(len(responses)), key=lambda i: (counts[i], -i))
    return best, counts[best]


def edge_weights(ratings: Sequence[float]) -> list[float]:
    """A node's incoming edge weights from its ratings: rating / 5, normalised to sum to 1."""
    scaled = [r / MAX_RATING for r in ratings]
    return [s / sum(scaled) for s in scaled]


@dataclass
class Node:
    """One agent's turn in one round: its solution, answer and incoming edge weights."""

    agent: str
    round: int
    response: str
    answer: str | None
    weights: dict[str, float] = field(default_factory=dict)  # predecessor agent -> weight


def agent_importance(
    rounds: Sequence[Sequence[Node]], final: str | None, names: Sequence[str]
) -> dict[str, float]:
    """Agent Importance Scores by the backward pass over the rounds run (see the module)."""
    winners = [n.agent for n in rounds[-1] if final is not None and n.answer == final]
    importance = {n.agent: 1 / len(winners) if n.agent in winners else 0.0 for n in rounds[-1]}
    scores = dict.fromkeys(names, 0.0)
    for t in range(len(rounds) - 1, -1, -1):
        if t < len(rounds) - 1:
            importance = {
                node.agent: sum(s.weights.get(node.agent, 0.0) * importance[s.agent]
                                for s in rounds[t + 1])
                for node in rounds[t]
            }  # fmt: skip
        for agent, value in importance.items():
            scores[agent] += value
    return scores


@register_method("dylan")
class DyLAN(Method):
    """Role agents in layers with listwise agent selection, early consensus and importance."""

    roles = (AGENT, RANKER)
    paper = "Liu et al., arXiv 2310.02170 (DyLAN)"
    category = "dynamic agent network (agent selection, early stop, team optimisation)"
    calls = (
        "N > 3: ≤ 2N + 1 + 2(R−2), N ≤ 3: ≤ N·R (default 11); fewer on an early consensus; "
        "`preset=maslab`: ≤ 4 + 4 + 1 + 2 = 11 (MMLU team of 7: ≤ 17)"
    )

    class Config(MethodConfig):
        presets: ClassVar[Mapping[str, Mapping[str, Any]]] = PRESETS
        preset: Literal["maslab"] | None = None
        """Another protocol's values (``PRESETS``) for the settings left at their defaults."""
        variant: Literal["network", "math", "by_task"] = Field(
            "network",
            description="the procedure: 'network' (role agents, ratings, ranker), 'math' "
            "(DyLAN's MATH debate: role-less agents, no ratings, the ranker's two picks debate "
            "on) or 'by_task' (math on tasks whose answer type is math, else network)",
        )
        agreement: Literal["answer", "text"] | None = Field(
            None,
            description="what the network's consensus and vote compare: extracted 'answer's "
            "(None: the same, but a preset may choose), or whole replies by word overlap "
            "('text', DyLAN's open-ended mode)",
        )
        team: tuple[Role, ...] = Field(DEFAULT_TEAM, min_length=1)
        """The agents' roles (N = its length) until ``optimize`` picks a team."""
        rounds: int = Field(3, gt=2)
        pool: tuple[Role, ...] = Field(MMLU_POOL, min_length=1)
        """The candidate roles ``optimize`` runs and chooses from."""
        team_size: int = Field(4, ge=1)
        """k: the roles ``optimize`` keeps."""

        @field_validator("pool")
        @classmethod
        def _distinct(cls, pool: tuple[str, ...]) -> tuple[str, ...]:
            if len(set(pool)) != len(pool):
                raise ValueError("each role may appear once in the pool")
            return pool

        @model_validator(mode="after")
        def _team_fits_pool(self) -> DyLAN.Config:
            if self.team_size > len(self.pool):
                raise ValueError(f"team_size {self.team_size} exceeds the pool's {len(self.pool)}")
            return self

    config: Config

    class LearnedState(MethodState):
        team: list[str] = Field(min_length=1)
        pool_importance: dict[str, FiniteNumber]

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.optimized_team: tuple[str, ...] | None = None
        """The team ``optimize`` chose; ``solve`` uses it over ``team``."""
        self.pool_importance: dict[str, float] = {}
        """Each pool role's mean importance in the last ``optimize``."""

    @property
    def team(self) -> tuple[str, ...]:
        return self.optimized_team or self.config.team

    def agent_names(self) -> tuple[str, ...]:
        return numbered(AGENT, max(len(self.config.team), len(self.config.pool)))

    async def solve(self, task: Task, ctx: Context) -> Solution:
        variant = self.config.variant
        debate = variant == "math" or (variant == "by_task" and task.answer_type == "math")
        names = numbered(AGENT, len(self.team))
        topology = Topology(name="dylan")
        for name, role in zip(names, self.team, strict=True):
            topology.add_node(name, role=role)
        readers = [*names, RANKER] if len(names) > 3 else names  # the ranker: N > 3 only
        for sender in names:  # a node reads every active node of the round before, its own too
            for reader in readers:
                topology.add_edge(sender, reader)
        ctx.topology = topology
        return await self.network(task, ctx, self.team, ctx.rng, debate=debate)

    async def network(
        self,
        task: Task,
        ctx: Context,
        team: Sequence[str],
        rng: random.Random,
        *,
        debate: bool = False,
    ) -> Solution:
        """One forward pass of the network with agents of ``team`` (``debate``: the math
        procedure, with role-less agents), then the backward pass."""
        text = self.config.agreement == "text" and not debate
        names = numbered(AGENT, len(team))
        agents = {
            name: ctx.agent(
                name, role=AGENT, system=DEBATE_SYSTEM if debate else system_prompt(role)
            )
            for name, role in zip(names, team, strict=True)
        }
        ranker = ctx.agent(RANKER)
        rounds: list[list[Node]] = []
        activated: list[list[str]] = []
        active = list(names)
        picked: list[str] = []
        consensus: str | None = None
        for t in range(self.config.rounds):
            if t >= 2 and len(team) > 3 and len(active) > TOP:
                shuffle = None if debate else rng
                active = picked = await self.rank(task, ranker, rounds[-1], t, rng=shuffle)
                if debate:  # the two picks are the answer at once if they agree
                    said = {n.agent: n.response for n in rounds[-1]}
                    response, agreeing = self.vote(ctx, task, [said[a] for a in active], t - 1)
                    if agreeing > 2 * len(active) // 3:
                        consensus = response
                        break
            order = list(active) if debate else rng.sample(active, len(active))
            previous = rounds[-1] if rounds else []
            latest = {n.agent: n for n in previous}  # debate: the active agents' latest, in order
            common = [latest[a] for a in active if a in latest]
            nodes: list[Node] = []
            rounds.append(nodes)
            activated.append(order)
            first = 2 * len(order) // 3 + 1
            for batch in [order[:first], *([name] for name in order[first:])]:
                if debate:
                    shown = dict.fromkeys(batch, common)
                else:
                    shown = {name: rng.sample(previous, len(previous)) for name in batch}
                nodes += await asyncio.gather(
                    *(
                        self.activate(task, agents[name], t, shown[name], rate=not debate)
                        for name in batch
                    )
                )
                response, agreeing = self.vote(ctx, task, [n.response for n in nodes], t, text)
                if agreeing > 2 * len(order) // 3:
                    consensus = response
                    break
            if consensus is not None:
                break

        last = [n.response for n in rounds[-1]]
        answer = consensus if consensus is not None else self.vote(ctx, task, last, t, text)[0]
        importance = agent_importance(rounds, answer_key(task, answer), names)
        return Solution(
            answer=answer,
            metadata={
                "variant": "math" if debate else "network",
                "team": dict(zip(names, team, strict=True)),
                "importance": importance,
                "stopped_early": consensus is not None,
                "rounds_run": len(rounds),
                "activated": activated,
                **({"picked": picked} if debate else {}),
            },
        )

    @staticmethod
    def vote(
        ctx: Context, task: Task, responses: Sequence[str], t: int, text: bool = False
    ) -> tuple[str, int]:
        """The winning response (proposed as the best answer so far) and how many responses
        agree with it: by extracted answers, or with ``text`` by whole replies."""
        if text:
            best, agreeing = text_vote(responses)
            ctx.propose(responses[best], round=t, agreeing=agreeing)
            return responses[best], agreeing
        decision = propose_vote(ctx, task, responses, round=t)
        return decision.response, max(decision.vote.counts.values(), default=0)

    async def activate(
        self, task: Task, agent: Agent, t: int, shown: Sequence[Node], *, rate: bool = True
    ) -> Node:
        """One node: round 0 answers the question; later rounds update (and with ``rate``
        rate) ``shown``."""
        if t == 0:
            reply = await agent.reply(task.prompt(), round=0, remember=False)
            return Node(agent.name, 0, reply.content, answer_key(task, reply.content))
        solutions = [n.response for n in shown]
        if rate:
            said, _ = await ask(
                agent, update_prompt(task, solutions), Update, round=t, remember=False
            )
            response, ratings = read_update(said.content, len(shown))
        else:
            said = await agent.reply(debate_prompt(task, solutions), round=t, remember=False)
            response, ratings = said.content, [NEUTRAL_RATING] * len(shown)
        weights = dict(zip((n.agent for n in shown), edge_weights(ratings), strict=True))
        return Node(agent.name, t, response, answer_key(task, response), weights)

    async def rank(
        self,
        task: Task,
        ranker: Agent,
        previous: Sequence[Node],
        t: int,
        *,
        rng: random.Random | None,
    ) -> list[str]:
        """The agents whose round t-1 solutions the listwise ranker finds best (agent ids),
        shown shuffled with ``rng`` (None: in the order given)."""
        shown = rng.sample(previous, len(previous)) if rng else list(previous)
        reply, _ = await ask(
            ranker,
            ranker_prompt(task, [n.response for n in shown]),
            Ranking,
            round=t,
            kind="ranking",
            remember=False,
        )
        return [shown[i].agent for i in read_ranking(reply.content, len(shown))]

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """Team selection: run the ``pool`` on ``tasks``, keep the ``team_size`` roles with
        the highest mean importance (in pool order) as the team of later ``solve`` calls."""
        cfg = self.config
        if not tasks:
            return
        seeds = [ctx.rng.getrandbits(64) for _ in tasks]  # drawn in task order, before any call
        runs = await asyncio.gather(
            *(
                self.network(task, ctx, cfg.pool, random.Random(seed))
                for task, seed in zip(tasks, seeds, strict=True)
            )
        )
        names = numbered(AGENT, len(cfg.pool))
        self.pool_importance = {
            role: sum(run.metadata["importance"][name] for run in runs) / len(runs)
            for name, role in zip(names, cfg.pool, strict=True)
        }
        ranked = sorted(range(len(cfg.pool)), key=lambda i: -self.pool_importance[cfg.pool[i]])
        self.optimized_team = tuple(cfg.pool[i] for i in sorted(ranked[: cfg.team_size]))

    def learned_state(self) -> DyLAN.LearnedState | None:
        """The team ``optimize`` chose and the pool's mean importance (None before it ran)."""
        if self.optimized_team is None:
            return None
        return self.LearnedState(
            team=list(self.optimized_team), pool_importance=self.pool_importance
        )

    def load_learned_state(self, state: DyLAN.LearnedState) -> None:
        if strangers := [role for role in state.team if role not in self.config.pool]:
            raise ValueError(f"its team has roles not in this config's pool: {strangers}")
        self.optimized_team = tuple(state.team)
        self.pool_importance = dict(state.pool_importance)
