"""Collab maze: the collaborative maze benchmark of "The Collaboration Gap".

Davidson, Fourney, Amershi, West, Horvitz, Kamar. "The Collaboration Gap". arXiv:2511.02687.

Each task is a seeded N x N maze (default 6 x 6, 30% walls, shortest start-to-goal path of 7 to 9
steps), drawn from its own generator (``seed``, split, options and index) and redrawn until the
path-length bounds hold, so a split is identical on every machine and every maze is solvable.
The maze is split into two partial maps as in the paper: the cells other than start and goal are
shuffled and dealt alternately, each hidden (``?``) on one map and shown on the other, so every
cell (every wall too) is visible on exactly one map and the union of the maps is the full maze;
start and goal are visible on both.

``Task.question`` is the single-agent view (rules and the full maze, the paper's solo-full
setting), so any method can be run on it; ``Task.metadata`` holds what the collaborative methods
need: ``grid`` (compact rows), ``maps`` (the two partial maps as text), ``start`` and ``goal``
([row, column], 0-based from the top left) and ``shortest_path``. The gold is one shortest route.
Symbols: ``@`` start (the token), ``*`` goal, ``.`` open, ``#`` wall, ``?`` hidden.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from pydantic import Field, StrictFloat, StrictInt, model_validator

from maslab.bench.benchmark import Benchmark, register_benchmark
from maslab.core.context import derive_seed
from maslab.core.task import Task
from maslab.errors import ConfigError
from maslab.plugin_config import PluginConfig

Cell = tuple[int, int]

MOVES: dict[str, Cell] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
START, GOAL, OPEN, WALL, HIDDEN = "@", "*", ".", "#", "?"
LEGEND = "@ = start (the token), * = goal, . = open cell, # = wall"
ROUTE_INSTRUCTION = (
    "Give your final answer as the list of moves on one line, in the form "
    "Route: up, right, down, ..."
)
_MAX_ATTEMPTS = 2000


def format_route(moves: Sequence[str]) -> str:
    """The answer form every method gives: ``Route: up, right`` (``Route: none`` if empty)."""
    return f"Route: {', '.join(moves) or 'none'}"


@dataclass(frozen=True)
class Walk:
    """Where a route ends on the full maze: it stops at a wall, off the grid, or on the goal."""

    end: Cell
    steps: int  # moves made (a move into a wall is not made)
    wall_hit: bool
    reached: bool


@dataclass(frozen=True)
class Maze:
    """A size x size grid with walls, a start and a goal; cells are (row, column) from 0, 0 at
    the top left."""

    size: int
    walls: frozenset[Cell]
    start: Cell
    goal: Cell

    def is_open(self, cell: Cell) -> bool:
        r, c = cell
        return 0 <= r < self.size and 0 <= c < self.size and cell not in self.walls

    def step(self, cell: Cell, move: str) -> Cell | None:
        """The cell one ``move`` away, or None for a wall or the edge of the grid."""
        dr, dc = MOVES[move]
        target = (cell[0] + dr, cell[1] + dc)
        return target if self.is_open(target) else None

    def distances(self, source: Cell) -> dict[Cell, int]:
        """BFS step counts from ``source`` to every reachable open cell."""
        seen = {source: 0}
        queue = deque([source])
        while queue:
            cell = queue.popleft()
            for move in MOVES:
                nxt = self.step(cell, move)
                if nxt is not None and nxt not in seen:
                    seen[nxt] = seen[cell] + 1
                    queue.append(nxt)
        return seen

    def shortest_route(self) -> list[str]:
        """One shortest route from start to goal (down the distance-to-goal gradient)."""
        to_goal = self.distances(self.goal)
        route, cell = [], self.start
        while cell != self.goal:
            move, cell = next(
                (m, n)
                for m in MOVES
                if (n := self.step(cell, m)) is not None and to_goal.get(n) == to_goal[cell] - 1
            )
            route.append(move)
        return route

    def walk(self, moves: Iterable[str]) -> Walk:
        """Play ``moves`` from the start; a move into a wall or off the grid stops the walk."""
        cell, steps = self.start, 0
        for move in moves:
            if cell == self.goal:
                break
            nxt = self.step(cell, move)
            if nxt is None:
                return Walk(cell, steps, wall_hit=True, reached=False)
            cell, steps = nxt, steps + 1
        return Walk(cell, steps, wall_hit=False, reached=cell == self.goal)

    def render(self, hidden: Iterable[Cell] = ()) -> str:
        """Rows of space-separated symbols, top row first; ``hidden`` cells show ``?``."""
        hide = set(hidden)
        return "\n".join(
            " ".join(self._symbol((r, c), hide) for c in range(self.size)) for r in range(self.size)
        )

    def _symbol(self, cell: Cell, hidden: set[Cell]) -> str:
        if cell == self.start:
            return START
        if cell == self.goal:
            return GOAL
        if cell in hidden:
            return HIDDEN
        return WALL if cell in self.walls else OPEN

    def rows(self) -> list[str]:
        """The full maze as compact rows (``metadata["grid"]``)."""
        return [row.replace(" ", "") for row in self.render().splitlines()]

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Maze:
        """The maze of a record or of ``Task.metadata``; ConfigError if it is not a maze."""
        try:
            rows = [str(row) for row in record["grid"]]
            start, goal = _cell(record["start"]), _cell(record["goal"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"not a collab_maze record: missing or bad {exc}") from None
        walls = frozenset(
            (r, c) for r, row in enumerate(rows) for c, s in enumerate(row) if s == WALL
        )
        maze = cls(len(rows), walls, start, goal)
        if any(len(row) != maze.size for row in rows) or not (
            maze.is_open(start) and start != goal and goal in maze.distances(start)
        ):
            raise ConfigError(
                "not a collab_maze record: the grid is not square, or start and goal are not "
                "two cells joined by a path"
            )
        return maze


def _cell(value: Any) -> Cell:
    row, column = value
    return int(row), int(column)


def maze_of(task: Task) -> Maze:
    """The maze behind a collab_maze task (ConfigError for any other task)."""
    if "maps" not in task.metadata:
        raise ConfigError(f"task {task.id} is not a collab_maze task (no partial maps)")
    return Maze.from_record(task.metadata)


def generate(
    index: int,
    split: str,
    *,
    size: int = 6,
    wall_rate: float = 0.3,
    min_path: int = 7,
    max_path: int = 9,
    seed: int = 0,
) -> dict[str, Any]:
    """Maze ``index`` of ``split`` as a raw record, redrawn until the path bounds hold."""
    rng = random.Random(
        derive_seed("collab_maze", seed, split, size, wall_rate, min_path, max_path, index)
    )
    cells = [(r, c) for r in range(size) for c in range(size)]
    wall_count = min(round(wall_rate * size * size), size * size - 2)
    for _ in range(_MAX_ATTEMPTS):
        walls = frozenset(rng.sample(cells, wall_count))
        start = rng.choice([cell for cell in cells if cell not in walls])
        reach = Maze(size, walls, start, start).distances(start)
        goals = [cell for cell, d in reach.items() if min_path <= d <= max_path]
        if goals:
            break
    else:
        raise ConfigError(
            f"collab_maze: no {size}x{size} maze with wall_rate {wall_rate} and a shortest path "
            f"of {min_path} to {max_path} steps in {_MAX_ATTEMPTS} draws; relax the options"
        )
    maze = Maze(size, walls, start, rng.choice(sorted(goals)))
    rest = [cell for cell in cells if cell not in (maze.start, maze.goal)]
    rng.shuffle(rest)
    return {
        "id": f"collab_maze-{split}-{index:04d}",
        "grid": maze.rows(),
        "maps": [maze.render(hidden=rest[0::2]), maze.render(hidden=rest[1::2])],
        "start": list(maze.start),
        "goal": list(maze.goal),
        "shortest_path": reach[maze.goal],
    }


def question(maze: Maze) -> str:
    """The single-agent puzzle: rules and the full maze."""
    return (
        f"Move the token from the start {START} to the goal {GOAL} in this {maze.size}x{maze.size} "
        "maze. Each move goes one cell up, down, left or right; there are no diagonal moves, and "
        "a move into a wall or off the grid ends the game.\n\n"
        f"Maze (top row first):\n{maze.render()}\n\nLegend: {LEGEND}."
    )


@register_benchmark("collab_maze")
class CollabMaze(Benchmark):
    """Seeded collaborative mazes split into two partial maps (generated, no data needed)."""

    domain = "reasoning"
    answer_type = "text"
    evaluator = "collab_maze"
    instruction = ROUTE_INSTRUCTION
    splits = ("test", "dev")
    fields = ("grid", "maps", "start", "goal")
    id_field = "id"

    class Config(PluginConfig):
        size: StrictInt = Field(6, ge=2, le=30, description="the maze is size x size cells")
        wall_rate: StrictFloat = Field(0.3, ge=0, le=0.9, description="the share of walls")
        min_path: StrictInt = Field(7, ge=1, description="the shortest path's fewest steps")
        max_path: StrictInt = Field(9, ge=1, description="the shortest path's most steps")
        count: StrictInt = Field(100, ge=1, le=100_000, description="mazes per split")
        seed: StrictInt = Field(
            0, ge=0, le=2**63 - 1, description="draws the mazes (not the run seed)"
        )

        @model_validator(mode="after")
        def _path_bounds(self) -> Self:
            cells = self.size * self.size
            if not self.min_path <= self.max_path < cells:
                raise ValueError(
                    f"min_path {self.min_path} and max_path {self.max_path} must be in order and "
                    f"below {cells}, the cells of a {self.size}x{self.size} maze"
                )
            return self

    config: Config

    def packaged_records(self, split: str) -> list[dict[str, Any]] | None:
        if split not in self.splits:
            return None
        shape = {k: v for k, v in self.options.items() if k != "count"}
        return [generate(i, split, **shape) for i in range(self.config.count)]

    def packaged_source(self, split: str) -> str:
        options = ", ".join(f"{key} {value}" for key, value in self.options.items())
        return f"generated collab_maze {split} split ({options})"

    def to_task(self, record: dict[str, Any], index: int, split: str) -> Task:
        maze = Maze.from_record(record)
        maps = record["maps"]
        if not (
            isinstance(maps, list) and len(maps) == 2 and all(isinstance(m, str) for m in maps)
        ):
            raise ConfigError(f"collab_maze record {index}: 'maps' must be a list of two texts")
        route = maze.shortest_route()
        metadata = {
            "size": maze.size,
            "grid": maze.rows(),
            "maps": maps,
            "start": list(maze.start),
            "goal": list(maze.goal),
            "shortest_path": len(route),
        }
        return self.task(
            self.task_id(record, index, split),
            question(maze),
            format_route(route),
            metadata=metadata,
        )
