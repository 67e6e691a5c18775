"""The method kit: what methods share on top of the core. Aggregation and voting, prompt pieces
several methods ask with, the layer-by-layer runner of a DAG, parsing and structured asks,
tools, the bridge that serves model-written programs' calls, learned graph policies, and
running code against tests (:mod:`maslab.kit.code_check`)."""
