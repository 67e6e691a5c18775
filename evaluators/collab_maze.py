"""``collab_maze``: simulate the route an answer commits to on the full maze and score it.

The route is read from the answer (a final route, or a transcript ending with the executed
route) by a deterministic parser, or, when the evaluator is given a ``judge`` model, by a
two-step LLM extractor at temperature 0 (quote the route, then rewrite it as single moves).
The walk starts on ``@`` and stops at the first move into a wall or off the grid ("wall hit")
or on the goal. With a = shortest path length from start to goal and b = shortest distance
from where the walk stopped to the goal, the paper's weighted outcome is (a - b) / a: 1 at the
goal, 0 for no progress, negative for a walk that ends farther away than it started.

Score: ``correct`` = the walk reached the goal (the paper's binary success); ``value`` = the
weighted outcome clamped to [0, 1], the harness's score range. The raw, possibly negative
outcome is ``details["outcome"]`` (and in the explanation, "outcome -0.286 ..."). A reply with
no route is unparsed.

Deviation from the paper: its grader (gpt-4.1) writes the route as coordinates under a schema
and scores the most favourable reading over all plausible coordinate schemes; here routes are
moves, read once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from pydantic import Field

from maslab.bench.evaluation import Evaluator, Judge, Score, model_spec, register_evaluator
from maslab.benchmarks.collab_maze import Maze, Walk, maze_of
from maslab.core.context import Context
from maslab.core.task import Task
from maslab.llm import ChatModel, ModelPool
from maslab.plugin_config import PluginConfig, Settings

NO_ROUTE = "NO_ROUTE"

_WORDS = {
    **{move: move for move in ("up", "down", "left", "right")},
    **{"north": "up", "south": "down", "west": "left", "east": "right"},
    **{"↑": "up", "↓": "down", "←": "left", "→": "right"},
}
_FILLERS = {"then", "and"}  # may stand between two moves of one route
_REPEATS = {"once": 1, "twice": 2, "thrice": 3}
_NUMBER_WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
_NUMBERS = {word: n for n, word in enumerate(_NUMBER_WORDS, 1)}
_UNITS = {"time", "times", "step", "steps", "cell", "cells", "square", "squares"}  # after a count
_MAX_COUNT = 100  # a move repeated more often is not a route
# A count binds to the move before it ("down x2", "down (2)", "down twice"), to the move after it
# ("2x down"), or to either ("down 2", "2 down"); "2." and "2)" may number a list instead.
_TOKEN = re.compile(
    r"[xX×]\s*(?P<after>\d+)(?!\d)|\(\s*[xX×]?\s*(?P<paren>\d+)\s*\)"
    r"|(?P<before>\d+)\s*[xX×](?![A-Za-z\d])|(?P<number>\d+)(?P<listed>[.)](?!\d))?"
    r"|(?P<word>[A-Za-z]+|[↑↓←→])"
)
_SEPARATOR = re.compile(r"[,;:.()\[\]\n–—]")  # a count does not bind across one
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MARKER = re.compile(r"\b(?:route|moves|path|answer)\b(?:\s+is)?[\s*_]*[:=]", re.IGNORECASE)
_NONE = re.compile(r"\W*(?:none|no moves|empty)?\W*", re.IGNORECASE)

_EXTRACT_SYSTEM = (
    "You read an answer to a maze puzzle, or the transcript of two agents moving a token "
    "through a maze together, and report the route it commits to. You do not solve the maze."
)
_EXTRACT_USER = """Response:
{response}

Which route does the response commit to? For a transcript, that is the moves the agents agreed \
on and made, in order. Reply with the route only, as the response states it. If the response \
commits to no route, reply {no_route}."""
_REWRITE_SYSTEM = "You rewrite a route through a grid as a list of single-cell moves."
_REWRITE_USER = """The grid has {size} rows and {size} columns; the route starts at row {row}, \
column {column} (counting from 1 at the top left).

Route: {route}

Rewrite the route as a comma-separated list of single-cell moves, each one of up, down, left, \
right (a move taken k times is written k times; a list of cells becomes the moves between them). \
Reply with the list only."""


class _Item(NamedTuple):
    kind: Literal["move", "count", "sep"]
    value: str = ""  # the move, or how a count binds: after, before, either or listed
    n: int = 0


_SEP = _Item("sep")


def _runs(text: str) -> list[list[_Item]]:
    """Maximal sequences of moves and their counts, separated only by punctuation, list numbers
    or fillers."""
    runs: list[list[_Item]] = [[]]
    end = 0
    for token in _TOKEN.finditer(text):
        run = runs[-1]
        if run and _SEPARATOR.search(text, end, token.start()):
            run.append(_SEP)
        end = token.end()
        word = (token["word"] or "").lower()
        if word in _WORDS:
            run.append(_Item("move", _WORDS[word]))
        elif word in _REPEATS:
            run.append(_Item("count", "after", _REPEATS[word]))
        elif token["after"] or token["paren"]:
            run.append(_Item("count", "after", int(token["after"] or token["paren"])))
        elif token["before"]:
            run.append(_Item("count", "before", int(token["before"])))
        elif token["listed"]:
            run += [_Item("count", "listed", int(token["number"])), _SEP]
        elif token["number"] or word in _NUMBERS:
            run.append(_Item("count", "either", _NUMBERS.get(word) or int(token["number"])))
        elif word in _FILLERS:
            run.append(_SEP)
        elif word in _UNITS and run and run[-1].kind == "count":
            continue
        elif any(item.kind == "move" for item in run):
            runs.append([])
        else:
            run.clear()  # numbers before a word that is no move belong to no route
    return [run for run in runs if any(item.kind == "move" for item in run)]


def _binds(run: list[_Item], i: int, side: int) -> bool:
    """Whether the count ``run[i]`` can repeat the move on ``side`` (-1 before it, 1 after)."""
    j = i + side
    way = {-1: "after", 1: "before"}[side]
    return 0 <= j < len(run) and run[j].kind == "move" and run[i].value in (way, "either", "listed")


def _moves(run: list[_Item]) -> list[str] | None:
    """The run as single moves, counts applied; None when a count is unclear.

    A count that could repeat the move on either side takes the side the run's other counts
    take ("down 2 right 3", "2 down 3 right"). Numbers that open the run with "1." number a list.
    """
    if run[0].value == "listed":
        run = [item for item in run if item.value != "listed"]
    times: dict[int, int] = {}
    unclear: list[int] = []
    sides: set[int] = set()
    for i, item in enumerate(run):
        if item.kind != "count":
            continue
        ways = [side for side in (-1, 1) if _binds(run, i, side)]
        if len(ways) == 2:
            unclear.append(i)
        elif ways:
            sides.add(ways[0])
            times[i] = ways[0]
        elif item.value in ("after", "before"):  # "x2" next to no move
            return None
    if unclear:
        if len(sides) != 1:
            return None
        times |= dict.fromkeys(unclear, sides.pop())
    counts = {i + side: run[i].n for i, side in times.items()}
    if len(counts) < len(times) or not all(1 <= n <= _MAX_COUNT for n in counts.values()):
        return None  # two counts for one move, or an absurd count
    return [
        item.value
        for j, item in enumerate(run)
        if item.kind == "move"
        for _ in range(counts.get(j, 1))
    ]


def parse_route(text: str) -> list[str] | None:
    """The moves an answer commits to, or None if it names no route.

    Looks, in order, at the last ``\\boxed{...}``, the text after the last ``Route:`` (or
    ``Moves:``, ``Path:``, ``Answer:``) marker, then the whole text; the first run of move words
    after a marker counts, else the last one. ``Route: none`` is the empty route. A move may
    carry a count ("down 2", "down x2", "2 down", "down ×2", "down twice", "2 steps down"); a
    route whose counts are unclear ("up 2 down") is None, as is one with a count above 100.
    """
    boxed = _BOXED.findall(text)
    markers = list(_MARKER.finditer(text))
    if boxed or markers:
        region = boxed[-1] if boxed else text[markers[-1].end() :]
        runs = _runs(region)
        if runs:
            return _moves(runs[0])
        if _NONE.fullmatch(region.split("\n", 1)[0]):
            return []
    runs = _runs(text)
    return _moves(runs[-1]) if runs else None


@dataclass(frozen=True)
class Outcome:
    walk: Walk
    shortest: int  # a
    remaining: int  # b

    @property
    def value(self) -> float:
        """The weighted outcome (a - b) / a."""
        return (self.shortest - self.remaining) / self.shortest


def outcome(maze: Maze, moves: list[str]) -> Outcome:
    """Walk ``moves`` on ``maze`` and measure the progress made."""
    walk = maze.walk(moves)
    to_goal = maze.distances(maze.goal)
    return Outcome(walk, to_goal[maze.start], to_goal[walk.end])


def _explain(result: Outcome, moves: list[str]) -> str:
    walk = result.walk
    made = f"{walk.steps} move{'' if walk.steps == 1 else 's'}"
    if walk.reached:
        how = f"reached the goal in {made}"
    elif walk.wall_hit:
        how = f"wall hit at move {walk.steps + 1} ({moves[walk.steps]})"
    else:
        how = f"stopped after {made}"
    return (
        f"outcome {result.value:+.3f} (a={result.shortest}, b={result.remaining}); {how}; "
        f"ended at row {walk.end[0] + 1}, column {walk.end[1] + 1}"
    )


@register_evaluator("collab_maze")
class CollabMazeEvaluator(Evaluator):
    """Simulates the answer's route on the full maze: weighted outcome, success = reached goal."""

    class Config(PluginConfig):
        judge: str | None = Field(
            None,
            description="a judge model that reads the route from the answer; None parses it",
        )

    config: Config

    def __init__(
        self,
        config: Settings = None,
        *,
        judge: str | ChatModel | None = None,
        models: ModelPool | None = None,
        **options: Any,
    ) -> None:
        """Args:
        config: Options as a mapping or a ``Config``.
        judge: The judge: a spec (the ``judge`` option) or a model handle (its name recorded).
        models: The run's model pool the spec is loaded from (the runner gives it).
        **options: Options as keywords.
        """
        if judge is not None:
            options["judge"] = model_spec(judge)
        super().__init__(config, **options)
        judge = judge if judge is not None else self.config.judge
        self.judge = Judge(judge, models) if judge is not None else None

    async def score(self, task: Task, answer: str, *, ctx: Context | None = None) -> Score:
        maze = maze_of(task)
        moves = (
            parse_route(answer) if self.judge is None else await self._extract(maze, answer, ctx)
        )
        if moves is None:
            return Score.unparsable("no route found")
        result = outcome(maze, moves)
        return Score(
            value=min(1.0, max(0.0, result.value)),
            correct=result.walk.reached,
            extracted=", ".join(moves),
            explanation=_explain(result, moves),
            details={"outcome": result.value},
        )

    async def _extract(self, maze: Maze, answer: str, ctx: Context | None) -> list[str] | None:
        """Two judge calls: quote the committed route, then rewrite it as single moves."""
        judge = self.judge
        assert judge is not None
        quoted = (
            await judge.ask(
                _EXTRACT_SYSTEM, _EXTRACT_USER.format(response=answer, no_route=NO_ROUTE), ctx
            )
        ).strip()
        if not quoted or NO_ROUTE in quoted.upper():
            return None
        row, column = maze.start
        rewritten = await judge.ask(
            _REWRITE_SYSTEM,
            _REWRITE_USER.format(size=maze.size, row=row + 1, column=column + 1, route=quoted),
            ctx,
        )
        return parse_route(rewritten)

    async def aclose(self) -> None:
        if self.judge is not None:
            await self.judge.aclose()
