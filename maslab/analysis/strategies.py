"""The names of failure attribution's strategies (:mod:`maslab.analysis.attribution`), apart
from it: ``maslab attribute --help`` lists them without loading the judge's machinery."""

from __future__ import annotations

from typing import Literal, get_args

Strategy = Literal["all_at_once", "step_by_step", "binary_search"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)
