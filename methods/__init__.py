"""Bundled methods, one module each; a module registers its methods when imported.

The registry imports a module when its name is first asked for, and all of them to list
them (:mod:`maslab.registry`); importing this package alone registers nothing.
"""
