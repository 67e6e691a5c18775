"""A sample's environment: functions bound to state that the sample's agents change by calling
them, for tasks that are episodes of tool use (BFCL's file system, trading bot, ...).

A benchmark whose tasks need one builds a fresh :class:`Environment` per sample
(:meth:`Benchmark.environment <maslab.bench.benchmark.Benchmark.environment>`); the run hands it
to the method through the sample's context, and every call reaches it through the context's
tool door, which records it. What a call does is the environment's business; what was called,
in order and turn by turn, is the episode's answer, which the benchmark's evaluator replays to
score it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any


class ToolError(Exception):
    """A call the environment refused or that failed; its message is what the agent is shown."""


class Environment(ABC):
    """The functions a sample's agents may call at each turn, and the state they act on."""

    @abstractmethod
    def functions(self, turn: int) -> list[dict[str, Any]]:
        """The function specs offered at ``turn`` (0-based), each ``{"name", "description",
        "parameters"}`` with ``parameters`` a JSON schema object; a turn may add functions."""

    @abstractmethod
    def execute(self, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one call against the state and return its result as text. A call the agent got
        wrong (an unknown function, bad arguments, a refused operation) raises
        :class:`ToolError` with the message to show; the state keeps whatever the call did."""

    def function_groups(self) -> dict[str, str]:
        """Each function's group, by function name (BFCL's: the class it belongs to), so that a
        method may give each group an agent of its own; empty: one group of all."""
        return {}
