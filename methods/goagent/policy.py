"""GoAgent's learned selector: a per-domain policy over groups and edges, trained by REINFORCE."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from maslab.errors import ConfigError
from maslab.methods.goagent.pool import Group, groups_from
from maslab.methods.goagent.selection import Selection

SELECTOR_FORMAT = "goagent-selector/1"


def sigmoid(x: float) -> float:
    return 0.5 * (1 + math.tanh(x / 2))  # no overflow for large |x|


def softmax(xs: Sequence[float]) -> list[float]:
    top = max(xs)
    exps = [math.exp(x - top) for x in xs]
    return [e / sum(exps) for e in exps]


@dataclass(frozen=True)
class GroupStep:
    options: tuple[str | None, ...]  # None is END
    probs: tuple[float, ...]
    chosen: int


@dataclass(frozen=True)
class EdgeStep:
    key: str
    prob: float
    taken: bool


@dataclass
class GroupPolicy:
    """The learned selector of one domain: group, END and edge logits over its pool."""

    pool: list[Group]
    group_logits: dict[str, float] = field(default_factory=dict)
    end_logit: float = 0.0
    edge_logits: dict[str, float] = field(default_factory=dict)  # "a->b"

    def decode(
        self, max_groups: int, rng: random.Random | None = None
    ) -> tuple[Selection, list[GroupStep | EdgeStep]]:
        """Sample a selection with ``rng``, or take the likeliest choices without one."""
        names = [g.name for g in self.pool]
        chosen: list[str] = []
        edges: list[tuple[str, str]] = []
        trace: list[GroupStep | EdgeStep] = []
        while len(chosen) < min(max_groups, len(names)):
            options = [n for n in names if n not in chosen] + ([None] if chosen else [])
            logits = [
                self.end_logit if o is None else self.group_logits.get(o, 0.0) for o in options
            ]
            probs = softmax(logits)
            k = (
                rng.choices(range(len(options)), weights=probs)[0]
                if rng
                else probs.index(max(probs))
            )
            trace.append(GroupStep(tuple(options), tuple(probs), k))
            new = options[k]
            if new is None:
                break
            incoming = []
            for prev in chosen:
                key = f"{prev}->{new}"
                prob = sigmoid(self.edge_logits.get(key, 0.0))
                taken = rng.random() < prob if rng else prob > 0.5
                trace.append(EdgeStep(key, prob, taken))
                if taken:
                    incoming.append((prev, new))
            if chosen and not incoming:  # keep the graph connected: the likeliest edge
                prev = max(chosen, key=lambda c: self.edge_logits.get(f"{c}->{new}", 0.0))
                incoming.append((prev, new))
            edges += incoming
            chosen.append(new)
        return Selection(tuple(chosen), tuple(edges)), trace

    def reinforce(self, trace: Sequence[GroupStep | EdgeStep], advantage: float, lr: float) -> None:
        """One REINFORCE step: logits += lr · advantage · ∇ log π(trace)."""
        for step in trace:
            if isinstance(step, EdgeStep):
                grad = float(step.taken) - step.prob
                self.edge_logits[step.key] = (
                    self.edge_logits.get(step.key, 0.0) + lr * advantage * grad
                )
                continue
            for i, (option, prob) in enumerate(zip(step.options, step.probs, strict=True)):
                delta = lr * advantage * (float(i == step.chosen) - prob)
                if option is None:
                    self.end_logit += delta
                else:
                    self.group_logits[option] = self.group_logits.get(option, 0.0) + delta

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": [g.model_dump(mode="json") for g in self.pool],
            "group_logits": self.group_logits,
            "end_logit": self.end_logit,
            "edge_logits": self.edge_logits,
        }

    @classmethod
    def from_json(cls, data: Any, path: str) -> GroupPolicy:
        try:
            return cls(
                pool=groups_from(data["pool"], path),
                group_logits={str(k): float(v) for k, v in data["group_logits"].items()},
                end_logit=float(data["end_logit"]),
                edge_logits={str(k): float(v) for k, v in data["edge_logits"].items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{path}: malformed learned selector ({exc!r})") from None
