"""Learned designers of a spatial-temporal communication graph: ``agentprune``, ``agentdropout``
and ``g_designer``, a family package (importing it registers nothing).

Each learns, on a validation split (``maslab run --optimize-on``), which agents of N and which
of their messages to keep over R rounds before a decision node answers. ``spacetime`` holds
what they share (the graph, its execution, the REINFORCE loop, the base class); each method is
a module of its own, named after it, which the registry finds and imports when the method is
asked for (:class:`maslab.registry.Registry`).
"""
