"""The settings of a plug-in (a method, a benchmark, an evaluator): one base, one way to build.

Every plug-in declares its settings as a ``Config``, a :class:`PluginConfig`, and builds it
from what it was given (:meth:`PluginConfig.build`): a mapping, a ``Config`` or keywords, each
checked by pydantic; a mistake is a one-line :class:`~maslab.errors.ConfigError` that names the
plug-in and the setting.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any, Self, TypeAlias

from pydantic import BaseModel, ConfigDict, ValidationError

from maslab.config_files import validation_message
from maslab.errors import ConfigError


class PluginConfig(BaseModel):
    """Base of every plug-in's settings: unknown keys are errors, not silently ignored.

    A setting is a value a run records: JSON-able (a number, a name, a flag, a list of them),
    with a default and a ``description=`` (``Field(3, ge=1, description="...")``). The run's
    manifest records all of them, defaults included (``method_config``, ``benchmark_options``,
    ``evaluator_options``), and a run gives them as ``--config``, ``--bench-option`` or
    ``--evaluator-option``. What is not a value but a thing to work with (the run's model pool,
    a model handle, a sandbox's ``Limits``) is no setting: it is a keyword argument of the
    plug-in's constructor of its own, never recorded. A setting that names a model (a judge's
    spec) may be handed a model handle instead, and then records the handle's name.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def build(
        cls, given: Settings, overrides: Mapping[str, Any], *, what: str, example: str
    ) -> Self:
        """``given`` (a mapping or a config; None: the defaults) with ``overrides`` over it,
        checked; a bad one is a one-line :class:`ConfigError` starting with ``what`` (``arith
        options``). ``example`` names the plug-in's class in the hint for a wrong ``given``."""
        if isinstance(given, PluginConfig):
            given = given.model_dump()
        elif given is not None and not isinstance(given, Mapping):
            settings = ", ".join(f"{field}=..." for field in cls.model_fields)
            raise ConfigError(
                f"{what} must be a mapping or {cls.__qualname__}, got {type(given).__name__} "
                f"{reprlib.repr(given)}; pass settings as keywords: {example}({settings})"
            )
        try:
            return cls.model_validate({**(given or {}), **overrides})
        except ValidationError as exc:
            raise ConfigError(validation_message(exc, what)) from None


Settings: TypeAlias = PluginConfig | Mapping[str, Any] | None
"""What a plug-in's constructor takes as its settings: a mapping, a ``Config``, or None for the
defaults (keywords go over it)."""
