"""Episodes of tool use: the turns a task delivers, the calls made on its environment, and the
answer those calls compose.

A task with ``turns`` is an episode of ``1 + len(turns)`` user turns; the sample's context
delivers them one at a time (:meth:`Context.episode <maslab.core.context.Context.episode>`) and
records, through its tool door (:meth:`Context.call_tool
<maslab.core.context.Context.call_tool>`), every call made on the sample's
:class:`~maslab.core.environment.Environment` at each turn. The answer of a task with an
environment is what was called (:func:`episode_answer`), whatever the method replied.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MORE_FUNCTIONS = "You have more functions now. Go on with my last request."


@dataclass(frozen=True)
class Turn:
    """One user turn of an episode: its index (0-based), the user's message (``""``: none new,
    the turn only adds functions; never on the first) and the functions offered at it."""

    index: int
    message: str
    functions: tuple[Mapping[str, Any], ...]

    @property
    def request(self) -> str:
        """What an agent is asked at this turn: the message, or (a turn that only adds
        functions) a line saying that more functions are available."""
        return self.message or MORE_FUNCTIONS


@dataclass(frozen=True)
class ToolOutcome:
    """What a call on the environment gave: its result text (``"error: ..."`` for a call the
    environment refused) and whether it errored."""

    result: str
    error: bool = False


@dataclass(frozen=True)
class ToolRecord:
    """One call on the sample's environment, as the context's tool door recorded it."""

    turn: int
    agent: str | None
    name: str
    arguments: dict[str, Any]
    result: str
    error: bool
    duration_s: float


def _calls(calls: Iterable[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": dict(arguments)} for name, arguments in calls]


def calls_json(calls: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    """``(name, arguments)`` calls as the JSON array an answer holds:
    ``[{"name": ..., "arguments": {...}}, ...]``."""
    return json.dumps(_calls(calls), ensure_ascii=False)


def episode_answer(records: Sequence[ToolRecord], turns: int) -> str:
    """The answer of an episode on an environment: one JSON array per turn (``turns`` of them),
    each the calls made at that turn in the order they ran, errored ones included."""
    per_turn = [
        _calls((r.name, r.arguments) for r in records if r.turn == turn) for turn in range(turns)
    ]
    return json.dumps(per_turn, ensure_ascii=False)
