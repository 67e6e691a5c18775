"""Small learnable policies for methods that learn their structure (``optimize``): NumPy only.

Two policies, each a table of logits whose state (:class:`EdgePolicyState`,
:class:`ChoicePolicyState`: ``policy.state()`` and ``Policy.from_state(state)``) is a part of
a method's learned state:

- :class:`EdgePolicy`: an independent Bernoulli per edge of a candidate :class:`Topology`,
  ``P(edge) = sigmoid(logit)``. :meth:`~EdgePolicy.sample` draws a graph,
  :meth:`~EdgePolicy.threshold` keeps the edges whose *probability* exceeds a cut-off (0.5
  by default, the rule of a draw without a generator), :meth:`~EdgePolicy.graph` builds
  the topology of a draw. With ``features > 0`` each edge's logit is linear in a few cheap
  features of the query (``logits[e] + weights[e] @ x``), as for a :class:`ChoicePolicy`.
- :class:`ChoicePolicy`: a softmax over ``options`` per slot (a layer, a position), with an
  optional mask of the options available at a step. With ``features > 0`` the logits are
  linear in a few cheap features of the query (``logits[slot] + weights[slot] @ x``): a
  query-conditioned policy.

Both record each draw as a step (:class:`EdgeStep`, :class:`ChoiceStep`) and learn with
``reinforce(steps, advantage, lr)``: one REINFORCE step ``θ += lr · A · ∇θ log π(steps)``, where
``∇ log π`` is ``taken − p`` for an edge logit and ``onehot(chosen) − p`` for the logits of a
choice (times ``x`` for the feature weights of either). The advantage ``A`` comes from an estimator:

- :func:`mean_baseline`: REINFORCE with the batch's mean reward as baseline, ``A_i = r_i − r̄``.
- :func:`group_relative`: GRPO-style, over K samples of one query, ``A_i = (r_i − r̄) / σ``
  (population standard deviation); a group whose rewards are all equal carries no signal and
  is filtered (None).
- :func:`edge_credit`: edge-level credit over a group, ``A_e`` = mean reward of the samples
  with edge ``e`` minus that of the samples without it (0 for an edge present in all or none);
  :meth:`EdgePolicy.nudge` adds ``lr · A_e`` to each edge's logit.

Randomness: every draw takes a ``numpy.random.Generator``; :func:`policy_rng` seeds one from
the run seed (``ctx.seed`` in ``optimize``) and a method's own keys via
:func:`maslab.core.context.derive_seed`, so an optimisation is reproducible run to run.

Example::

    from maslab.kit.learning import EdgePolicy, mean_baseline, policy_rng
    from maslab.core.topology import Topology

    policy = EdgePolicy.from_topology(Topology.complete(["a", "b", "c"]))
    rng = policy_rng(0, "example")  # in optimize: policy_rng(ctx.seed, "<method>")
    for _ in range(20):  # the edge a -> b costs reward: REINFORCE learns to drop it
        draws = [policy.sample(rng) for _ in range(8)]
        rewards = [0.0 if any(s.taken and s.edge == ("a", "b") for s in d) else 1.0 for d in draws]
        for steps, advantage in zip(draws, mean_baseline(rewards), strict=True):
            policy.reinforce(steps, advantage, lr=0.5)
    assert policy.probability(("a", "b")) < 0.1 and ("a", "b") not in policy.threshold(0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from maslab.core.context import derive_seed
from maslab.core.method import FiniteNumber
from maslab.core.topology import Topology

Edge = tuple[str, str]


def policy_rng(seed: int, *keys: object) -> np.random.Generator:
    """A generator seeded from the run ``seed`` and ``keys`` (the method, a domain, ...)."""
    return np.random.default_rng(derive_seed(seed, "policy", *keys))


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    return 0.5 * (1 + np.tanh(np.asarray(x, dtype=float) / 2))  # no overflow for large |x|


def softmax(logits: np.ndarray, available: np.ndarray | Sequence[bool] | None = None) -> np.ndarray:
    """Probabilities over ``logits``; options not ``available`` get exactly 0."""
    logits = np.asarray(logits, dtype=float)
    mask = np.ones(logits.shape, bool) if available is None else np.asarray(available, bool)
    if not mask.any():
        raise ValueError("softmax over no available option")
    shifted = np.where(mask, logits - logits[mask].max(), -np.inf)
    exps = np.exp(shifted)
    return exps / exps.sum()


# -- estimators -----------------------------------------------------------------------------


def mean_baseline(rewards: Sequence[float]) -> np.ndarray:
    """REINFORCE advantages with the batch mean as baseline: ``r_i − mean(r)``."""
    values = np.asarray(rewards, dtype=float)
    return values - values.mean() if values.size else values


def group_relative(rewards: Sequence[float]) -> np.ndarray | None:
    """GRPO advantages of one query's K samples, ``(r_i − mean) / std`` (population std); None
    when the rewards do not vary (the group is filtered: it says nothing about the choices)."""
    values = np.asarray(rewards, dtype=float)
    std = values.std() if values.size else 0.0
    if std == 0:
        return None
    return (values - values.mean()) / std


def edge_credit(masks: Sequence[Sequence[bool]], rewards: Sequence[float]) -> np.ndarray | None:
    """Edge-level advantages over a group of K sampled graphs (rows of ``masks``, one column
    per edge): the mean reward with the edge minus the mean without it, 0 for an edge in every
    sample or in none; None when the rewards do not vary (filtered, like
    :func:`group_relative`)."""
    taken = np.asarray(masks, dtype=bool)
    values = np.asarray(rewards, dtype=float)
    if values.size == 0 or values.std() == 0:
        return None
    count = taken.sum(axis=0)
    both = (count > 0) & (count < len(values))
    with_edge = (values @ taken) / np.maximum(count, 1)
    without = (values @ ~taken) / np.maximum(len(values) - count, 1)
    return np.where(both, with_edge - without, 0.0)


# -- edges ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EdgeStep:
    """One Bernoulli draw: the edge, its probability then, whether it was taken, the features."""

    edge: Edge
    prob: float
    taken: bool
    features: tuple[float, ...] = ()


class EdgePolicy:
    """Independent Bernoulli logits over candidate edges (``P = sigmoid(logit)``), optionally
    linear in ``features`` cheap numbers describing the query (``logits[e] + weights[e] @ x``)."""

    def __init__(
        self,
        edges: Sequence[Edge],
        logits: Sequence[float] | np.ndarray | None = None,
        features: int = 0,
    ) -> None:
        self.edges: list[Edge] = [(str(u), str(v)) for u, v in edges]
        self.index = {edge: i for i, edge in enumerate(self.edges)}
        if len(self.index) != len(self.edges):
            raise ValueError("each edge may appear once")
        values = np.zeros(len(self.edges)) if logits is None else np.asarray(logits, float)
        if values.shape != (len(self.edges),):
            raise ValueError(f"{len(self.edges)} edges need as many logits, got {values.shape}")
        self.logits = values.copy()
        self.weights = np.zeros((len(self.edges), features))
        self.nodes: list[str] = list(dict.fromkeys(n for edge in self.edges for n in edge))

    @classmethod
    def from_topology(cls, topology: Topology, init: float = 0.0, features: int = 0) -> EdgePolicy:
        """A logit ``init`` per edge of ``topology`` (the candidates), its nodes kept."""
        policy = cls(topology.edges, np.full(len(topology.edges), float(init)), features)
        policy.nodes = list(topology.nodes)
        return policy

    def conditioned(self, features: Sequence[float] = ()) -> np.ndarray:
        """Every edge's logit for a query with ``features`` (``logits + weights @ x``)."""
        x = np.asarray(features, dtype=float)
        if x.shape != (self.weights.shape[1],):
            raise ValueError(f"expected {self.weights.shape[1]} features, got {x.size}")
        return self.logits + self.weights @ x

    def probabilities(self, features: Sequence[float] = ()) -> np.ndarray:
        return sigmoid(self.conditioned(features))

    def probability(self, edge: Edge, features: Sequence[float] = ()) -> float:
        return float(self.probabilities(features)[self.index[edge]])

    def sample(
        self,
        rng: np.random.Generator | None,
        edges: Sequence[Edge] | None = None,
        features: Sequence[float] = (),
    ) -> list[EdgeStep]:
        """One independent draw per edge of ``edges`` (all, in order, by default); without
        ``rng``, the likelier outcome of each (taken when its probability exceeds 0.5)."""
        chosen = self.edges if edges is None else list(edges)
        every = self.probabilities(features)
        probs = [float(every[self.index[e]]) for e in chosen]
        draws = rng.random(len(chosen)).tolist() if rng is not None else [0.5] * len(chosen)
        x = tuple(map(float, features))
        return [EdgeStep(e, p, u < p, x) for e, p, u in zip(chosen, probs, draws, strict=True)]

    def threshold(self, cutoff: float = 0.5, features: Sequence[float] = ()) -> list[Edge]:
        """The edges whose probability exceeds ``cutoff`` (a deterministic graph)."""
        probs = self.probabilities(features)
        return [e for e, p in zip(self.edges, probs, strict=True) if p > cutoff]

    def graph(self, edges: Sequence[Edge | EdgeStep], name: str = "") -> Topology:
        """The topology on the policy's nodes with ``edges`` (a draw: its taken edges)."""
        topology = Topology(name=name)
        for node in self.nodes:
            topology.add_node(node)
        for item in edges:
            if not isinstance(item, EdgeStep):
                topology.add_edge(*item)
            elif item.taken:
                topology.add_edge(*item.edge)
        return topology

    def reinforce(self, steps: Sequence[EdgeStep], advantage: float, lr: float) -> None:
        """``logit_e += lr · advantage · (taken − p)`` for each step (p as drawn), and the
        edge's feature weights by that times the step's features."""
        for step in steps:
            i = self.index[step.edge]
            change = lr * advantage * (float(step.taken) - step.prob)
            self.logits[i] += change
            if step.features:
                self.weights[i] += change * np.asarray(step.features)

    def nudge(self, credit: Sequence[float] | np.ndarray, lr: float) -> None:
        """``logit_e += lr · credit_e`` (edge-level advantages from :func:`edge_credit`)."""
        self.logits += lr * np.asarray(credit, dtype=float)

    def state(self) -> EdgePolicyState:
        """The policy as a learned state holds it."""
        return EdgePolicyState(
            nodes=list(self.nodes),
            edges=list(self.edges),
            logits=self.logits.tolist(),
            features=self.weights.shape[1],
            weights=self.weights.tolist(),
        )

    @classmethod
    def from_state(cls, state: EdgePolicyState) -> EdgePolicy:
        """The policy a learned state holds (its shapes were checked by the state)."""
        policy = cls(state.edges, state.logits, state.features)
        policy.weights = np.array(state.weights, dtype=float).reshape(policy.weights.shape)
        policy.nodes = list(state.nodes)
        return policy


class EdgePolicyState(BaseModel):
    """An :class:`EdgePolicy` in a learned state: its nodes, its distinct edges (between those
    nodes), a finite logit per edge and a row of ``features`` finite weights per edge."""

    model_config = ConfigDict(extra="forbid")

    nodes: list[str]
    edges: list[tuple[str, str]]
    logits: list[FiniteNumber]
    features: int = Field(ge=0, strict=True)
    weights: list[list[FiniteNumber]]

    @model_validator(mode="after")
    def _shapes(self) -> EdgePolicyState:
        edges = len(self.edges)
        if len(set(self.edges)) != edges:
            raise ValueError("each edge may appear once")
        if strays := sorted({node for edge in self.edges for node in edge} - set(self.nodes)):
            raise ValueError(f"edges between nodes it does not list: {', '.join(strays)}")
        if len(self.logits) != edges:
            raise ValueError(f"{edges} edges need as many logits, got {len(self.logits)}")
        if len(self.weights) != edges or any(len(w) != self.features for w in self.weights):
            raise ValueError(f"weights must hold a row of {self.features} per edge ({edges})")
        return self


# -- choices --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChoiceStep:
    """One softmax draw: the slot, the chosen option, the probabilities then, the features."""

    slot: int
    chosen: int
    probs: tuple[float, ...]
    features: tuple[float, ...] = ()


class ChoicePolicy:
    """Softmax logits over ``options`` for each of ``slots``, optionally linear in ``features``
    cheap numbers describing the query (``logits[s] + weights[s] @ x``)."""

    def __init__(self, slots: Sequence[str], options: Sequence[str], features: int = 0) -> None:
        self.slots = [str(s) for s in slots]
        self.options = [str(o) for o in options]
        if not self.slots or not self.options:
            raise ValueError("a choice policy needs at least one slot and one option")
        self.logits = np.zeros((len(self.slots), len(self.options)))
        self.weights = np.zeros((len(self.slots), len(self.options), features))

    def slot(self, name: str | int) -> int:
        return name if isinstance(name, int) else self.slots.index(name)

    def probabilities(
        self,
        slot: str | int,
        features: Sequence[float] = (),
        available: Sequence[bool] | None = None,
    ) -> np.ndarray:
        """The option probabilities at ``slot`` (0 for options not ``available``)."""
        s = self.slot(slot)
        x = np.asarray(features, dtype=float)
        if x.shape != (self.weights.shape[2],):
            raise ValueError(f"expected {self.weights.shape[2]} features, got {x.size}")
        return softmax(self.logits[s] + self.weights[s] @ x, available)

    def sample(
        self,
        slot: str | int,
        rng: np.random.Generator | None,
        features: Sequence[float] = (),
        available: Sequence[bool] | None = None,
    ) -> ChoiceStep:
        """Draw an option with ``rng``, or take the likeliest (the first on a tie) without one."""
        probs = self.probabilities(slot, features, available)
        chosen = int(rng.choice(len(probs), p=probs)) if rng is not None else int(probs.argmax())
        return ChoiceStep(
            self.slot(slot), chosen, tuple(probs.tolist()), tuple(map(float, features))
        )

    def reinforce(self, steps: Sequence[ChoiceStep], advantage: float, lr: float) -> None:
        """``logits[s] += lr · A · (onehot(chosen) − p)``, and the weights by that times ``x``."""
        for step in steps:
            grad = -np.asarray(step.probs)
            grad[step.chosen] += 1
            self.logits[step.slot] += lr * advantage * grad
            if step.features:
                self.weights[step.slot] += lr * advantage * np.outer(grad, step.features)

    def state(self) -> ChoicePolicyState:
        """The policy as a learned state holds it."""
        return ChoicePolicyState(
            slots=list(self.slots),
            options=list(self.options),
            logits=self.logits.tolist(),
            weights=self.weights.tolist(),
        )

    @classmethod
    def from_state(cls, state: ChoicePolicyState) -> ChoicePolicy:
        """The policy a learned state holds (its shapes were checked by the state)."""
        policy = cls(state.slots, state.options, features=len(state.weights[0][0]))
        policy.logits = np.array(state.logits, dtype=float)
        policy.weights = np.array(state.weights, dtype=float)
        return policy


class ChoicePolicyState(BaseModel):
    """A :class:`ChoicePolicy` in a learned state: its slots and options, a finite logit per
    slot and option, and as many finite feature weights for each."""

    model_config = ConfigDict(extra="forbid")

    slots: list[str] = Field(min_length=1)
    options: list[str] = Field(min_length=1)
    logits: list[list[FiniteNumber]]
    weights: list[list[list[FiniteNumber]]]

    @model_validator(mode="after")
    def _shapes(self) -> ChoicePolicyState:
        slots, options = len(self.slots), len(self.options)
        if len(self.logits) != slots or any(len(row) != options for row in self.logits):
            raise ValueError(f"logits must hold a row of {options} (options) per slot ({slots})")
        features = {len(w) for row in self.weights for w in row}
        if (
            len(self.weights) != slots
            or any(len(row) != options for row in self.weights)
            or len(features) != 1
        ):
            raise ValueError(
                f"weights must hold {options} rows (options) of one length (features) per slot "
                f"({slots})"
            )
        return self
