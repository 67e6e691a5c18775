"""GoAgent's learned selector: a per-domain policy over groups and edges (see
:mod:`maslab.kit.learning`), trained by REINFORCE."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from maslab.errors import ConfigError
from maslab.kit.learning import (
    ChoicePolicy,
    ChoicePolicyState,
    ChoiceStep,
    EdgePolicy,
    EdgePolicyState,
    EdgeStep,
)
from maslab.methods.goagent.pool import Group, groups_from
from maslab.methods.goagent.selection import Selection

SELECTOR_FORMAT = "goagent-selector/2"
END = "<end>"  # the option that stops adding groups
NEXT = "next"  # the policy's one slot: which group comes next

Step = ChoiceStep | EdgeStep


class GroupPolicyState(BaseModel):
    """The schema of :meth:`GroupPolicy.to_json` in a learned state."""

    model_config = ConfigDict(extra="forbid")

    pool: list[Group] = Field(min_length=1)
    choices: ChoicePolicyState
    edges: EdgePolicyState


@dataclass
class GroupPolicy:
    """The learned selector of one domain: a softmax over its pool's groups and END (one slot,
    the unchosen groups available) and a Bernoulli per ordered pair of groups (the edge)."""

    pool: list[Group]
    choices: ChoicePolicy
    edges: EdgePolicy

    @classmethod
    def new(cls, pool: list[Group]) -> GroupPolicy:
        names = [g.name for g in pool]
        return cls(
            pool, ChoicePolicy([NEXT], [*names, END]), EdgePolicy(list(permutations(names, 2)))
        )

    def decode(
        self, max_groups: int, rng: np.random.Generator | None = None
    ) -> tuple[Selection, list[Step]]:
        """Sample a selection with ``rng``, or take the likeliest choices without one."""
        names = [g.name for g in self.pool]
        chosen: list[str] = []
        edges: list[tuple[str, str]] = []
        trace: list[Step] = []
        while len(chosen) < min(max_groups, len(names)):
            available = [name not in chosen for name in names] + [bool(chosen)]
            step = self.choices.sample(NEXT, rng, available=available)
            trace.append(step)
            if step.chosen == len(names):  # END
                break
            new = names[step.chosen]
            draws = self.edges.sample(rng, [(prev, new) for prev in chosen])
            trace += draws
            incoming = [draw.edge for draw in draws if draw.taken]
            if chosen and not incoming:  # keep the graph connected: the likeliest edge
                incoming.append(max(((c, new) for c in chosen), key=self.edges.probability))
            edges += incoming
            chosen.append(new)
        return Selection(tuple(chosen), tuple(edges)), trace

    def reinforce(self, trace: list[Step], advantage: float, lr: float) -> None:
        """One REINFORCE step: logits += lr · advantage · ∇ log π(trace)."""
        self.choices.reinforce([s for s in trace if isinstance(s, ChoiceStep)], advantage, lr)
        self.edges.reinforce([s for s in trace if isinstance(s, EdgeStep)], advantage, lr)

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": [g.model_dump(mode="json") for g in self.pool],
            "choices": self.choices.to_json(),
            "edges": self.edges.to_json(),
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> GroupPolicy:
        try:
            pool = groups_from(data["pool"], where)
            policy = cls(
                pool,
                ChoicePolicy.from_json(data["choices"], where),
                EdgePolicy.from_json(data["edges"], where),
            )
        except (KeyError, TypeError) as exc:
            raise ConfigError(f"{where}: malformed learned selector ({exc!r})") from None
        if policy.choices.options != [*(g.name for g in pool), END]:
            raise ConfigError(f"{where}: the learned selector's options are not its pool's groups")
        return policy
