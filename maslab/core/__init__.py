"""The core: one sample's world. Tasks and their answers, messages, agents, topologies, the
context every model call goes through (budget, tracing, seeded random streams, the call gate),
model roles, and the Method base class with its registry. Built on the foundation and
:mod:`maslab.llm` only."""
