"""The game of the collab_maze benchmark as two agents play it (collab_pair, relay).

Davidson, Fourney, Amershi, West, Horvitz, Kamar. "The Collaboration Gap". arXiv:2511.02687.

Two agents, each with its own partial map of the task's maze, take turns sending one message; a
move is made when the other agent's very next message agrees with the proposer's MOVE line, and
the environment announces where the shared token is. :class:`MazeGame` holds the agents, their
inboxes, the token and the route; methods decide who drives each side and for how long
(the rules, in full, are in :mod:`maslab.methods.collab_pair`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from maslab.benchmarks.collab_maze import LEGEND, Maze, format_route, maze_of
from maslab.core.agents import Agent
from maslab.core.context import Context
from maslab.core.roles import numbered
from maslab.core.task import Solution, Task
from maslab.errors import BudgetExceeded

COMPLETION_PHRASE = "ACTI!"
NAMES = numbered("agent", 2)  # the two sides, agent_1 speaking first

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
