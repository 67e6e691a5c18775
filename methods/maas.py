"""MaAS: an agentic supernet of operator layers, sampled per query by a cost-aware controller.

Zhang, Wang, Zhou, Chen, Li, Yang, Guo, Liu, Yu. "Multi-agent Architecture Search via Agentic
Supernet". arXiv:2502.04180 (ICML 2025). Code: github.com/bingreeky/MaAS.

Supernet: L layers (default 4), each a choice among the same operators, every operator a small
composition of model calls with a known call count c(op):

- ``io``: one direct answer (1 call).
- ``cot``: one step-by-step answer (1 call, the ``cot`` method's prompt).
- ``self_consistency``: k step-by-step samples, majority vote (k calls, default 3).
- ``debate``: D debaters answer, then see each other's answers and answer again for R rounds in
  all, majority vote over the last round (D·R calls, default 2·2 = 4; the ``llm_debate``
  prompts).
- ``self_refine``: a critic reviews the current answer and a refiner rewrites it (2 calls); in
  layer 1, where there is no answer yet, the refiner drafts one first (3 calls).
- ``ensemble``: n step-by-step candidates, then one aggregator call states the answer
  (n + 1 calls, default 4; ``maslab.kit.aggregation.llm_aggregate``).
- ``early_exit``: no call; the network ends (never available in layer 1).

Controller: a :class:`maslab.kit.learning.ChoicePolicy` with one slot per layer over the operators,
its logits linear in four cheap features of the query (:func:`query_features`). The whole
architecture is drawn before any call (the controller reads only the query). Per layer ℓ, with
p the layer's operator probabilities: operators are activated one at a time, each drawn from
the softmax over the operators not yet activated (``controller="greedy"``: the likeliest left,
i.e. in decreasing probability), adding its p to a cumulative score, until that score exceeds
``threshold`` (0.3). Activating ``early_exit`` stops the activation: the operators activated
before it run, and layer ℓ is the last (if it came first, the network ends after layer ℓ−1).

Execution, layer by layer: the activated operators of a layer run concurrently. Operators of
layer 1 see the question only; those of a later layer see the question and the previous
layer's outputs (one per operator, in activation order) as candidate answers to check, and
``self_refine`` refines the previous layer's answer. A layer's answer is the majority vote over
its operators' outputs (ties: the first activated). The final answer is the answer of the last
layer run.

LLM calls: Σ over the layers run of Σ over their activated operators of c(op); metadata
``calls`` holds it. Between 1 (one ``io`` or ``cot``, then an exit) and 16 + 15·(L−1) (61
with the defaults: every operator in every layer, which needs a threshold near 1).

Optimisation (``optimize``, ``maslab run --optimize-on``): for ``epochs`` passes over the
validation tasks, draw K = ``samples`` architectures per task (a generator seeded from the run
seed, draws in task order before any call), run them all, and score each answer with the
evaluator of the task's answer type. Reward = score − λ·calls (the cost-aware objective;
λ = ``cost_weight``, in reward per LLM call). Advantages are group relative over the K
samples of a task (``maslab.kit.learning.group_relative``: a group with equal rewards is skipped)
and every drawn choice of an architecture moves by one REINFORCE step (Plackett–Luce log
probability of its activation order, ``learning_rate``). The controller's table is the learned
state. Cost: epochs · K · Σ_tasks calls(architecture).

Budget stop: the answer of the last complete layer.

Model roles: ``io``, ``cot``, ``sampler`` (self-consistency), ``debater``, ``critic`` and
``refiner`` (self-refine), ``ensemble`` (the ensemble's candidates), ``aggregator`` (the
ensemble's decision). Agents are named by layer: ``l2_cot``, ``l1_debater_2``,
``l3_sampler_1`` ...; the aggregator is ``aggregator`` in every layer.

Deviations:

- The paper's controller embeds the query and the operator descriptions with a sentence
  encoder (MiniLM) and scores operators with an MoE-style network conditioned on the
  operators already chosen. Ours is the shared NumPy policy over cheap query features (length,
  numbers, options, code), per layer, not conditioned on earlier layers' choices.
- The paper's activation takes the operators in decreasing score; ours samples the activation
  order during optimisation and (by default) at inference, so that REINFORCE has a log
  probability to follow; ``controller="greedy"`` is the paper's deterministic rule.
- Operator prompts are fixed (our own wording); the paper also updates them with textual
  gradients. The ReAct, Testing and Programmer operators (tool use, code execution) are left
  out. Cost is counted in LLM calls rather than dollars or tokens; λ = 0.01 per call is our
  choice (the spec gives no value).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator

from maslab.bench.evaluation import Scorer
from maslab.core.context import Context
from maslab.core.method import FiniteNumber, Method, MethodConfig, MethodState, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.kit.aggregation import llm_aggregate, majority_decision, propose_vote
from maslab.kit.learning import (
    ChoicePolicy,
    ChoicePolicyState,
    ChoiceStep,
    group_relative,
    policy_rng,
)
from maslab.kit.prompts import cot_prompt, debate_prompt, refine_prompt

Operator = Literal[
    "io", "cot", "self_consistency", "debate", "self_refine", "ensemble", "early_exit"
]
OPERATORS: tuple[Operator, ...] = (
    "io", "cot", "self_consistency", "debate", "self_refine", "ensemble", "early_exit",
)  # fmt: skip
EARLY_EXIT = "early_exit"
FEATURES = ("length", "numbers", "options", "code")
ROLES = ("io", "cot", "sampler", "debater", "critic", "refiner", "ensemble", "aggregator")


def query_features(task: Task) -> tuple[float, ...]:
    """Cheap features of the query, each in [0, 1]: its length (words / 200), how many numbers
    it holds (/ 10), whether it has options, whether the answer is code."""
    words = len(task.question.split())
    numbers = len(re.findall(r"\d+(?:\.\d+)?", task.question))
    return (
        min(words / 200, 1.0),
        min(numbers / 10, 1.0),
        float(bool(task.choices)),
        float(task.answer_type == "code"),
    )


def step_prompt(task: Task, previous: Sequence[str], *, reason: bool = True) -> str:
    """The question (with the step-by-step instruction when ``reason``), after the previous
    layer's outputs when there are any."""
    ask = cot_prompt(task) if reason else task.prompt()
    if not previous:
        return ask
    shown = "\n\n".join(f"--- Candidate {i} ---\n{p.strip()}" for i, p in enumerate(previous, 1))
    return (
        f"Earlier steps produced these candidate answers (any of them may be wrong):\n\n{shown}"
        f"\n\nCheck them, keep what holds up and fix what does not.\n\n{ask}"
    )


def critique_prompt(task: Task, answer: str) -> str:
    return (
        f"Question:\n{task.prompt()}\n\nProposed answer:\n{answer.strip()}\n\n"
        "Review this answer: go through each step and the final result and say precisely what "
        "is wrong, missing or doubtful. Do not write a new solution."
    )


@dataclass(frozen=True)
class Layer:
    """A layer of a drawn architecture: its operators in activation order (without the exit),
    whether it ends the network, and the controller's draws."""

    operators: tuple[str, ...]
    exit: bool
    steps: tuple[ChoiceStep, ...]


def cost_aware_reward(score: float, calls: int, cost_weight: float) -> float:
    """The optimisation objective of one run: score − λ·calls."""
    return score - cost_weight * calls


@register_method("maas")
class MaAS(Method):
    """A controller samples operators per layer of a supernet until a cumulative score passes a
    threshold, with early exit; trained on utility minus λ·calls."""

    roles = ROLES
    paper = "Zhang et al., arXiv 2502.04180 (MaAS)"
    category = "architecture search (agentic supernet, learned controller, early exit)"
    calls = (
        "Σ over the layers run of c(op) of their operators: io, cot 1; self_consistency k; "
        "debate D·R; self_refine 2 (3 in layer 1); ensemble n+1"
    )

    class Config(MethodConfig):
        layers: int = Field(4, ge=1)
        threshold: float = Field(0.3, gt=0, lt=1)
        operators: tuple[Operator, ...] = OPERATORS
        controller: Literal["sample", "greedy"] = "sample"
        """How ``solve`` draws an architecture: sampled (the paper) or the likeliest order."""
        consistency_samples: int = Field(3, ge=1)
        """k: the self-consistency operator's samples."""
        debaters: int = Field(2, ge=1)
        debate_rounds: int = Field(2, ge=1)
        ensemble_size: int = Field(3, ge=1)
        # optimize
        epochs: int = Field(3, ge=1)
        samples: int = Field(4, ge=2)
        """K: architectures drawn per validation task and epoch (one group)."""
        learning_rate: float = Field(0.5, gt=0)
        cost_weight: float = Field(0.01, ge=0)
        """λ: reward lost per LLM call."""
        evaluator: str | None = None
        """Scores ``optimize``'s answers; None: by the task's answer type."""

        @field_validator("operators")
        @classmethod
        def _operators(cls, operators: tuple[str, ...]) -> tuple[str, ...]:
            if len(set(operators)) != len(operators):
                raise ValueError("each operator may appear once")
            if not set(operators) - {EARLY_EXIT}:
                raise ValueError("at least one operator besides early_exit is needed")
            return operators

    config: Config

    class LearnedState(MethodState):
        controller: ChoicePolicyState
        mean_reward: list[FiniteNumber]
        """Each ``optimize`` epoch's mean reward."""

    def __init__(
        self, config: MethodConfig | Mapping[str, Any] | None = None, **overrides: Any
    ) -> None:
        super().__init__(config, **overrides)
        self.policy = self.new_policy()
        """The controller: logits per layer and operator, linear in :func:`query_features`."""
        self.rewards: list[list[float]] = []
        """Each ``optimize`` epoch's rewards, task by task, K per task."""
        self.trained = False

    def new_policy(self) -> ChoicePolicy:
        slots = [f"layer_{i}" for i in range(1, self.config.layers + 1)]
        return ChoicePolicy(slots, self.config.operators, features=len(FEATURES))

    def agent_names(self) -> tuple[str, ...]:
        cfg = self.config
        per_layer = (
            "io", "cot", *numbered("sampler", cfg.consistency_samples),
            *numbered("debater", cfg.debaters), "critic", "refiner",
            *numbered("ensemble", cfg.ensemble_size),
        )  # fmt: skip
        return tuple(f"l{i}_{n}" for i in range(1, cfg.layers + 1) for n in per_layer)

    # -- the controller ------------------------------------------------------------------------

    def activate(
        self, layer: int, features: Sequence[float], rng: np.random.Generator | None
    ) -> Layer:
        """Layer ``layer``'s (0-based) operators: drawn one at a time among those left (the
        likeliest without ``rng``) until their summed probability exceeds the threshold or the
        early exit is drawn."""
        options = self.policy.options
        available = [op != EARLY_EXIT or layer > 0 for op in options]
        probs = self.policy.probabilities(layer, features, available)
        chosen: list[str] = []
        steps: list[ChoiceStep] = []
        total = 0.0
        while total <= self.config.threshold:
            left = [ok and op not in chosen for op, ok in zip(options, available, strict=True)]
            step = self.policy.sample(layer, rng, features, left)
            steps.append(step)
            total += float(probs[step.chosen])
            if options[step.chosen] == EARLY_EXIT:
                return Layer(tuple(chosen), True, tuple(steps))
            chosen.append(options[step.chosen])
            if not any(ok and op not in chosen for op, ok in zip(options, available, strict=True)):
                break
        return Layer(tuple(chosen), False, tuple(steps))

    def architecture(self, task: Task, rng: np.random.Generator | None) -> list[Layer]:
        """The layers the controller activates for ``task``, up to and including an exit."""
        features = query_features(task)
        layers: list[Layer] = []
        for i in range(self.config.layers):
            layers.append(self.activate(i, features, rng))
            if layers[-1].exit:
                break
        return layers

    def operator_calls(self, operator: str, first: bool) -> int:
        """c(op): the calls of one operator run (``first``: in layer 1, no answer before)."""
        cfg = self.config
        return {
            "io": 1,
            "cot": 1,
            "self_consistency": cfg.consistency_samples,
            "debate": cfg.debaters * cfg.debate_rounds,
            "self_refine": 3 if first else 2,
            "ensemble": cfg.ensemble_size + 1,
            EARLY_EXIT: 0,
        }[operator]

    def calls_of(self, layers: Sequence[Layer]) -> int:
        """The LLM calls of running ``layers`` (the cost in the objective)."""
        return sum(
            self.operator_calls(op, i == 0) for i, la in enumerate(layers) for op in la.operators
        )

    # -- execution -----------------------------------------------------------------------------

    async def solve(self, task: Task, ctx: Context) -> Solution:
        sampled = self.config.controller == "sample"
        rng = np.random.default_rng(ctx.rng.getrandbits(64)) if sampled else None
        layers = self.architecture(task, rng)
        ctx.topology = self.topology(layers)
        return await self.execute(task, ctx, layers)

    async def execute(self, task: Task, ctx: Context, layers: Sequence[Layer]) -> Solution:
        """Run ``layers`` one after the other; the last layer's vote is the answer."""
        previous: list[str] = []
        answer = ""
        run = [la for la in layers if la.operators]
        for i, layer in enumerate(run):
            outputs = await asyncio.gather(
                *(self.run_operator(op, task, ctx, i, previous, answer) for op in layer.operators)
            )
            previous = list(outputs)
            answer = propose_vote(ctx, task, previous, layer=i + 1).response
        return Solution(
            answer=answer,
            metadata={
                "architecture": [list(la.operators) for la in run],
                "early_exit": bool(layers) and layers[-1].exit,
                "layers_run": len(run),
                "calls": self.calls_of(run),
            },
        )

    async def run_operator(
        self, operator: str, task: Task, ctx: Context, layer: int, previous: list[str], answer: str
    ) -> str:
        """One operator's output in layer ``layer`` (0-based), given the previous layer's
        ``previous`` outputs and ``answer``."""
        cfg = self.config
        tag = f"l{layer + 1}_"
        prompt = step_prompt(task, previous)

        async def ask(name: str, role: str, text: str) -> str:
            return (await ctx.agent(tag + name, role=role).reply(text, round=layer)).content

        if operator in ("io", "cot"):
            return await ask(
                operator, operator, step_prompt(task, previous, reason=operator == "cot")
            )
        if operator == "self_consistency":
            names = numbered("sampler", cfg.consistency_samples)
            outputs = await asyncio.gather(*(ask(n, "sampler", prompt) for n in names))
            return majority_decision(task, outputs).response
        if operator == "ensemble":
            names = numbered("ensemble", cfg.ensemble_size)
            outputs = await asyncio.gather(*(ask(n, "ensemble", prompt) for n in names))
            return (await llm_aggregate(ctx, task, outputs, round=layer)).content
        if operator == "self_refine":
            draft = answer if layer else await ask("refiner", "refiner", prompt)
            feedback = await ask("critic", "critic", critique_prompt(task, draft))
            return await ask("refiner", "refiner", refine_prompt(task, [(draft, feedback)]))
        if operator == "debate":
            debaters = [
                ctx.agent(tag + n, role="debater") for n in numbered("debater", cfg.debaters)
            ]
            said = await asyncio.gather(*(d.reply(prompt, round=layer) for d in debaters))
            for _ in range(1, cfg.debate_rounds):
                said = await asyncio.gather(
                    *(
                        d.reply(
                            debate_prompt(task, [m for m in said if m.sender != d.name]),
                            round=layer,
                        )
                        for d in debaters
                    )
                )
            return majority_decision(task, [m.content for m in said]).response
        raise AssertionError(f"unknown operator {operator!r}")

    def topology(self, layers: Sequence[Layer]) -> Topology:
        """The drawn architecture as who reads whom: each operator's agents read the previous
        layer's operators (their output agents)."""
        cfg = self.config
        topology = Topology(name="maas")
        before: list[str] = []
        for i, layer in enumerate(la for la in layers if la.operators):
            tag = f"l{i + 1}_"
            outputs: list[str] = []
            for op in layer.operators:
                readers, output = {
                    "io": ([tag + "io"], tag + "io"),
                    "cot": ([tag + "cot"], tag + "cot"),
                    "self_consistency": (
                        [tag + n for n in numbered("sampler", cfg.consistency_samples)],
                        None,
                    ),
                    "debate": ([tag + n for n in numbered("debater", cfg.debaters)], None),
                    "self_refine": ([tag + "refiner", tag + "critic"], tag + "refiner"),
                    "ensemble": (
                        [tag + n for n in numbered("ensemble", cfg.ensemble_size)],
                        "aggregator",
                    ),
                }[op]
                for reader in readers:
                    topology.add_node(reader, layer=i + 1, operator=op)
                    for source in before:
                        topology.add_edge(source, reader)
                if op == "ensemble":
                    for reader in readers:
                        topology.add_edge(reader, "aggregator")
                if op == "self_refine":
                    topology.add_edge(tag + "critic", tag + "refiner")
                if op == "debate":
                    for u in readers:
                        for v in readers:
                            if u != v:
                                topology.add_edge(u, v)
                outputs += [output] if output else readers
            before = outputs
        return topology

    # -- optimisation --------------------------------------------------------------------------

    async def optimize(self, tasks: Sequence[Task], ctx: Context) -> None:
        """Train the controller on ``tasks`` by group-relative REINFORCE on score − λ·calls."""
        cfg = self.config
        if not tasks:
            return
        rng = policy_rng(ctx.seed, "maas")
        async with Scorer(cfg.evaluator) as scorer:
            for _ in range(cfg.epochs):
                drawn = [[self.architecture(t, rng) for _ in range(cfg.samples)] for t in tasks]
                runs = await asyncio.gather(
                    *(
                        self.execute(t, ctx, arch)
                        for t, group in zip(tasks, drawn, strict=True)
                        for arch in group
                    )
                )
                rewards: list[float] = []
                for j, (task, group) in enumerate(zip(tasks, drawn, strict=True)):
                    group_rewards = []
                    for solution in runs[j * cfg.samples : (j + 1) * cfg.samples]:
                        score = await scorer.score(task, solution.answer, ctx=ctx)
                        calls = solution.metadata["calls"]
                        group_rewards.append(cost_aware_reward(score.value, calls, cfg.cost_weight))
                    rewards += group_rewards
                    advantages = group_relative(group_rewards)
                    if advantages is None:
                        continue
                    for arch, advantage in zip(group, advantages, strict=True):
                        steps = [s for layer in arch for s in layer.steps]
                        self.policy.reinforce(steps, float(advantage), cfg.learning_rate)
                self.rewards.append(rewards)
            self.trained = True

    def learned_state(self) -> MaAS.LearnedState | None:
        """The controller and each epoch's mean reward (None before ``optimize`` ran)."""
        if not self.trained:
            return None
        means = [sum(r) / len(r) for r in self.rewards]
        return self.LearnedState(controller=self.policy.state(), mean_reward=means)

    def load_learned_state(self, state: MaAS.LearnedState) -> None:
        policy = ChoicePolicy.from_state(state.controller)
        fresh = self.new_policy()
        if (policy.slots, policy.options, policy.weights.shape) != (
            fresh.slots,
            fresh.options,
            fresh.weights.shape,
        ):
            raise ValueError("its layers or operators differ from this config's")
        self.policy, self.trained = policy, True
        self.rewards = [[x] for x in state.mean_reward]  # the means only
