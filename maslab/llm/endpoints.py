"""Where models are served: the endpoints file, and resolving a model name to its endpoints.

An endpoints file maps a model alias to one or more OpenAI-compatible endpoints::

    qwen-72b:
      - base_url: http://gpu1:8000/v1
        model: Qwen/Qwen2.5-72B-Instruct   # name the server knows (default: the alias)
        max_concurrency: 64               # unset: the run's --concurrency
      - base_url: http://gpu2:8000/v1
        model: Qwen/Qwen2.5-72B-Instruct
    gpt-4o-mini:
      - base_url: https://api.openai.com/v1
        api_key_env: OPENAI_API_KEY
        rpm: 5000
        retry: {attempts: 4, initial_wait: 0.5, max_wait: 30}
    llama-cpp:
      - base_url: http://localhost:8000/v1
        structured_output: json_object     # native JSON schema, in llama-cpp-python's form
        tools: true                        # native function calling

Several endpoints under one alias are load-balanced, each sample kept on one endpoint
(:class:`~maslab.llm.balancing.Balanced` states the rule). An endpoint without ``max_concurrency``
(any ``model@url`` or default-server one too) takes the run's ``concurrency`` as its cap, and
``ENDPOINT_MAX_CONCURRENCY`` outside a run. API keys are only ever read from the environment
variable an endpoint names, and are registered as secrets the moment they are read. ``retry``
is the alias's retry policy (every endpoint of an alias that sets one must set the same).

``structured_output`` and ``tools`` say what the server does natively: JSON constrained by a
schema (``true``: OpenAI's ``response_format`` of type ``json_schema``; ``json_object``: the
schema inside ``{"type": "json_object", "schema": ...}``, the only form llama-cpp-python's
server takes) and function calling (``tool_choice: auto`` answered with tool calls). Unset,
both are on for OpenAI's own API and off for any other server; methods use them where on and
fall back to JSON in plain text where off.

Once an endpoints file is given, ``openai:<name>`` must be one of its aliases (a typo is an
error, not a silent request to OpenAI); ``openai:<name>@default`` asks for the default server.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from maslab.config_files import load_yaml, validation_message
from maslab.defaults import ENDPOINT_MAX_CONCURRENCY, REQUEST_TIMEOUT_S
from maslab.errors import ConfigError
from maslab.llm.retry import RetryPolicy
from maslab.llm.types import Feature
from maslab.secrets import register_secret

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_SERVER = "default"  # ``openai:<name>@default``: $OPENAI_BASE_URL, else OpenAI


class Endpoint(BaseModel):
    """One OpenAI-compatible server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    model: str | None = None
    api_key_env: str | None = None
    max_concurrency: int | None = Field(None, ge=1)  # None: see ``cap``
    rpm: float | None = Field(None, gt=0, allow_inf_nan=False)
    timeout: float = Field(REQUEST_TIMEOUT_S, gt=0, allow_inf_nan=False)
    transport: Literal["http", "sdk"] = "http"
    api_version: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    retry: RetryPolicy | None = None
    structured_output: bool | Literal["json_object"] | None = None
    tools: bool | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    def cap(self, concurrency: int = ENDPOINT_MAX_CONCURRENCY) -> int:
        """Requests in flight: ``max_concurrency`` where set, else ``concurrency`` (a run's)."""
        return self.max_concurrency or concurrency

    def supports(self, feature: Feature) -> bool:
        """Whether the server does ``feature`` natively: as set, else only OpenAI's own API."""
        said = {"structured_output": self.structured_output, "tools": self.tools}[feature]
        if said is None:
            return urlsplit(self.base_url).hostname == urlsplit(DEFAULT_OPENAI_URL).hostname
        return bool(said)

    def api_key(self, alias: str) -> str | None:
        """The key from ``api_key_env``, registered as a secret; a named but unset variable is a
        :class:`ConfigError`."""
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ConfigError(
                f"environment variable {self.api_key_env} is not set "
                f"(model '{alias}' at {self.base_url} needs it)"
            )
        register_secret(key)
        return key


def alias_retry(alias: str, endpoints: list[Endpoint]) -> RetryPolicy | None:
    """The retry policy the endpoints of ``alias`` set (None: the caller's default)."""
    policies = {e.retry for e in endpoints if e.retry is not None}
    if len(policies) > 1:
        raise ConfigError(f"model '{alias}': its endpoints set different retry policies")
    return policies.pop() if policies else None


EndpointsFile = dict[str, list[Endpoint]]
# what callers may pass: a table, its YAML file, or None (see ``endpoints_table``)
Endpoints = EndpointsFile | Mapping[str, object] | str | Path | None
_ENDPOINTS_FILE = TypeAdapter(dict[str, list[Endpoint]])


def load_endpoints(path: str | Path) -> EndpointsFile:
    """Read and validate an endpoints YAML file."""
    return _nonempty(load_yaml(path, _ENDPOINTS_FILE), str(path))


def endpoints_table(endpoints: Endpoints) -> EndpointsFile | None:
    """An endpoints table from a YAML path or a mapping of alias -> list of endpoints (each an
    :class:`Endpoint` or its fields as a dict); ``None`` stays ``None``."""
    if endpoints is None:
        return None
    if isinstance(endpoints, (str, Path)):
        return load_endpoints(endpoints)
    if not isinstance(endpoints, Mapping):
        raise ConfigError(
            "endpoints must be a YAML file path or a mapping of alias -> list of endpoints, "
            f"got {type(endpoints).__name__}"
        )
    try:
        table = _ENDPOINTS_FILE.validate_python(endpoints)
    except ValidationError as exc:
        raise ConfigError(
            validation_message(exc, "endpoints (alias -> list of {base_url: ...})")
        ) from None
    return _nonempty(table, "endpoints")


def _nonempty(table: EndpointsFile, where: str) -> EndpointsFile:
    for alias, endpoints in table.items():
        if not endpoints:
            raise ConfigError(f"{where}: {alias}: needs at least one endpoint")
    return table


def resolve_endpoints(name: str, table: EndpointsFile | None) -> tuple[str, list[Endpoint]]:
    """Endpoints for ``openai:<name>``.

    ``name`` is an alias from the endpoints table, ``model@base_url`` for a keyless local
    server, or a plain model name served by ``$OPENAI_BASE_URL`` (default OpenAI) with
    ``$OPENAI_API_KEY``; with a table, a plain name must be spelled ``model@default``.
    Returns the alias (the model's identity in caches and ledgers) and its endpoints.
    """
    if table and name in table:
        return name, table[name]
    model, at, url = name.partition("@")
    if at and url != DEFAULT_SERVER:
        try:
            return name, [Endpoint(base_url=url, model=model)]
        except ValidationError as exc:
            raise ConfigError(validation_message(exc, f"model 'openai:{name}'")) from None
    if table is not None and not at:
        close = difflib.get_close_matches(name, table, n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise ConfigError(
            f"model 'openai:{name}' is not in the endpoints file; {hint}"
            f"known: {', '.join(sorted(table)) or '(none)'} "
            f"(for the default server say 'openai:{name}@{DEFAULT_SERVER}')"
        )
    base_url = os.environ.get("OPENAI_BASE_URL", DEFAULT_OPENAI_URL)
    return model, [Endpoint(base_url=base_url, model=model, api_key_env="OPENAI_API_KEY")]
