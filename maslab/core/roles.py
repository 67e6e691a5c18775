"""Model roles: the one way to give agents of a method other models than the run's.

A run has one model and one set of sampling parameters. Its *model roles* map role names and
agent names to a model spec and, optionally, a temperature. For MAD (roles affirmative,
negative, moderator, judge)::

    maslab run --method mad ... --model-role judge=openai:gpt-4o --model-role judge.temperature=0
    model_roles: {judge: {model: "openai:gpt-4o", temperature: 0}}    # a sweep file's method
    MAD().run(task, "openai:gpt-4o-mini", model_roles={"judge": "openai:gpt-4o"})    # Python

Every agent has a name and a role (its name when the method gives none). When the agent is
created, :func:`agent_settings` settles its model and sampling, field by field:

    the entry for its name  >  the entry for its role  >  what the method sets  >  the run's

so in LLM Debate ``debater=openai:a`` puts every debater on model a, ``debater_2=openai:b`` then
moves one of them to b, and an entry with only a temperature keeps the model it would have
had. Each method declares its roles (``Method.roles``) and the agent names it can be addressed
by (``Method.agent_names()``); a key that names neither is an error before anything runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from maslab.config_files import parse_value, validation_message
from maslab.errors import ConfigError

ModelRoles = dict[str, dict[str, Any]]
"""Normalised model roles: name -> ``{"model": spec, "temperature": t}`` (unset fields absent)."""


class RoleModel(BaseModel):
    """One model-roles entry; a bare string stands for ``{"model": <string>}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)


def check_model_roles(model_roles: Mapping[str, Any] | None) -> ModelRoles:
    """``model_roles`` normalised (see :data:`ModelRoles`), or a one-line :class:`ConfigError`."""
    if model_roles is None:
        return {}
    if not isinstance(model_roles, Mapping):
        kind = type(model_roles).__name__
        raise ConfigError(
            f"model_roles must be a mapping like {{'judge': 'openai:gpt-4o'}}, got {kind}"
        )
    checked: ModelRoles = {}
    for name, entry in model_roles.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"model_roles: a key is a role or agent name, got {name!r}")
        value = {"model": entry} if isinstance(entry, str) else entry
        try:
            checked[name] = RoleModel.model_validate(value).model_dump(exclude_none=True)
        except ValidationError as exc:
            raise ConfigError(validation_message(exc, f"model_roles.{name}")) from None
    return checked


def parse_model_roles(items: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Command-line entries ``NAME=SPEC`` and ``NAME.temperature=T`` as a model-roles mapping."""
    roles: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        name, dot, field = key.partition(".")
        if not (sep and name and value and (field or not dot)):
            raise ConfigError(
                f"--model-role: '{item}' is not NAME=MODEL (or NAME.temperature=T), "
                "e.g. judge=openai:gpt-4o"
            )
        roles.setdefault(name, {})[field or "model"] = parse_value(value) if dot else value
    return roles


def describe_model_roles(model_roles: Mapping[str, Mapping[str, Any]]) -> str:
    """'judge=openai:gpt-4o, judge.temperature=0': model roles as ``--model-role`` writes them."""
    return ", ".join(
        f"{name}={value}" if field == "model" else f"{name}.{field}={value}"
        for name, entry in model_roles.items()
        for field, value in entry.items()
    )


def role_models(model_roles: ModelRoles) -> list[str]:
    """The model specs ``model_roles`` names, each once, in order."""
    return list(dict.fromkeys(e["model"] for e in model_roles.values() if "model" in e))


def check_role_names(
    model_roles: Mapping[str, Any], method: str, roles: Iterable[str], agents: Iterable[str]
) -> None:
    """A one-line :class:`ConfigError` (with close matches) for the first key of
    ``model_roles`` that is neither one of ``method``'s roles nor one of its agents."""
    roles, agents = list(roles), [a for a in agents if a not in roles]
    known = [*roles, *agents]
    for name in model_roles:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        listed = f"roles: {', '.join(roles) or 'none'}"
        listed += f"; agents: {', '.join(agents)}" if agents else ""
        raise ConfigError(f"{method} has no role or agent '{name}'; {hint}{listed}")


def agent_settings(
    model_roles: ModelRoles, name: str, role: str | None, chosen: Mapping[str, Any]
) -> dict[str, Any]:
    """The model and sampling of agent ``name`` (of ``role``): what the method ``chosen``
    (``model`` and sampling keywords), overridden by the role's entry, then by the agent's."""
    settings = dict(chosen)
    for key in dict.fromkeys((role or name, name)):
        settings.update(model_roles.get(key, {}))
    return settings


def numbered(role: str, count: int, start: int = 1) -> tuple[str, ...]:
    """The names of ``count`` agents of one role: ``role_1``, ``role_2``, ... (from ``start``)."""
    return tuple(f"{role}_{i}" for i in range(start, start + count))
