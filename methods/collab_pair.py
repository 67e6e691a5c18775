"""Collaborative maze pair (and its solo baselines).

Davidson, Fourney, Amershi, West, Horvitz, Kamar. "The Collaboration Gap". arXiv:2511.02687.

Algorithm (``mode="pair"``; T = ``turn_cap``; agent_1 speaks first):

1. Each agent gets the relay system prompt and, as its first user turn, the game rules with its
   own partial map of the collab_maze task; it never sees the other map.
2. Turn t = 1..T: the speaker (agent 1 on odd turns, agent 2 on even ones) sends one message,
   which the other agent receives as "[other agent]: ..." in its next user turn.
3. A message proposes a move with a MOVE line ("MOVE: up"); the move is made when the other
   agent's very next message agrees with a MOVE line for the same move. The environment then
   moves the shared token and tells both agents ("[user]: ...") where it is. In a message with
   several MOVE lines, the first one agrees if it names the pending move, and the last one left
   is the message's proposal (so "MOVE: up" then "MOVE: left" makes up and proposes left);
   at most one move is made per turn.
4. The game ends when a made move reaches the goal or runs into a wall (or off the grid), when a
   message contains the completion phrase, or after T turns.
5. The answer is the route of made moves (``Route: up, right``, scored by the collab_maze
   evaluator); the dialogue is in ``Solution.metadata["transcript"]``.

Baselines: ``solo_full`` (one agent, ``task.prompt()``: rules and the full maze) and
``solo_distributed`` (one agent, both partial maps shown separately). The agent answers with a
route, then one critic step has it review and resubmit the route (the paper's extra step).

Model roles: ``agent`` (both agents, or the solo one); by name ``agent_1``, ``agent_2`` (pair)
or ``solo``, e.g. ``--model-role agent_1=openai:gpt-4o`` for a mixed pair.

LLM calls: pair <= T (default 50); solo 2. The paper's extra grader call belongs to the
evaluator here (0 calls, or 2 with a judge model).

Budget stop: pair, the route made so far (the game catches the stop and answers itself);
solo, the first route if the review was not reached.

Deviations: the paper imposes no protocol beyond the completion phrase and an LLM grader reads
the route from the dialogue afterwards; here moves are made live by an explicit MOVE-line
agreement, the position is announced after every move, and the game ends on its own when the
token reaches the goal or hits a wall, so the route is exact. The second speaker's first user
turn holds both the rules and the first message (no two user turns in a row). A solo reply with
no parseable route falls back to the first reply. Prompts are our own paraphrase; the
completion phrase is the paper's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from maslab.benchmarks.collab_maze import LEGEND, maze_of
from maslab.benchmarks.collab_maze_game import NAMES, MazeGame
from maslab.benchmarks.collab_maze_game import RELAY_SYSTEM as RELAY_SYSTEM  # was defined here
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.evaluators.collab_maze import parse_route

ROLE = "agent"  # the model role of every agent, in the pair and alone
SOLO = "solo"

SOLO_DISTRIBUTED = """Move the token from the start @ to the goal * in a {size}x{size} maze. You \
have two partial maps of the same maze: each hides some cells as '?', and every cell is visible \
on at least one of them. Each move goes one cell up, down, left or right; there are no diagonal \
moves, and a move into a wall or off the grid ends the game.

Map 1 (top row first):
{map1}

Map 2 (top row first):
{map2}

Legend: {legend}, ? = hidden on this map."""
CRITIC = (
    "Review your route step by step against the maze: no move may enter a wall or leave the "
    "grid, and the last move must land on the goal. Then give your corrected (or unchanged) "
    "route again."
)


async def solo(task: Task, ctx: Context, distributed: bool) -> Solution:
    """One agent answers with a route from the full maze (or both partial maps), then
    reviews and resubmits it once."""
    maze = maze_of(task)
    prompt = task.prompt()
    if distributed:
        map1, map2 = task.metadata["maps"]
        puzzle = SOLO_DISTRIBUTED.format(size=maze.size, map1=map1, map2=map2, legend=LEGEND)
        prompt = f"{puzzle}\n\n{task.instruction}"
    agent = ctx.agent(SOLO, role=ROLE)
    first = await agent.reply(prompt, round=1)
    ctx.propose(first.content)
    final = await agent.reply(f"{CRITIC}\n\n{task.instruction}", round=2, kind="critique")
    fallback = parse_route(final.content) is None and parse_route(first.content) is not None
    return Solution(
        answer=first.content if fallback else final.content,
        metadata={
            "mode": "solo_distributed" if distributed else "solo_full",
            "fallback_to_first": fallback,
        },
    )


@register_method("collab_pair")
class CollabPair(Method):
    """Two agents with partial maps of one maze agree on moves turn by turn (or a solo baseline)."""

    roles = (ROLE,)
    paper = 'Davidson et al., "The Collaboration Gap", arXiv 2511.02687'
    category = "relay inference / collaboration"
    calls = "≤ turn cap (50); solo baselines 2"

    class Config(MethodConfig):
        turn_cap: int = Field(50, ge=1)
        mode: Literal["pair", "solo_full", "solo_distributed"] = "pair"

    config: Config

    def agent_names(self) -> tuple[str, ...]:
        return NAMES if self.config.mode == "pair" else (SOLO,)

    def structure(self) -> Topology:
        """The pair reads each other; a solo agent reads no one."""
        names = list(self.agent_names())
        return Topology.complete(names) if self.config.mode == "pair" else Topology.chain(names)

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        ctx.topology = self.structure()
        if cfg.mode != "pair":
            return await solo(task, ctx, distributed=cfg.mode == "solo_distributed")
        game = MazeGame(task, ctx, (ROLE, ROLE))
        await game.play(until=cfg.turn_cap)
        return game.solution()
