"""BFCL's executable multi-turn environments behind maslab's :class:`Environment`.

Each sample gets its own instances of the task's classes (GorillaFileSystem, TwitterAPI, ...),
imported from the cached wheel and loaded from the task's initial configuration the way BFCL
loads them (``_load_scenario`` on a deep copy; the stateless MathAPI takes none; long_context
tasks load with ``long_context=True``, which pads the states with BFCL's long data). A call
reaches the instance's method of that name with keyword arguments; its result is returned as
text, JSON for the dicts the methods return.
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from maslab.core.environment import Environment, ToolError
from maslab.core.task import Task
from maslab.errors import ConfigError

from .schema import function_spec
from .wheel import env_module, read_jsonl

# class -> (its module in func_source_code, its function docs in multi_turn_func_doc)
CLASSES = {
    "GorillaFileSystem": ("gorilla_file_system", "gorilla_file_system.json"),
    "MathAPI": ("math_api", "math_api.json"),
    "MessageAPI": ("message_api", "message_api.json"),
    "TwitterAPI": ("posting_api", "posting_api.json"),
    "TicketAPI": ("ticket_api", "ticket_api.json"),
    "TradingBot": ("trading_bot", "trading_bot.json"),
    "TravelAPI": ("travel_booking", "travel_booking.json"),
    "VehicleControlAPI": ("vehicle_control", "vehicle_control.json"),
}
STATELESS = frozenset({"MathAPI"})


def class_docs(class_name: str) -> list[dict[str, Any]]:
    """BFCL's function docs of one environment class, as in the wheel."""
    if class_name not in CLASSES:
        raise ConfigError(f"unknown BFCL class {class_name!r}; known: {', '.join(CLASSES)}")
    return read_jsonl(f"multi_turn_func_doc/{CLASSES[class_name][1]}")


@functools.cache
def class_specs(class_name: str) -> tuple[dict[str, Any], ...]:
    """The translated function specs of one class (translated once per process)."""
    return tuple(function_spec(doc) for doc in class_docs(class_name))


def result_text(result: Any) -> str:
    """A method's result as the agent reads it: strings as they are, the rest as JSON."""
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)


class BFCLEnvironment(Environment):
    """One sample's instances of a task's classes, and the functions offered turn by turn.

    Args:
        classes: The classes the task involves.
        initial_config: Their starting states, by class name.
        long_context: Load the states padded with BFCL's long-context data.
        held_out: miss_func's functions, by the turn that adds them (absent until then).
    """

    def __init__(
        self,
        classes: Sequence[str],
        initial_config: Mapping[str, Any],
        *,
        long_context: bool = False,
        held_out: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        self.instances: dict[str, Any] = {}
        self._specs: dict[str, dict[str, Any]] = {}
        self._methods: dict[str, Any] = {}
        self._classes: dict[str, str] = {}
        for class_name in classes:
            instance = self._instance(class_name, initial_config, long_context)
            self.instances[class_name] = instance
            for spec in class_specs(class_name):
                self._specs[spec["name"]] = spec
                self._methods[spec["name"]] = getattr(instance, spec["name"])
                self._classes[spec["name"]] = class_name
        self._held_out = {int(turn): list(names) for turn, names in (held_out or {}).items()}
        late = {name for names in self._held_out.values() for name in names}
        self._offered = {name for name in self._specs if name not in late}

    @classmethod
    def for_task(cls, task: Task) -> BFCLEnvironment:
        """A fresh environment for a ``bfcl_multi_turn`` task (from its metadata)."""
        meta = task.metadata
        return cls(
            meta["classes"],
            meta["initial_config"],
            long_context=meta["long_context"],
            held_out={int(turn): names for turn, names in meta["held_out"].items()},
        )

    @staticmethod
    def _instance(class_name: str, initial_config: Mapping[str, Any], long_context: bool) -> Any:
        if class_name not in CLASSES:
            raise ConfigError(f"unknown BFCL class {class_name!r}; known: {', '.join(CLASSES)}")
        instance = getattr(env_module(CLASSES[class_name][0]), class_name)()
        if class_name not in STATELESS:
            scenario = copy.deepcopy(dict(initial_config.get(class_name, {})))
            instance._load_scenario(scenario, long_context=long_context)
        return instance

    def functions(self, turn: int) -> list[dict[str, Any]]:
        for added_at, names in self._held_out.items():
            if added_at <= turn:
                self._offered.update(names)
        return [spec for name, spec in self._specs.items() if name in self._offered]

    def function_groups(self) -> dict[str, str]:
        """Each function's class, by function name."""
        return dict(self._classes)

    def parameter_order(self) -> dict[str, list[str]]:
        """Each function's parameters in its signature's order (for positional arguments)."""
        return {name: list(inspect.signature(m).parameters) for name, m in self._methods.items()}

    def execute(self, name: str, arguments: Mapping[str, Any]) -> str:
        if name not in self._offered:
            raise ToolError(f"unknown function {name!r}")
        method = self._methods[name]
        try:
            inspect.signature(method).bind(**arguments)
        except TypeError as exc:
            raise ToolError(f"bad arguments for {name}: {exc}") from None
        try:
            result = method(**copy.deepcopy(dict(arguments)))
        except Exception as exc:  # the method's own failure, shown to the agent as BFCL does
            raise ToolError(f"{name} failed: {type(exc).__name__}: {exc}") from None
        if isinstance(result, dict) and "error" in result:
            raise ToolError(str(result["error"]))
        return result_text(result)
