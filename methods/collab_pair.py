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

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from maslab.benchmarks.collab_maze import LEGEND, Maze, format_route, maze_of
from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.core.topology import Topology
from maslab.errors import BudgetExceeded
from maslab.evaluators.collab_maze import parse_route

COMPLETION_PHRASE = "ACTI!"
ROLE = "agent"  # the model role of every agent, in the pair and alone
NAMES = numbered(ROLE, 2)
SOLO = "solo"

RELAY_SYSTEM = (
    "You are talking with another AI agent. A user passes the messages between the two of you "
    "along without changing them: the other agent's messages start with '[other agent]:', the "
    "user's with '[user]:'. Do not start your own messages with such a tag."
)
GAME = """[user]: Let's play a timed cooperative maze game; teams are ranked by speed. You and \
another agent each hold a map of the same {size}x{size} maze, but each map hides different cells \
as '?', so you need to talk to each other. Together you move one shared token from its start to \
the goal.
- A move goes one cell up, down, left or right: no diagonal moves, no moving into a wall or off \
the map. Moving into a wall ends the game.
- Send one message per turn; at most one move is made per turn.
- To propose a move, write a line MOVE: <up, down, left or right>. The move is made as soon as \
the other agent agrees by writing the same MOVE line in its very next message. After each move \
I tell you both where the token is.
- Say "{phrase}" once the token is on the goal.

Your map (top row first; rows and columns count from 1 at the top left):
{map}

Legend: {legend}, ? = hidden from you."""
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

_MOVE_LINE = re.compile(r"\bMOVE\s*:[\s*_]*(up|down|left|right)\b", re.IGNORECASE)


def move_lines(text: str) -> list[str]:
    """The moves of a message's MOVE lines, in order."""
    return [move.lower() for move in _MOVE_LINE.findall(text)]


class MazeGame:
    """The pair game: two agents with own histories and inboxes, the token, the made route."""

    def __init__(self, task: Task, ctx: Context, roles: Sequence[str]) -> None:
        """``roles``: the model role of each side's agent."""
        self.maze: Maze = maze_of(task)
        self.ctx = ctx
        ctx.topology = Topology.complete(list(NAMES))
        self.agents = [
            ctx.agent(name, system=RELAY_SYSTEM, role=role)
            for name, role in zip(NAMES, roles, strict=True)
        ]
        self.inbox = [
            [GAME.format(size=self.maze.size, phrase=COMPLETION_PHRASE, map=m, legend=LEGEND)]
            for m in task.metadata["maps"]
        ]
        self.position = self.maze.start
        self.route: list[str] = []
        self.turn = 0
        self.ended: str | None = None
        self.pending: tuple[int, str] | None = None  # (side, move) awaiting the other's consent
        self.speakers: list[str] = []  # model name per turn

    def swap(self, side: int, role: str) -> None:
        """Let the model of another role drive ``side`` from the next turn on, keeping its
        history."""
        old = self.agents[side]
        new = self.ctx.agent(old.name, role=role)
        new.history = old.history
        self.agents[side] = new

    async def play(self, until: int) -> None:
        """Play turns until the game ends or ``until`` turns have been played in all.

        A budget stop ends the game (the context records it); the route so far stands.
        """
        try:
            while self.ended is None and self.turn < until:
                await self._turn()
        except BudgetExceeded:
            self.ended = "budget"

    async def _turn(self) -> None:
        side = self.turn % 2
        agent: Agent = self.agents[side]
        prompt = "\n\n".join(self.inbox[side])
        message = await agent.reply(prompt, round=self.turn + 1, recipients=(NAMES[1 - side],))
        self.turn += 1  # only a turn whose message was sent counts
        self.inbox[side] = []
        self.speakers.append(agent.model.name)
        self.inbox[1 - side].append(f"[other agent]: {message.content}")
        moves = move_lines(message.content)
        if moves and self.pending == (1 - side, moves[0]):  # consent, maybe then a proposal
            self._make(moves.pop(0))
        self.pending = (side, moves[-1]) if moves else None
        if self.ended is None and COMPLETION_PHRASE in message.content:
            self.ended = "phrase"

    def _make(self, move: str) -> None:
        """Both agents agreed on ``move``: the environment makes it and announces the result."""
        self.route.append(move)
        target = self.maze.step(self.position, move)
        if target is None:
            self.ended = "wall"
            event = f"Both agreed on {move}, but that runs into a wall: the game is over."
        else:
            self.position = target
            row, column = target
            event = (
                f"Both agreed on {move}: the token is now at row {row + 1}, column {column + 1}."
            )
            if target == self.maze.goal:
                self.ended = "goal"
                event += " It is on the goal: you won."
        self.ctx.post(
            "environment",
            event,
            round=self.turn,
            kind="environment",
            metadata={"move": move, "position": list(self.position)},
        )
        for box in self.inbox:
            box.append(f"[user]: {event}")

    def solution(self, **metadata: object) -> Solution:
        return Solution(
            answer=format_route(self.route),
            metadata={
                "mode": "pair",
                "ended": self.ended or "turn_cap",
                "turns": self.turn,
                "route": self.route,
                "position": list(self.position),
                "speakers": self.speakers,
                "transcript": [f"{m.sender}: {m.content}" for m in self.ctx.transcript],
                **metadata,
            },
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
    ctx.topology = Topology.chain([SOLO])
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

    async def solve(self, task: Task, ctx: Context) -> Solution:
        cfg = self.config
        if cfg.mode != "pair":
            return await solo(task, ctx, distributed=cfg.mode == "solo_distributed")
        game = MazeGame(task, ctx, (ROLE, ROLE))
        await game.play(until=cfg.turn_cap)
        return game.solution()
