"""Bundled MAS methods. Importing this package registers every method in it."""

from maslab.methods import (
    collab_pair,
    conductor,
    cot,
    exchange_of_thought,
    goagent,
    llm_debate,
    macnet,
    mad,
    mixture_of_agents,
    planner_executor,
    reflexion,
    relay,
    self_consistency,
    self_refine,
    spp,
    vanilla,
)

__all__ = [
    "collab_pair",
    "conductor",
    "cot",
    "exchange_of_thought",
    "goagent",
    "llm_debate",
    "macnet",
    "mad",
    "mixture_of_agents",
    "planner_executor",
    "reflexion",
    "relay",
    "self_consistency",
    "self_refine",
    "spp",
    "vanilla",
]
