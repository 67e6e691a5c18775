"""Stand-ins for math-verify that the math evaluator's worker processes import (not tests)."""

from __future__ import annotations

import os
import time
from pathlib import Path

MEET_S = 30.0


def meeting_check(gold: str, answer: str) -> tuple[bool, str]:
    """Answer ``"hang"`` never returns. Otherwise mark ``answer`` in folder ``gold`` and wait (at
    most MEET_S) until two checks are in workers at once: ``(True, "<pid> <checks met>")``."""
    if answer == "hang":
        time.sleep(3600)
    folder = Path(gold)
    (folder / answer).touch()
    deadline = time.monotonic() + MEET_S
    while len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return True, f"{os.getpid()} {len(list(folder.iterdir()))}"
