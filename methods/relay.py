"""Relay inference on the collaborative maze.

Davidson, Fourney, Amershi, West, Horvitz, Kamar. "The Collaboration Gap". arXiv:2511.02687.

The collab_pair game (:class:`maslab.benchmarks.collab_maze_game.MazeGame`) with the model of
one side swapped after turn K, keeping that side's conversation history (K counts the messages
of both agents):

- ``strong_primer``: the swapped side is the strong model for turns 1..K, then the weak one
  (the paper's AB rollouts continued as BB);
- ``strong_recovery``: the swapped side is the weak model for turns 1..K, then the strong one
  (BB rollouts handed to A).

The other side is the weak model throughout. ``side=0`` swaps the first speaker, as in the
paper (A speaks first); the paper uses K in {2, 4, 6, 8}, and K=2 means the strong model sends
only the first message. The models are the model roles ``strong`` and ``weak`` (both the run's
model unless set, e.g. ``--model-role strong=openai:gpt-4o``); the agents are not addressed by
name, since a swapped side changes model mid-game.

LLM calls: <= turn_cap (default 50), as collab_pair; the evaluator's grading is separate.

Budget stop: the route made so far, as collab_pair (the game ends there and answers itself).

Deviations: those of collab_pair (live MOVE-line agreement, announced positions, the game ends
on the goal or a wall). The paper freezes the first K turns of earlier rollouts and continues
them; here the first K turns are generated in the same run, which gives the same distribution.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from maslab.benchmarks.collab_maze_game import NAMES, MazeGame
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology

STRONG, WEAK = "strong", "weak"


@register_method("relay")
class Relay(Method):
    """The collab_pair game with one side's model swapped after turn K, history kept."""

    roles = (STRONG, WEAK)
    paper = "Davidson et al., arXiv 2511.02687"
    category = "relay inference"
    calls = "≤ turn cap (50)"

    class Config(MethodConfig):
        variant: Literal["strong_primer", "strong_recovery"] = "strong_primer"
        swap_after: int = Field(2, ge=1)  # K
        side: Literal[0, 1] = 0
        turn_cap: int = Field(50, ge=1)

    config: Config

    def structure(self) -> Topology:
        """The two sides read each other."""
        return Topology.complete(NAMES)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        first, then = (STRONG, WEAK) if cfg.variant == "strong_primer" else (WEAK, STRONG)
        roles = [WEAK, WEAK]
        roles[cfg.side] = first
        game = MazeGame(task, ctx, roles)
        await game.play(until=min(cfg.swap_after, cfg.turn_cap))
        game.swap(cfg.side, then)
        await game.play(until=cfg.turn_cap)
        return game.solution(variant=cfg.variant, swap_after=cfg.swap_after, side=cfg.side)
