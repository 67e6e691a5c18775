"""Bundled benchmarks. Importing this package registers every benchmark in it."""

from maslab.benchmarks import (
    aime2024,
    aime2025,
    aqua_rat,
    arith,
    collab_maze,
    gpqa_diamond,
    gsm8k,
    gsm_hard,
    humaneval,
    math500,
    mbpp,
    medmcqa,
    medqa,
    mmlu,
    mmlu_pro,
    scibench,
)

__all__ = [
    "aime2024",
    "aime2025",
    "aqua_rat",
    "arith",
    "collab_maze",
    "gpqa_diamond",
    "gsm8k",
    "gsm_hard",
    "humaneval",
    "math500",
    "mbpp",
    "medmcqa",
    "medqa",
    "mmlu",
    "mmlu_pro",
    "scibench",
]
