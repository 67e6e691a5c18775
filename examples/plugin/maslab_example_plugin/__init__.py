"""A worked example of a maslab plugin (see ``pyproject.toml`` for the entry points)."""
