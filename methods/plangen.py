"""PlanGEN: constraint, verification and selection agents around plan search algorithms.

Parmar, Liu, Goyal, Chen, Le, Mishra, Mobahi, Gu, Wang, Nakhost, Baral, Lee, Pfister, Palangi.
"PlanGEN: A Multi-Agent Framework for Generating Planning and Reasoning Trajectories for
Complex Problem Solving". arXiv:2502.16111. No official code.

Agents (roles): ``constraint`` lists the instance's constraints (1 call); ``planner`` writes
plans and plan steps; ``verifier`` scores a plan against the constraints (feedback, then an
integer score in [-100, 100]), scores partial plans (the step reward) and checks whether steps
form a complete plan; ``selector`` gives the LLM prior of the mixture (suitability in [0, 1] of
each algorithm); ``executor`` carries out the final plan and states the answer (the paper's
second stage for reasoning benchmarks, +1 call). Every agent runs at temperature 0
(``agent_temperature``) except the planner's sampling inside the algorithms, at 0.7
(``sample_temperature``); model roles override both.

Frameworks (``framework``):

* ``best_of_n``: constraints; N plans sampled concurrently; each verified; the highest score
  wins (ties: the first written); the executor carries it out.
* ``tot``: best-first tree search over plan steps. An iteration expands the unexpanded node with
  the highest step reward (the root first): the planner proposes ``children`` (3) next steps,
  and for each new path the verifier scores it (step reward) and checks completion (1 if the
  steps form a complete plan). The search stops after the iteration in which a path is complete
  (the best complete path wins) or after ``tot_iterations`` (20) iterations (the best path
  wins).
* ``rebase``: reward-balanced tree search, level by level. Our reading of "initial width 10,
  decremented by 1 after each expansion": the width is the number of nodes the search may still
  create, and every node created (one step added to one path) spends 1 of it, so the tree phase
  makes at most 3 · width = 30 calls. Each level creates min(``children``, width left) nodes,
  shared among the previous level's paths ranked by reward: path j gets
  round(k · softmax(r / τ)_j) of them (largest remainders, then rank, settle the rounding), so
  lower-reward paths still get children, but fewer. Early stop after a level with a complete
  path; else the best path when the width is spent.
* ``mixture``: constraints and an initial plan (concurrently, 2 calls), then verify it. If it
  scores at least ``threshold`` it is final. Else up to ``max_iterations`` times: the selector
  gives its prior, the modified UCB below picks an algorithm, that algorithm runs seeded with
  the best plan so far and its verifier feedback, its plan is verified (Best-of-N's plans are
  verified already), the bandit is updated; stop as soon as a plan reaches the threshold.

Modified UCB (:func:`ucb`, exactly the spec's formulas; initial R = 0, C = 1, Rec = 0, T = 0,
λ = ``prior_weight``), per algorithm a::

    λ ← λ / (1 + T)                      (before scoring: the decayed weight is kept)
    R̄(a) = (R(a) / C(a)) / R_max,       R_max = max_a R(a)/C(a), or 1 if all rewards are 0
    E(a) = min(sqrt(2 · ln(T + 1) / C(a)), M = 5)
    D(a) = α_div / (C(a) + 1)
    UCB(a) = R̄(a) + E(a) + λ · prior(a) + D(a) + α_rec · Rec(a)

and the argmax wins (ties: best_of_n, tot, rebase in that order). After algorithm a ran and
its plan scored s (:func:`record`): the reward is r = (s + 100) / 200 in [0, 1]; R(a) += r;
C(a) += 1; T += 1; and Rec(a) — our reading of the paper's "Rec" — is the recovery a just
achieved: how far its reward rose above the best reward reached before it ran,
max(0, r − r_best_before); it replaces a's previous Rec. α_div = 0.1, α_rec = 0.5 and the
initial λ = 1 are **our choices** (the paper does not give them): ``alpha_div``,
``alpha_rec``, ``prior_weight``.

LLM calls (k = tree expansions, m = REBASE nodes created):

* ``best_of_n``: 1 + 2N + 1 (default N = 5: 12).
* ``tot``: 1 + 3·``children``·k + 1, k ≤ ``tot_iterations`` (default 1 + 9k + 1: 11–182).
* ``rebase``: 1 + 3m + 1, m ≤ ``rebase_width`` (default ≤ 32; 11 if the first level completes).
* ``mixture``: 3 + Σ over the iterations run (1 prior + the algorithm's calls without its
  constraint and execute calls, + 1 verify for ``tot`` and ``rebase``) + 1 execute: 4 when the
  initial plan passes; a Best-of-N iteration costs 1 + 2N = 11.

Budget stop: the best verified plan so far (ties: the first written), proposed as soon as it is
scored (a tree's paths count with their step rewards; in the mixture, a tree's paths count once
the verifier has scored its final plan); after the executor ran, its answer.

Default framework: ``best_of_n``. It is the paper's best framework on five of its seven reported
results (NATURAL PLAN calendar, meeting and trip; OlympiadBench physics; DocFinQA), while the
mixture wins the other two (OlympiadBench math, GPQA); and its cost is fixed (12 calls).

Deviations: prompts are our own and task-generic (the paper gives the constraint agent domain
hints). Verdicts are requested as JSON (``feedback`` then ``score``), natively where the model
supports structured output, else read from the text (a JSON object, then the last
``score: N`` line); a score outside [-100, 100] is clamped, an unreadable one is -100. A
completion check is read from its last line (1, true or yes: complete; anything else: not). An
unreadable prior is uniform; prior values are clamped to [0, 1]. The concrete tree searches
(best-first ToT, the REBASE width and balance temperature τ = 20 on the score scale, i.e.
REBASE's 0.1 on a unit scale), the reward and Rec readings, the mixture's default budget of
three iterations, generating the mixture's initial plan without the constraints (concurrently
with them), and showing the executor the problem and the plan only, are our choices. The
constraint agent runs once per task and its list is shared by every algorithm of the mixture.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.parsing import Text, as_flag
from maslab.kit.structured import Reply, ask

CONSTRAINT, PLANNER, VERIFIER, SELECTOR, EXECUTOR = (
    "constraint",
    "planner",
    "verifier",
    "selector",
    "executor",
)
Algorithm = Literal["best_of_n", "tot", "rebase"]
ALGORITHMS: tuple[Algorithm, ...] = ("best_of_n", "tot", "rebase")
LOWEST, HIGHEST = -100, 100

# -- reading replies ---------------------------------------------------------------------------


def _number(value: object) -> float:
    """A reply's numeric field as a finite float; ValueError for anything else."""
    if isinstance(value, str):
        value = float(value.strip().replace("−", "-"))
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("not a number")
    return float(value)


def _score(value: object) -> int:
    return max(LOWEST, min(HIGHEST, round(_number(value))))


def _unit(value: object) -> float:
    return max(0.0, min(1.0, _number(value)))


class Verdict(Reply):
    """The verifier's JSON reply: its step-by-step feedback, then the score."""

    feedback: Text = Field("", description="your step-by-step assessment")
    score: Annotated[
        int, BeforeValidator(_score), Field(description="the score, an integer from -100 to 100")
    ]


Suitability = Annotated[float, BeforeValidator(_unit), Field(description="a rating from 0 to 1")]


class Prior(Reply):
    """The selector's JSON reply: its reasoning, then each algorithm's suitability."""

    reasoning: Text = ""
    best_of_n: Suitability
    tot: Suitability
    rebase: Suitability


_SCORE_LINE = re.compile(r"\bscore\b[\s*\"'`]*[:=][\s*\"'`]*([+\-−]?\d+(?:\.\d+)?)", re.I)


def read_verdict(text: str) -> tuple[int, str]:
    """(score, feedback) of a verifier's reply: JSON, else its last ``score: N``; unreadable:
    the lowest score. Scores are clamped to [-100, 100]."""
    verdict = Verdict.parse(text)
    if verdict is not None:
        return verdict.score, verdict.feedback or text.strip()
    found = _SCORE_LINE.findall(text)
    return (_score(found[-1]) if found else LOWEST), text.strip()


def read_prior(text: str) -> dict[Algorithm, float]:
    """Each algorithm's suitability from the selector's reply; uniform when unreadable."""
    prior = Prior.parse(text)
    if prior is None:
        return dict.fromkeys(ALGORITHMS, 1 / len(ALGORITHMS))
    return {a: getattr(prior, a) for a in ALGORITHMS}


def read_complete(text: str) -> bool:
    """A completion check: its last non-empty line says 1 (or true, yes)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and as_flag(lines[-1].strip(" \t*`'\".:"))


# -- prompts -----------------------------------------------------------------------------------


def steps_text(steps: tuple[str, ...]) -> str:
    return "\n".join(f"Step {i}: {step.strip()}" for i, step in enumerate(steps, 1))


def _seed_text(seed: Plan | None) -> str:
    if seed is None:
        return ""
    return (
        f"\n\nAn earlier plan for this problem:\n{seed.text.strip()}\n\nA verifier's feedback "
        f"on it (it scored {seed.score} out of 100):\n{seed.feedback.strip()}\n\n"
        "Avoid the problems the feedback points out."
    )


def constraint_prompt(task: Task) -> str:
    return (
        f"Problem:\n{task.prompt()}\n\nBefore anyone plans a solution, read the problem closely "
        "and list every constraint and contextual detail a correct solution must respect: the "
        "given quantities and conditions, requirements on the result, the concepts and "
        "formulas that apply, and anything easy to overlook. Write them as a bulleted list. "
        "Do not solve the problem."
    )


def plan_prompt(task: Task, constraints: str | None, seed: Plan | None = None) -> str:
    shown = f"\n\nConstraints to respect:\n{constraints.strip()}" if constraints else ""
    return (
        f"Problem:\n{task.prompt()}{shown}{_seed_text(seed)}\n\nWrite a complete step-by-step "
        "plan for solving this problem. Make every step concrete and respect every constraint; "
        "the last step should lead to the final answer."
    )


def verify_prompt(task: Task, constraints: str, plan: str) -> str:
    return (
        f"You are verifying a plan for the problem below against its constraints, by strict "
        f"standards.\n\nProblem:\n{task.prompt()}\n\nConstraints:\n{constraints.strip()}\n\n"
        f"Plan:\n{plan.strip()}\n\nGo through the plan step by step and check it against every "
        "constraint and for correctness. Then score it with an integer from -100 (wrong or "
        "useless) to 100 (fully correct and complete)."
    )


def step_prompt(task: Task, constraints: str, steps: tuple[str, ...], seed: Plan | None) -> str:
    so_far = steps_text(steps) if steps else "(no steps yet)"
    return (
        f"Problem:\n{task.prompt()}\n\nConstraints to respect:\n{constraints.strip()}"
        f"{_seed_text(seed)}\n\nA plan for solving this problem is being written one step at "
        f"a time. The steps so far:\n{so_far}\n\nPropose the next step only: one concrete step "
        "that follows from the steps so far and respects the constraints. If the plan only "
        "needs its last step, make it the step that reaches the final answer."
    )


def step_reward_prompt(task: Task, constraints: str, steps: tuple[str, ...]) -> str:
    return (
        f"You are scoring a partial plan for the problem below, by strict standards.\n\n"
        f"Problem:\n{task.prompt()}\n\nConstraints:\n{constraints.strip()}\n\nThe plan so far "
        f"(it need not be finished):\n{steps_text(steps)}\n\nCheck every step against the "
        "constraints and for correctness, and judge whether the plan is on track; the newest "
        "step matters most. Then score the plan so far with an integer from -100 to 100."
    )


def completion_prompt(task: Task, constraints: str, steps: tuple[str, ...]) -> str:
    return (
        f"Problem:\n{task.prompt()}\n\nConstraints:\n{constraints.strip()}\n\nSteps of a plan "
        f"so far:\n{steps_text(steps)}\n\nDo these steps already form a complete plan, one that "
        "reaches the final answer of the problem? Reply with 1 if they do and 0 if they do not, "
        "on the last line, alone."
    )


def selector_prompt(task: Task, constraints: str, best: Plan) -> str:
    return (
        f"Problem:\n{task.prompt()}\n\nConstraints:\n{constraints.strip()}\n\nThe best plan so "
        f"far:\n{best.text.strip()}\n\nA verifier's feedback on it (it scored {best.score} out "
        f"of 100):\n{best.feedback.strip()}\n\nThree search algorithms can write the next plan: "
        '"best_of_n" samples several complete plans and keeps the best-scored one; "tot" '
        "(tree of thought) builds the plan step by step, always extending the best-scored "
        'partial plan; "rebase" grows several partial plans level by level, giving more '
        "continuations to the better-scored ones. Reason about how well each suits this problem "
        "and the problems the feedback found, then rate each from 0 (unsuitable) to 1 (ideal)."
    )


def execute_prompt(task: Task, plan: str) -> str:
    return (
        f"{task.prompt()}\n\nA plan for solving this problem:\n{plan.strip()}\n\nCarry out the "
        "plan step by step, doing every calculation and deduction it calls for, and then state "
        "your final answer."
    )


# -- the mixture's bandit ----------------------------------------------------------------------


@dataclass(frozen=True)
class Bandit:
    """The mixture's run history per algorithm: R (total reward), C (count, from 1), Rec
    (the last recovery), T (selections made) and λ (the prior's weight)."""

    rewards: dict[str, float]
    counts: dict[str, int]
    recovery: dict[str, float]
    steps: int
    weight: float

    @classmethod
    def start(cls, weight: float) -> Bandit:
        return cls(
            rewards=dict.fromkeys(ALGORITHMS, 0.0),
            counts=dict.fromkeys(ALGORITHMS, 1),
            recovery=dict.fromkeys(ALGORITHMS, 0.0),
            steps=0,
            weight=weight,
        )


def ucb(
    bandit: Bandit,
    prior: dict[Algorithm, float],
    *,
    alpha_div: float,
    alpha_rec: float,
    cap: float = 5.0,
) -> tuple[dict[Algorithm, float], float]:
    """Each algorithm's modified UCB, and the decayed prior weight λ / (1 + T) it used."""
    weight = bandit.weight / (1 + bandit.steps)
    means = {a: bandit.rewards[a] / bandit.counts[a] for a in ALGORITHMS}
    r_max = max(means.values()) or 1.0
    scores = {
        a: means[a] / r_max
        + min(math.sqrt(2 * math.log(bandit.steps + 1) / bandit.counts[a]), cap)
        + weight * prior[a]
        + alpha_div / (bandit.counts[a] + 1)
        + alpha_rec * bandit.recovery[a]
        for a in ALGORITHMS
    }
    return scores, weight


def reward(score: int) -> float:
    """A verifier score in [-100, 100] as a bandit reward in [0, 1]."""
    return (score + HIGHEST) / (HIGHEST - LOWEST)


def record(bandit: Bandit, chosen: str, score: int, best_before: int, weight: float) -> Bandit:
    """The bandit after ``chosen`` (picked with prior weight ``weight``) produced a plan
    scoring ``score``, when the best score before it was ``best_before``."""
    gain = max(0.0, reward(score) - reward(best_before))
    return Bandit(
        rewards={**bandit.rewards, chosen: bandit.rewards[chosen] + reward(score)},
        counts={**bandit.counts, chosen: bandit.counts[chosen] + 1},
        recovery={**bandit.recovery, chosen: gain},
        steps=bandit.steps + 1,
        weight=weight,
    )


def allocate(scores: list[int], k: int, tau: float) -> list[int]:
    """REBASE's reward-balanced share of ``k`` children among paths ranked best first:
    round(k · softmax(score / τ)), the rounding settled by largest remainder, then rank."""
    top = max(scores)
    weights = [math.exp((s - top) / tau) for s in scores]
    shares = [k * w / sum(weights) for w in weights]
    counts = [math.floor(s) for s in shares]
    by_remainder = sorted(range(len(scores)), key=lambda j: (-(shares[j] - counts[j]), j))
    for j in by_remainder[: k - sum(counts)]:
        counts[j] += 1
    return counts


# -- plans -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A scored plan (a tree path has its steps); ``order`` is its place in generation order."""

    text: str
    score: int
    feedback: str
    order: int
    steps: tuple[str, ...] = ()
    complete: bool = False


def rank(plan: Plan) -> tuple[int, int]:
    """Sort key: higher score first, then earlier generation."""
    return plan.score, -plan.order


ROOT = Plan(text="", score=0, feedback="", order=-1)


@dataclass
class _Search:
    """One task's agents, constraints and best plan, shared by the algorithms."""

    cfg: PlanGEN.Config
    task: Task
    ctx: Context
    constraints: str = ""
    best: Plan | None = None
    created: int = 0
    agents: dict[str, Agent] = field(default_factory=dict)

    def __post_init__(self) -> None:
        cold = {"temperature": self.cfg.agent_temperature}
        for name in (CONSTRAINT, VERIFIER, SELECTOR, EXECUTOR):
            self.agents[name] = self.ctx.agent(name, **cold)
        self.agents[PLANNER] = self.ctx.agent(PLANNER, temperature=self.cfg.sample_temperature)
        self.agents["initial"] = self.ctx.agent(PLANNER, **cold)

    def order(self) -> int:
        self.created += 1
        return self.created - 1

    def offer(self, plan: Plan) -> None:
        """Keep ``plan`` if it beats the best so far, and propose it."""
        if self.best is None or rank(plan) > rank(self.best):
            self.best = plan
            self.ctx.propose(plan.text, score=plan.score, verified=True)

    async def ask(self, name: str, prompt: str, round: int, kind: str) -> str:
        message = await self.agents[name].reply(prompt, round=round, kind=kind, remember=False)
        return message.content

    async def extract_constraints(self) -> None:
        self.constraints = await self.ask(
            CONSTRAINT, constraint_prompt(self.task), 0, "constraints"
        )

    async def judge(self, prompt: str, round: int, kind: str) -> tuple[int, str]:
        said, _ = await ask(
            self.agents[VERIFIER], prompt, Verdict, round=round, kind=kind, remember=False
        )
        return read_verdict(said.content)

    async def verify(self, text: str, order: int, round: int) -> Plan:
        prompt = verify_prompt(self.task, self.constraints, text)
        score, feedback = await self.judge(prompt, round, "verdict")
        return Plan(text=text, score=score, feedback=feedback, order=order)

    async def best_of_n(self, seed: Plan | None, round: int, offer: Callable[[Plan], None]) -> Plan:
        prompt = plan_prompt(self.task, self.constraints, seed)
        texts = await asyncio.gather(
            *(self.ask(PLANNER, prompt, round, "plan") for _ in range(self.cfg.n))
        )
        orders = [self.order() for _ in texts]

        async def verify(text: str, order: int) -> Plan:
            plan = await self.verify(text, order, round)
            offer(plan)
            return plan

        plans = await asyncio.gather(*map(verify, texts, orders))
        return max(plans, key=rank)

    async def expand(
        self, parents: list[Plan], seed: Plan | None, round: int, offer: Callable[[Plan], None]
    ) -> list[Plan]:
        """One child per entry of ``parents``: a next step, its step reward, its completion."""
        steps = await asyncio.gather(
            *(
                self.ask(
                    PLANNER, step_prompt(self.task, self.constraints, p.steps, seed), round, "step"
                )
                for p in parents
            )
        )
        paths = [(*p.steps, step.strip()) for p, step in zip(parents, steps, strict=True)]
        orders = [self.order() for _ in paths]

        async def grow(path: tuple[str, ...], order: int) -> Plan:
            (score, feedback), done = await asyncio.gather(
                self.judge(step_reward_prompt(self.task, self.constraints, path), round, "reward"),
                self.ask(
                    VERIFIER,
                    completion_prompt(self.task, self.constraints, path),
                    round,
                    "completion",
                ),
            )
            child = Plan(steps_text(path), score, feedback, order, path, read_complete(done))
            offer(child)
            return child

        return list(await asyncio.gather(*map(grow, paths, orders)))

    async def tot(self, seed: Plan | None, round: int, offer: Callable[[Plan], None]) -> Plan:
        frontier, created = [ROOT], []
        for _ in range(self.cfg.tot_iterations):
            parent = max(frontier, key=rank)
            frontier.remove(parent)
            children = await self.expand([parent] * self.cfg.children, seed, round, offer)
            created += children
            frontier += children
            if done := [c for c in children if c.complete]:
                return max(done, key=rank)
        return max(created, key=rank)

    async def rebase(self, seed: Plan | None, round: int, offer: Callable[[Plan], None]) -> Plan:
        level, created, width = [ROOT], [], self.cfg.rebase_width
        while width > 0:
            k = min(self.cfg.children, width)
            ranked = sorted(level, key=rank, reverse=True)
            shares = allocate([p.score for p in ranked], k, self.cfg.rebase_tau)
            parents = [p for p, n in zip(ranked, shares, strict=True) for _ in range(n)]
            level = await self.expand(parents, seed, round, offer)
            created += level
            width -= k
            if done := [c for c in level if c.complete]:
                return max(done, key=rank)
        return max(created, key=rank)

    async def run(
        self, algorithm: Algorithm, seed: Plan | None, round: int, offer: Callable[[Plan], None]
    ) -> Plan:
        search = {"best_of_n": self.best_of_n, "tot": self.tot, "rebase": self.rebase}
        return await search[algorithm](seed, round, offer)

    async def mixture(self) -> tuple[Plan, list[dict[str, object]]]:
        """The mixture of algorithms: the best plan, and each iteration's selection."""
        cfg = self.cfg
        _, initial = await asyncio.gather(
            self.extract_constraints(),
            self.ask("initial", plan_prompt(self.task, None), 0, "plan"),
        )
        best = await self.verify(initial, self.order(), 0)
        self.offer(best)
        bandit = Bandit.start(cfg.prior_weight)
        history: list[dict[str, object]] = []
        while best.score < cfg.threshold and len(history) < cfg.max_iterations:
            t = len(history) + 1
            said, _ = await ask(
                self.agents[SELECTOR],
                selector_prompt(self.task, self.constraints, best),
                Prior,
                round=t,
                kind="prior",
                remember=False,
            )
            prior = read_prior(said.content)
            scores, weight = ucb(
                bandit,
                prior,
                alpha_div=cfg.alpha_div,
                alpha_rec=cfg.alpha_rec,
                cap=cfg.exploration_cap,
            )
            chosen = max(ALGORITHMS, key=lambda a: (scores[a], -ALGORITHMS.index(a)))
            if chosen == "best_of_n":  # its plans are verified already
                plan = await self.run(chosen, best, t, self.offer)
            else:  # a tree's path counts once the verifier has scored it as a whole plan
                found = await self.run(chosen, best, t, lambda plan: None)
                prompt = verify_prompt(self.task, self.constraints, found.text)
                score, feedback = await self.judge(prompt, t, "verdict")
                plan = replace(found, score=score, feedback=feedback)
                self.offer(plan)
            bandit = record(bandit, chosen, plan.score, best.score, weight)
            history.append(
                {
                    "algorithm": chosen,
                    "prior": prior,
                    "ucb": scores,
                    "score": plan.score,
                    "recovery": bandit.recovery[chosen],
                }
            )
            assert self.best is not None
            best = self.best
        return best, history


@register_method("plangen")
class PlanGEN(Method):
    """Constraint, verifier and selector agents around Best-of-N, ToT, REBASE or their mixture."""

    roles = (CONSTRAINT, PLANNER, VERIFIER, SELECTOR, EXECUTOR)
    paper = "Parmar et al., arXiv 2502.16111 (PlanGEN)"
    category = "planning with constraint/verifier/selector agents (plan search + execution)"
    calls = (
        "best_of_n: 1 + 2N + 1 (N = 5: 12); tot: 1 + 9k + 1, k ≤ 20 expansions (11–182); "
        "rebase: 1 + 3m + 1, m ≤ width 10 nodes (11–32); mixture: 4 if the initial plan scores "
        "≥ 95, else 4 + Σ per iteration (1 prior + 2N, 9k + 1 or 3m + 1), ≤ 3 iterations"
    )

    class Config(MethodConfig):
        framework: Literal["best_of_n", "tot", "rebase", "mixture"] = "best_of_n"
        n: int = Field(5, ge=1)
        """N: plans sampled by Best-of-N."""
        children: int = Field(3, ge=1)
        """Children per expanded ToT node; nodes per REBASE level."""
        tot_iterations: int = Field(20, ge=1)
        rebase_width: int = Field(10, ge=1)
        rebase_tau: float = Field(20.0, gt=0)
        """REBASE's balance temperature on the score scale (our choice)."""
        threshold: int = Field(95, ge=LOWEST, le=HIGHEST)
        max_iterations: int = Field(3, ge=0)
        """The mixture's selection iterations after the initial plan (our choice)."""
        alpha_div: float = Field(0.1, ge=0)
        """α_div of the diversity bonus (our choice)."""
        alpha_rec: float = Field(0.5, ge=0)
        """α_rec of the recovery bonus (our choice)."""
        prior_weight: float = Field(1.0, ge=0)
        """The initial λ_prior (our choice)."""
        exploration_cap: float = Field(5.0, gt=0)
        """M, the cap on the exploration term."""
        sample_temperature: float = Field(0.7, ge=0, le=2)
        agent_temperature: float = Field(0.0, ge=0, le=2)

    config: Config

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        topology = Topology(name="plangen")
        for u, v in (
            (CONSTRAINT, PLANNER),
            (CONSTRAINT, VERIFIER),
            (CONSTRAINT, SELECTOR),
            (PLANNER, VERIFIER),
            (VERIFIER, PLANNER),
            (VERIFIER, SELECTOR),
            (PLANNER, EXECUTOR),
        ):
            topology.add_edge(u, v)
        ctx.topology = topology
        search = _Search(cfg, task, ctx)
        metadata: dict[str, object] = {"framework": cfg.framework}
        if cfg.framework == "mixture":
            plan, history = await search.mixture()
            metadata.update(iterations=history, threshold_met=plan.score >= cfg.threshold)
            last = len(history) + 1
        else:
            await search.extract_constraints()
            plan = await search.run(cfg.framework, None, 1, search.offer)
            metadata["created"] = search.created
            last = 2
        answer = await search.ask(EXECUTOR, execute_prompt(task, plan.text), last, "execution")
        ctx.propose(answer, score=plan.score, executed=True)
        metadata.update(plan=plan.text, score=plan.score, complete=plan.complete)
        return Solution(answer=answer, metadata=metadata)
