"""Bundled evaluators. Importing this package registers every evaluator in it."""

from maslab.evaluators import (
    choice,
    choice_bias,
    code,
    collab_maze,
    exact,
    llm_judge,
    math,
    numeric,
)

__all__ = ["choice", "choice_bias", "code", "collab_maze", "exact", "llm_judge", "math", "numeric"]
