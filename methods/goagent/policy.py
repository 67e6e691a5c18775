"""GoAgent's learned selector: a per-domain policy over groups and edges (see
:mod:`maslab.kit.learning`), trained by REINFORCE."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Final

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from maslab.kit.learning import (
    ChoicePolicy,
    ChoicePolicyState,
    ChoiceStep,
    EdgePolicy,
    EdgePolicyState,
    EdgeStep,
)
from maslab.methods.goagent.pool import Group
from maslab.methods.goagent.selection import Selection

SELECTOR_FORMAT: Final = "goagent-selector/2"
END = "<end>"  # the option that stops adding groups
NEXT = "next"  # the policy's one slot: which group comes next

Step = ChoiceStep | EdgeStep


class GroupPolicyState(BaseModel):
    """A :class:`GroupPolicy` in a learned state: its pool and its policies over that pool
    (the options: its groups, then END; the edges: every ordered pair of its groups)."""

    model_config = ConfigDict(extra="forbid")

    pool: list[Group] = Field(min_length=1)
    choices: ChoicePolicyState
    edges: EdgePolicyState

    @model_validator(mode="after")
    def _over_its_pool(self) -> GroupPolicyState:
        names = [g.name for g in self.pool]
        if self.choices.slots != [NEXT] or self.choices.options != [*names, END]:
            raise ValueError("its choices are not over its pool's groups")
        if set(self.edges.edges) != set(permutations(names, 2)):
            raise ValueError("its edges are not the pairs of its pool's groups")
        return self


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

    def state(self) -> GroupPolicyState:
        """The policy as a learned state holds it."""
        return GroupPolicyState(
            pool=list(self.pool), choices=self.choices.state(), edges=self.edges.state()
        )

    @classmethod
    def from_state(cls, state: GroupPolicyState) -> GroupPolicy:
        """The policy a learned state holds (checked by the state)."""
        return cls(
            list(state.pool),
            ChoicePolicy.from_state(state.choices),
            EdgePolicy.from_state(state.edges),
        )
