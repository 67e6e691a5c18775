"""The default settings of a run, each named once; everything else imports them from here.

The sampling defaults are MASLab's, so numbers stay comparable with its tables. This module
imports nothing from maslab, so any layer may read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

# The embedded offline model (llama.cpp on SmolLM2-135M): what runs when no model is named.
DEMO_MODEL = "local:smollm2-135m"

TEMPERATURE = 0.5
MAX_TOKENS = 2048
"""Completion tokens per model call: the one default, for every model (MASLab's value, the
fair settings), unless ``--max-tokens`` says otherwise. :data:`DEMO_MAX_TOKENS` is the one
model that runs under its own cap."""
DEMO_MAX_TOKENS = 256
"""Completion tokens per call on :data:`DEMO_MODEL` when ``--max-tokens`` is not given: that
model's own setting, not a second default. It rambles to whatever cap it gets, on the CPU: a
task of the README's first command (``llm_debate`` on ``arith``) took 31 s at this cap, 5 of
its 6 replies cut, and 390 s at :data:`MAX_TOKENS`, where the second round's replies ran into
the end of its 4,096-token context instead. A run on it is a demonstration, not at the fair
settings (``--max-tokens 2048`` puts it there)."""
# The sampling parameters every method of a run gets (read-only: copy it to change it).
SAMPLING: Mapping[str, Any] = MappingProxyType(
    {"temperature": TEMPERATURE, "max_tokens": MAX_TOKENS}
)
# An LLM judge asks at temperature 0 (the int: it is part of the response cache's key).
JUDGE_TEMPERATURE = 0

CONCURRENCY = 32  # model calls in flight across a run (and as many samples)
# Sweep cells run at once (under the sweep's one call cap): enough to overlap the slow tails
# of cells (last samples, dependent rounds), few enough to show a line each.
MAX_CELLS = 4
# Which waiting model call goes next when a run's calls are at the cap (maslab.core.scheduling:
# why).
SCHEDULER: Final = "progress"
REPEATS = 1  # independent attempts per task
SEED = 0  # the run seed: per-sample random streams and the response cache's draws
SPLIT = "test"

# Per endpoint of an endpoints file (to be read by maslab.llm.endpoints and litellm_provider).
# Requests in flight to an endpoint without max_concurrency outside a run (a run's is its own
# concurrency).
ENDPOINT_MAX_CONCURRENCY = 32
REQUEST_TIMEOUT_S = 600.0  # seconds per request (also litellm's)
