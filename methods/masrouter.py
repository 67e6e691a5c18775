"""MasRouter: a cascaded controller routes each query to a collaboration mode, roles and models.

Yue, Zhang, Liu, Wan, Wang, Cheng, Qi. "MasRouter: Learning to Route LLMs for Multi-Agent
Systems". arXiv:2502.11133 (ACL 2025). Code: github.com/yanweiyue/masrouter.

The search space: the collaboration modes ``modes``, the role pool ``agent_roles`` and the LLM
pool, which is the run's model roles: the run's ``--model`` and every distinct model that a
model role ``llm=MODEL`` or ``llm_<label>=MODEL`` names (``--model-role llm_strong=openai:gpt-4o
--model-role llm_small=...``; an entry's temperature goes with its model). No model role
reaches the agents (``agent_1`` .. ``agent_N``, ``decider``): the router gives each its model.

Algorithm (per query):

1. Query features (:func:`maslab.kit.features.query_features`): length flags, how many
   numbers, a code flag, a multiple-choice flag and ``hash_features`` hashed word shares; no
   model, no download.
2. The cascaded controller, four softmax policies (:class:`maslab.kit.learning.ChoicePolicy`)
   whose logits are linear in the features, each stage also reading the choices before it:
   a. the collaboration-mode determiner picks T from ``modes`` (query features);
   b. the role allocator picks the number of agents N in ``min_agents`` .. ``max_agents`` (and
      T), then each agent's role in turn (and T, and the counts of the roles given so far);
   c. the LLM router picks each agent's model from the pool (and T, and the agent's role).
   ``routing="sample"`` (default, as the official code's test loop) draws every choice with a
   generator seeded from the sample's random stream (``ctx.rng``), before any call; untrained,
   every policy is uniform, so the default is a uniformly random MAS. ``routing="greedy"``
   takes the likeliest option at every stage (untrained: the first of each).
3. The MAS runs (:func:`maslab.kit.layers.run_layers`, a layer's agents concurrently, each
   given its predecessors' outputs in agent order). Agent i has its role as system prompt and
   its routed model. Modes: ``io`` (independent direct answers), ``cot`` (independent
   step-by-step answers), ``chain`` (agent i reads agent i−1), ``tree`` (a binary hierarchy,
   agent i reads its parent ⌊i/2⌋), ``graph`` (agent i reads every earlier agent), ``debate``
   (R rounds: independent answers, then each reads the others' previous-round answers),
   ``reflection`` (each answers, then re-examines its own answer).
4. The decider (``decision="llm"``, the paper's final node) reads every agent's last output, in
   agent order, on the model most agents were routed to (ties: the earliest agent's), and states
   the answer. Its reply without an answer (empty, garbage) falls back to the majority vote over
   the agents' last outputs (metadata ``decision``). ``decision="majority"`` votes without it.

Training (``optimize``, ``maslab run --optimize-on``): for ``epochs`` passes over the
validation tasks in batches of ``batch_size``, route each task of the batch (draws in task order
from a generator seeded by the run seed, :func:`maslab.kit.learning.policy_rng`, before any
call), run the MASs concurrently and score each answer with the evaluator of its answer type
(:class:`maslab.bench.evaluation.Scorer`, or ``evaluator``). The reward is the score minus
λ·tokens/1000 (λ = ``cost_weight``; tokens: the run's prompt and completion tokens in the
ledger, replayed ones too, so a re-run learns the same). Every choice of a route moves by one
REINFORCE step with the batch's mean reward as baseline (``learning_rate``; a batch of one task
has advantage 0). In ``optimize`` agent names carry the task's position in the split
(``v3/agent_1``), so each run's tokens are its own. The four policies are the learned state.

LLM calls: c(T)·N + d, N agents (``min_agents`` .. ``max_agents``, default 1–6), c = 1 for
``io``, ``cot``, ``chain``, ``tree`` and ``graph``, c = R for ``debate`` (``debate_rounds`` = 2),
c = 2 for ``reflection``; d = 1 (``decision="majority"``: 0). Default: 2 to 13. ``optimize``:
the runs of epochs·|V| routes, at most epochs·|V|·(max c·``max_agents`` + d) (default 5·13 = 65
per validation task), plus the evaluator's calls if it asks a model.

Budget stop: the majority vote over the agents' latest outputs after the last complete layer
(ties to the earliest agent); nothing before the first layer completes.

Deviations:

- The paper's controller embeds the query, modes, roles and LLM descriptions with a sentence
  encoder and uses a variational mode determiner and neural cascades trained with Adam. Ours is
  four :class:`~maslab.kit.learning.ChoicePolicy` tables linear in cheap query features (no
  text encoder, no download), later stages reading earlier choices as one-hot features; a
  model is known by its name only (the paper also encodes its description and price).
- The official code first allocates the models (their number from a difficulty score), then
  the mode, then the roles; we follow the paper's order (mode, then roles and their number, then
  a model per agent). Its task classifier (which picks the domain's role pool) is left out: one
  role pool serves every query, and the features let the roles depend on it.
- Cost is tokens, not dollars: the official gsm8k script's utility is solved − 10·cost in
  dollars; at about $0.5 per million tokens that is our default λ = 0.005 per 1,000 tokens.
  The update is plain REINFORCE with the batch mean as baseline and ``learning_rate`` 0.1 (ours);
  the official code steps Adam (lr 0.01) on −log p·utility without a baseline. ``epochs`` = 5
  and ``batch_size`` = 4 are the official gsm8k script's, ``max_agents`` = 6 its controller's.
- Modes: the official ones are IO, CoT, Chain, FullConnected (every earlier agent, ours
  ``graph``), Debate (2 rounds) and Reflection; ``tree`` is ours, after the chain, tree and
  graph topologies the paper names. The role pool is a selection of the official code's math,
  code and commonsense roles, with our own one-line descriptions. Prompts are our own. The
  decider's fallback vote and ``decision="majority"`` are ours.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Final, Literal

import numpy as np
from pydantic import Field, model_validator

from maslab.bench.evaluation import Scorer
from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.messages import Message
from maslab.core.method import FiniteNumber, Method, MethodConfig, MethodState, register_method
from maslab.core.roles import ModelRoles, check_model_roles, numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.errors import ConfigError
from maslab.kit.aggregation import majority_decision, propose_vote
from maslab.kit.features import QUERY_FEATURES, query_features
from maslab.kit.layers import run_layers
from maslab.kit.learning import (
    ChoicePolicy,
    ChoicePolicyState,
    ChoiceStep,
    mean_baseline,
    policy_rng,
)
from maslab.kit.prompts import debate_prompt
from maslab.llm.types import ChatModel

__all__ = ["MasRouter"]

AGENT, DECIDER, LLM = "agent", "decider", "llm"
STATE_FORMAT: Final = "masrouter/1"

Mode = Literal["io", "cot", "chain", "tree", "graph", "debate", "reflection"]
MODES: tuple[Mode, ...] = ("io", "cot", "chain", "tree", "graph", "debate", "reflection")

MODE_INSTRUCTIONS: dict[str, str] = {
    "io": "Give your final answer directly.",
    "cot": "Work through it step by step, then give your final answer.",
    "chain": (
        "You are one link of a chain of agents: check the work handed to you, if any, extend "
        "or correct it, and reason step by step to your final answer."
    ),
    "tree": (
        "You are one node of a team hierarchy: weigh the work of the agent above you, if any, "
        "and reason step by step to your final answer."
    ),
    "graph": (
        "Compare the work of every teammate shown, if any, with your own reasoning, step by "
        "step, then give your final answer."
    ),
    "debate": (
        "Reason step by step and argue for your own answer: you will debate it with the other "
        "agents."
    ),
    "reflection": "Work through it step by step, then give your final answer.",
}

ROLE_DESCRIPTIONS: dict[str, str] = {
    "Math Solver": "You solve problems step by step and check every calculation.",
    "Mathematical Analyst": (
        "You analyse a problem before computing: its quantities, how they relate and the steps "
        "that lead to the answer."
    ),
    "Programming Expert": (
        "You reason like a programmer: precise, ordered steps, or code when code is asked for, "
        "with the edge cases checked."
    ),
    "Inspector": "You check the work in front of you step by step and correct every error.",
    "Algorithm Designer": (
        "You design the approach first: the algorithm, its data structures and its cost."
    ),
    "Test Analyst": (
        "You list the cases a solution must handle, the tricky ones above all, and test the work "
        "against them."
    ),
    "Knowledge Expert": "You recall the facts and definitions the question depends on, exactly.",
    "Critic": (
        "You look for the strongest reason the likeliest answer could be wrong, and keep it only "
        "if it survives."
    ),
}
Role = Literal[
    "Math Solver", "Mathematical Analyst", "Programming Expert", "Inspector",
    "Algorithm Designer", "Test Analyst", "Knowledge Expert", "Critic",
]  # fmt: skip
ROLES: tuple[Role, ...] = (
    "Math Solver", "Mathematical Analyst", "Programming Expert", "Inspector",
    "Algorithm Designer", "Test Analyst", "Knowledge Expert", "Critic",
)  # fmt: skip


def one_hot(index: int, size: int) -> tuple[float, ...]:
    return tuple(float(i == index) for i in range(size))


def system_prompt(role: str) -> str:
    return (
        f"You are the {role} of a team of AI agents that solve a task together. "
        f"{ROLE_DESCRIPTIONS[role]}"
    )


def agent_prompt(task: Task, mode: str, shown: Sequence[tuple[str, str]]) -> str:
    """A first-round turn: the task, the outputs of the agent's predecessors (label, text) if it
    has any, and the mode's instruction."""
    parts = [task.prompt()]
    if shown:
        blocks = "\n\n".join(f"--- {label} ---\n{text.strip()}" for label, text in shown)
        parts.append(
            f"Teammates who worked on it before you answered (they may be wrong):\n\n{blocks}"
        )
    parts.append(MODE_INSTRUCTIONS[mode])
    return "\n\n".join(parts)


def reflection_prompt(task: Task) -> str:
    return (
        "Look over your answer above for mistakes that would change the result. Correct any you "
        "find and state your final answer again; if it holds, state it again unchanged.\n\n"
        f"{task.prompt()}"
    )


def decider_prompt(task: Task, outputs: Sequence[tuple[str, str]]) -> str:
    blocks = "\n\n".join(f"--- {label} ---\n{text.strip()}" for label, text in outputs)
    return (
        f"{task.prompt()}\n\nThe agents of your team answered:\n\n{blocks}\n\n"
        "Decide which answer is right, then state that single final answer in the required format."
    )


DECIDER_SYSTEM = "You make the final decision of a team of AI agents."


def pool_key(name: str) -> bool:
    """Whether a model-roles key names a candidate model (``llm`` or ``llm_<label>``)."""
    return name == LLM or (name.startswith(f"{LLM}_") and len(name) > len(LLM) + 1)


@dataclass(frozen=True)
class Candidate:
    """A model of the LLM pool and the sampling its model-roles entry sets (a temperature)."""

    model: ChatModel
    sampling: dict[str, Any]


def candidate_models(ctx: Context) -> dict[str, Candidate]:
    """The LLM pool by model name: the run's model, then each distinct model the model roles
    name (in their order; the first entry naming a model gives its sampling)."""
    pool = {ctx.model.name: Candidate(ctx.model, {})}
    for entry in ctx.model_roles.values():
        if "model" in entry:
            handle = ctx.resolve(entry["model"])
            sampling = {k: v for k, v in entry.items() if k != "model"}
            pool.setdefault(handle.name, Candidate(handle, sampling))
    return pool


@dataclass(frozen=True)
class Route:
    """A routed MAS: its mode, each agent's role and model (by name), the controller's draws."""

    mode: str
    roles: tuple[str, ...]
    models: tuple[str, ...]
    steps: tuple[tuple[str, ChoiceStep], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return numbered(AGENT, len(self.roles))

    @property
    def decider_model(self) -> str:
        """The model most agents run on (ties: the earliest agent's)."""
        counts = Counter(self.models)
        return max(self.models, key=lambda m: (counts[m], -self.models.index(m)))


def spatial_graph(mode: str, names: Sequence[str]) -> Topology:
    """Who reads whom within a round (debate and reflection rounds have no such edges)."""
    if mode == "chain":
        return Topology.chain(names)
    if mode == "tree":
        return Topology.tree(names)
    edges = list(combinations(names, 2)) if mode == "graph" else []
    return Topology.from_edges(edges, name=mode, nodes=names)


@register_method("masrouter")
class MasRouter(Method):
    """A learned cascade routes each query to a collaboration mode, agent roles and a model per
    agent from the run's model pool; trained with REINFORCE on score minus λ·tokens."""

    roles = (LLM,)
    paper = "Yue et al., arXiv 2502.11133 (MasRouter)"
    category = "MAS routing (learned cascade: collaboration mode, roles, a model per agent)"
    calls = (
        "c(T)·N + d: N routed agents (1–6); c = 1 (io, cot, chain, tree, graph), R = 2 (debate), "
        "2 (reflection); d = 1 decider (0 with `decision=majority`); default 2–13"
    )

    class Config(MethodConfig):
        modes: tuple[Mode, ...] = Field(MODES, min_length=1, description="collaboration modes")
        agent_roles: tuple[Role, ...] = Field(ROLES, min_length=1, description="the role pool")
        min_agents: int = Field(1, ge=1, description="the fewest agents the router may choose")
        max_agents: int = Field(6, ge=1, description="the most agents (official code: 6)")
        debate_rounds: int = Field(2, ge=1, description="R of the debate mode (official: 2)")
        decision: Literal["llm", "majority"] = Field(
            "llm", description="a decider call reads every agent (paper), or a vote (no call)"
        )
        routing: Literal["sample", "greedy"] = Field(
            "sample", description="draw each choice (paper) or take the likeliest"
        )
        hash_features: int = Field(8, ge=0, description="hashed word-count features")
        epochs: int = Field(5, ge=1, description="passes over the validation tasks (official)")
        batch_size: int = Field(4, ge=1, description="tasks per update (official)")
        learning_rate: float = Field(0.1, gt=0, description="REINFORCE step size")
        cost_weight: float = Field(0.005, ge=0, description="λ: reward lost per 1,000 tokens")
        evaluator: str | None = Field(
            None, description="scores optimize's answers; None: by the task's answer type"
        )

        @model_validator(mode="after")
        def _pools(self) -> MasRouter.Config:
            for name in ("modes", "agent_roles"):
                if len(set(getattr(self, name))) != len(getattr(self, name)):
                    raise ValueError(f"{name}: each may appear once")
            if self.min_agents > self.max_agents:
                raise ValueError("min_agents must not exceed max_agents")
            return self

    config: Config

    class LearnedState(MethodState):
        format: Literal["masrouter/1"]
        mode: ChoicePolicyState
        agents: ChoicePolicyState
        role: ChoicePolicyState
        llm: ChoicePolicyState
        mean_reward: list[FiniteNumber]
        """Each ``optimize`` epoch's mean reward."""

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.policies: dict[str, ChoicePolicy] = self.new_policies()
        """The controller's stages: ``mode``, ``agents``, ``role`` and (once a pool is known)
        ``llm``."""
        self.mean_reward: list[float] = []
        self.trained = False

    # -- the controller ------------------------------------------------------------------------

    def widths(self) -> dict[str, int]:
        """The features each stage reads: the query's, then the earlier choices'."""
        cfg = self.config
        query = len(QUERY_FEATURES) + cfg.hash_features
        modes, roles = len(cfg.modes), len(cfg.agent_roles)
        both = query + modes + roles
        return {"mode": query, "agents": query + modes, "role": both, LLM: both}

    def agent_counts(self) -> list[str]:
        return [str(n) for n in range(self.config.min_agents, self.config.max_agents + 1)]

    def new_policies(self) -> dict[str, ChoicePolicy]:
        """The untrained stages before the LLM pool is known (uniform)."""
        cfg, width = self.config, self.widths()
        return {
            "mode": ChoicePolicy(["mode"], cfg.modes, width["mode"]),
            "agents": ChoicePolicy(["agents"], self.agent_counts(), width["agents"]),
            "role": ChoicePolicy(["role"], cfg.agent_roles, width["role"]),
        }

    def llm_router(self, models: Sequence[str]) -> ChoicePolicy:
        """The LLM router over ``models``: a fresh uniform one when the pool is new and nothing
        was learned; a ConfigError when the trained router knows other models."""
        router = self.policies.get(LLM)
        if router is not None and router.options == list(models):
            return router
        if self.trained and router is not None:
            raise ConfigError(
                f"masrouter's LLM router was trained on the models {router.options}; this run's "
                f"pool is {list(models)} (its --model and the llm model roles)"
            )
        self.policies[LLM] = ChoicePolicy([LLM], models, self.widths()[LLM])
        return self.policies[LLM]

    def route(self, task: Task, models: Sequence[str], rng: np.random.Generator | None) -> Route:
        """The controller's MAS for ``task``: mode, number of agents, each agent's role, each
        agent's model, drawn in that order (the likeliest of each without ``rng``)."""
        cfg = self.config
        self.llm_router(models)
        steps: list[tuple[str, ChoiceStep]] = []

        def draw(stage: str, features: Sequence[float]) -> int:
            step = self.policies[stage].sample(0, rng, features)
            steps.append((stage, step))
            return step.chosen

        x = query_features(task, cfg.hash_features)
        mode = draw("mode", x)
        x_mode = (*x, *one_hot(mode, len(cfg.modes)))
        size = cfg.min_agents + draw("agents", x_mode)
        counts = [0] * len(cfg.agent_roles)
        roles: list[int] = []
        for _ in range(size):
            role = draw("role", (*x_mode, *(c / cfg.max_agents for c in counts)))
            counts[role] += 1
            roles.append(role)
        chosen = [draw(LLM, (*x_mode, *one_hot(r, len(counts)))) for r in roles]
        return Route(
            mode=cfg.modes[mode],
            roles=tuple(cfg.agent_roles[r] for r in roles),
            models=tuple(models[m] for m in chosen),
            steps=tuple(steps),
        )

    def rounds(self, mode: str) -> int:
        return {"debate": self.config.debate_rounds, "reflection": 2}.get(mode, 1)

    def calls_of(self, route: Route) -> int:
        """c(T)·N + d: the calls of running ``route``."""
        return self.rounds(route.mode) * len(route.roles) + (self.config.decision == "llm")

    def topology(self, route: Route) -> Topology:
        """Who reads whom in ``route``: the mode's edges (a debate: everyone reads everyone),
        and every agent into the decider."""
        names = route.names
        graph = spatial_graph(route.mode, names)
        topology = Topology(name=f"masrouter {route.mode}")
        for name, role, model in zip(names, route.roles, route.models, strict=True):
            topology.add_node(name, role=role, model=model)
        for u, v in graph.edges:
            topology.add_edge(u, v)
        if route.mode == "debate":
            for u, v in Topology.complete(names).edges:
                topology.add_edge(u, v)
        if self.config.decision == "llm":
            topology.add_node(DECIDER, model=route.decider_model)
            for name in names:
                topology.add_edge(name, DECIDER)
        return topology

    # -- execution -----------------------------------------------------------------------------

    async def solve(self, task: Task, ctx: Context) -> Solution:
        pool = candidate_models(ctx)
        sampled = self.config.routing == "sample"
        rng = np.random.default_rng(ctx.rng.getrandbits(64)) if sampled else None
        route = self.route(task, list(pool), rng)
        ctx.topology = self.topology(route)
        solution = await self.execute(task, ctx, route, pool)
        return solution.model_copy(
            update={
                "metadata": {
                    **solution.metadata,
                    "routing": self.config.routing,
                    "trained": self.trained,
                }
            }
        )

    async def execute(
        self,
        task: Task,
        ctx: Context,
        route: Route,
        pool: Mapping[str, Candidate],
        prefix: str = "",
    ) -> Solution:
        """Run ``route``'s agents round by round (a round layer by layer), then decide; agent
        names start with ``prefix`` (``optimize`` tells the runs of a batch apart by it)."""
        names = route.names
        agents = {
            name: ctx.agent(
                prefix + name,
                role=AGENT,
                system=system_prompt(role),
                model=pool[model].model,
                **pool[model].sampling,
            )
            for name, role, model in zip(names, route.roles, route.models, strict=True)
        }
        labels = {name: f"{name} ({role})" for name, role in zip(names, route.roles, strict=True)}
        graph = spatial_graph(route.mode, names)
        latest: dict[str, Message] = {}
        for r in range(self.rounds(route.mode)):
            await self.run_round(task, ctx, route.mode, r, graph, agents, labels, latest)
        outputs = [(labels[n], latest[n].content) for n in names]
        metadata: dict[str, Any] = {
            "mode": route.mode,
            "agents": [
                {"name": n, "role": role, "model": model}
                for n, role, model in zip(names, route.roles, route.models, strict=True)
            ],
            "calls": self.calls_of(route),
        }
        vote = majority_decision(task, [text for _, text in outputs])
        if self.config.decision == "majority":
            return Solution(answer=vote.response, metadata={**metadata, "decision": "majority"})
        candidate = pool[route.decider_model]
        decider = ctx.agent(
            prefix + DECIDER,
            role=DECIDER,
            system=DECIDER_SYSTEM,
            model=candidate.model,
            **candidate.sampling,
        )
        said = await decider.reply(
            decider_prompt(task, outputs), round=self.rounds(route.mode), kind="aggregate"
        )
        metadata["decider"] = route.decider_model
        if task.answer_in(said.content) is None:
            decision = "vote (the decider's reply held no answer)"
            return Solution(answer=vote.response, metadata={**metadata, "decision": decision})
        return Solution(answer=said.content, metadata={**metadata, "decision": "decider"})

    async def run_round(
        self,
        task: Task,
        ctx: Context,
        mode: str,
        r: int,
        graph: Topology,
        agents: Mapping[str, Agent],
        labels: Mapping[str, str],
        latest: dict[str, Message],
    ) -> None:
        """Round ``r``: each agent of a layer answers concurrently; ``latest`` takes the
        answers, and the vote over them is proposed after each layer."""
        previous = dict(latest)
        order = list(agents)

        async def turn(name: str, depth: int, inputs: list[tuple[str, Message]]) -> Message:
            if r == 0:
                prompt = agent_prompt(task, mode, [(labels[p], m.content) for p, m in inputs])
            elif mode == "debate":
                prompt = debate_prompt(task, [previous[n] for n in order if n != name])
            else:
                prompt = reflection_prompt(task)
            return await agents[name].reply(prompt, round=r)

        async for _, replies in run_layers(graph, turn):
            latest.update(replies)
            answered = [latest[n].content for n in order if n in latest]
            propose_vote(ctx, task, answered, round=r)

    # -- optimisation --------------------------------------------------------------------------

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """Train the controller on ``tasks`` by REINFORCE on score − λ·tokens/1000 (module)."""
        cfg = self.config
        if not tasks:
            return
        pool = candidate_models(ctx)
        models = list(pool)
        rng = policy_rng(ctx.seed, "masrouter")
        indexed = list(enumerate(tasks))
        async with Scorer(cfg.evaluator) as scorer:
            for _ in range(cfg.epochs):
                rewards: list[float] = []
                for start in range(0, len(indexed), cfg.batch_size):
                    batch = indexed[start : start + cfg.batch_size]
                    routes = [self.route(task, models, rng) for _, task in batch]
                    first = len(ctx.ledger.records)
                    solutions = await asyncio.gather(
                        *(
                            self.execute(task, ctx, route, pool, prefix=f"v{i}/")
                            for (i, task), route in zip(batch, routes, strict=True)
                        )
                    )
                    records = ctx.ledger.records[first:]
                    batch_rewards = []
                    for (i, task), solution in zip(batch, solutions, strict=True):
                        tokens = sum(
                            r.prompt_tokens + r.completion_tokens
                            for r in records
                            if r.purpose == "method" and (r.agent or "").startswith(f"v{i}/")
                        )
                        score = (await scorer.score(task, solution.answer, ctx=ctx)).value
                        batch_rewards.append(score - cfg.cost_weight * tokens / 1000)
                    advantages = mean_baseline(batch_rewards)
                    for route, advantage in zip(routes, advantages, strict=True):
                        for stage, step in route.steps:
                            policy = self.policies[stage]
                            policy.reinforce([step], float(advantage), cfg.learning_rate)
                    rewards += batch_rewards
                self.mean_reward.append(float(np.mean(rewards)))
        self.trained = True

    def learned_state(self) -> MasRouter.LearnedState | None:
        """The controller's four stages and each epoch's mean reward (None before training)."""
        if not self.trained:
            return None
        states = {stage: policy.state() for stage, policy in self.policies.items()}
        return self.LearnedState(format=STATE_FORMAT, mean_reward=self.mean_reward, **states)

    def load_learned_state(self, state: MasRouter.LearnedState) -> None:
        fresh, width = self.new_policies(), self.widths()
        loaded = {stage: ChoicePolicy.from_state(getattr(state, stage)) for stage in (*fresh, LLM)}
        for stage, policy in loaded.items():
            expected = fresh[stage].options if stage in fresh else policy.options
            if (policy.slots, policy.options, policy.weights.shape[2]) != (
                [stage],
                expected,
                width[stage],
            ):
                raise ValueError(
                    f"its {stage} stage chooses among {policy.options} on "
                    f"{policy.weights.shape[2]} features; this config's: {expected} on "
                    f"{width[stage]}"
                )
        self.policies, self.trained = loaded, True
        self.mean_reward = list(state.mean_reward)

    # -- model roles ---------------------------------------------------------------------------

    def check_model_roles(self, model_roles: Mapping[str, Any] | None) -> ModelRoles:
        """Model roles name the LLM pool: ``llm`` or ``llm_<label>``, each with a model."""
        checked = check_model_roles(model_roles)
        for key, entry in checked.items():
            if not pool_key(key):
                raise ConfigError(
                    f"masrouter has no role '{key}': its model roles name the router's candidate "
                    "models, as llm=MODEL or llm_<label>=MODEL (the router picks every agent's)"
                )
            if "model" not in entry:
                raise ConfigError(f"masrouter: model role '{key}' names no model ({key}=MODEL)")
        return checked
