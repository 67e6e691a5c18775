"""External: a multi-agent system written with any OpenAI client, run as a maslab method.

No paper: the system is the user's (AutoGen AgentChat, LangGraph, CrewAI, DSPy, plain
``openai``...). ``entry`` names its function, ``module:function`` or ``path/to/file.py:function``
(``--config entry=my_pkg.my_mas:solve``), called once per sample as ``solve(task, client)``,
sync or async. ``task`` is the maslab :class:`~maslab.core.task.Task` (``task.prompt()`` is the
question as maslab asks it); ``client`` holds ``base_url``, ``api_key`` and ``model``, as
attributes and as mapping keys, and ``models``, every model name it may ask for.

Algorithm, per sample:

1. Open the sample's front door (:mod:`maslab.kit.front_door`): an OpenAI-compatible server on
   127.0.0.1 that takes only the sample's key; each request through it is a call of the sample
   (budgeted, cached, retried, gated, traced under the agent name the client sends in ``user``
   or the ``X-Agent`` header, counted).
2. Call ``solve(task, client)`` (a sync function in a worker thread, so its blocking client
   reaches the door); its return value, as text, is the answer.
3. Close the door. If the budget stopped a call, the sample ends as stopped: scored on the
   answer ``solve`` returned, if it returned one.

LLM calls: whatever the system makes through its door. Model roles route by name: the
request's ``model`` names the sample's model (``client.model``, ``"default"``) or a role given
with ``--model-role NAME=SPEC`` (any name but ``default``).

Deviations: none of a paper's; the system runs in this process, as the user's own code (not
model-written code: no sandbox).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import Field

from maslab.core.context import Context
from maslab.core.method import Method, MethodConfig, register_method
from maslab.core.roles import ModelRoles, check_model_roles
from maslab.core.task import Solution, Task
from maslab.errors import ConfigError
from maslab.kit.front_door import DEFAULT_MODEL, front_door
from maslab.plugins import import_function

MAX_THREADS = 1024
"""Sync systems running at once, at most (a run's concurrency is far below)."""


@register_method("external")
class External(Method):
    """Your own system, written with any OpenAI client, called once per sample."""

    paper = "none: your own system, through an OpenAI-compatible door per sample"
    category = "external"
    calls = "the calls your system makes through its door"

    class Config(MethodConfig):
        entry: str | None = Field(
            None,
            description="your system's function, module:function or path/to/file.py:function, "
            "called as solve(task, client) (sync or async)",
        )

    config: Config
    _pool: ThreadPoolExecutor | None = None

    def check_model_roles(self, model_roles: Mapping[str, Any] | None) -> ModelRoles:
        """The roles (any name but ``default``: they are the model names the system asks for),
        and the entry, importable: both checked before a run."""
        checked = check_model_roles(model_roles)
        if DEFAULT_MODEL in checked:
            raise ConfigError(f"external: '{DEFAULT_MODEL}' is the sample's own model, no role")
        self.system()
        return checked

    def _threads(self) -> ThreadPoolExecutor:
        """The threads sync systems run on: one per sample in flight (a thread starts only
        when every other is busy)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(MAX_THREADS, thread_name_prefix="external")
        return self._pool

    def system(self) -> Callable[..., Any]:
        """The user's function; a one-line ConfigError when none is named or it cannot load."""
        if not self.config.entry:
            raise ConfigError(
                "external needs your system's function: --config entry=module:function"
            )
        found = import_function(self.config.entry, "external entry")
        if not callable(found):
            raise ConfigError(f"external entry {self.config.entry}: not a function")
        return found

    async def solve(self, task: Task, ctx: Context) -> Solution:
        solve = self.system()
        async with front_door(ctx) as (door, client):
            try:
                if inspect.iscoroutinefunction(solve):
                    answer = await solve(task, client)
                else:  # on a thread of its own, as many at once as samples are in flight
                    loop = asyncio.get_running_loop()
                    answer = await loop.run_in_executor(self._threads(), solve, task, client)
            except Exception:
                if door.stopped is not None:  # its calls were refused: the stop ends it
                    raise door.stopped from None
                raise
        if door.stopped is not None:  # it answered after a refused call: scored as stopped
            ctx.propose(str(answer))
            raise door.stopped
        return Solution(answer="" if answer is None else str(answer))
