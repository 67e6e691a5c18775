"""Bundled evaluators. Importing this package registers every evaluator in it."""

from maslab.evaluators import (
    behaviour_coding,
    choice,
    choice_bias,
    code,
    collab_maze,
    exact,
    llm_judge,
    math,
    numeric,
)

__all__ = [
    "behaviour_coding",
    "choice",
    "choice_bias",
    "code",
    "collab_maze",
    "exact",
    "llm_judge",
    "math",
    "numeric",
]
