"""The heap a run works on: the cyclic garbage collector held off what was built before it, and
run less often while it works."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# new objects between young collections while a command works (Python's default is 700)
YOUNG_GENERATION = 50_000


@contextmanager
def steady_heap() -> Iterator[None]:
    """While a command or a blocking :func:`maslab.evaluate` works, the cyclic garbage
    collector leaves alone what was built before (modules, classes; a run's tasks: frozen) and
    runs less often. At its default pace it took a tenth of a 256-task debate's CPU, over a
    quarter at 1,500 tasks and 512 calls in flight (under a twentieth with this), half at 2,048
    in flight, and a third of reading a 50,000-sample run's records and summing them up.
    Restored afterwards."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION, *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()
