"""Bundled MAS methods. Importing this package registers every method in it."""

from maslab.methods import (
    camel,
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
    relay,
    self_consistency,
    self_refine,
    spp,
    vanilla,
)

__all__ = [
    "camel",
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
    "relay",
    "self_consistency",
    "self_refine",
    "spp",
    "vanilla",
]
