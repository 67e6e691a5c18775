"""The bundled studies, one module each, its paper's figures in a YAML file beside it."""
