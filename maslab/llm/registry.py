"""Model specs (``provider:name``) to ready-to-use model stacks.

Every stack is composed the same way::

    Cached -> Retrying -> Balanced -> Limited(endpoint) -> transport      (openai)
    Cached -> Retrying -> provider                                         (others)

The cache is optional. Providers register with :func:`register_provider`, or from an installed
distribution through the entry-point group ``maslab.providers`` (the entry point's name is the
prefix, its object the factory; see :mod:`maslab.plugins`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from maslab.defaults import ENDPOINT_MAX_CONCURRENCY
from maslab.errors import ConfigError
from maslab.llm.balancing import Balanced, Limited
from maslab.llm.cache import Cached, CacheStore, ResponseCache
from maslab.llm.endpoints import (
    DEFAULT_SERVER,
    Endpoints,
    EndpointsFile,
    alias_retry,
    endpoints_table,
    resolve_endpoints,
)
from maslab.llm.retry import Retrying, RetryPolicy
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Feature, Middleware
from maslab.plugins import PluginGroup


@dataclass(frozen=True)
class ModelSettings:
    """What every provider may need besides its name: the endpoints table, and the requests in
    flight an endpoint without its own ``max_concurrency`` takes."""

    endpoints: EndpointsFile | None = None
    concurrency: int = ENDPOINT_MAX_CONCURRENCY


ProviderFactory = Callable[[str, ModelSettings], ChatModelBase]
_PROVIDERS: dict[str, ProviderFactory] = {}


def register_provider(prefix: str) -> Callable[[ProviderFactory], ProviderFactory]:
    """Decorator: ``@register_provider("local")`` makes ``local:<name>`` specs resolvable."""

    def add(factory: ProviderFactory) -> ProviderFactory:
        _PROVIDERS[prefix] = factory
        return factory

    return add


_PLUGINS = PluginGroup(
    "maslab.providers", lambda prefix, factory: register_provider(prefix)(factory)
)


def providers() -> dict[str, ProviderFactory]:
    """The registered providers by prefix, installed plugins included."""
    _PLUGINS.load()
    return dict(sorted(_PROVIDERS.items()))


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``provider:name``; raise a :class:`ConfigError` naming the problem."""
    if not isinstance(spec, str):
        raise ConfigError(
            f"a model spec is a string like 'openai:gpt-4o-mini', got {type(spec).__name__}"
        )
    provider, sep, name = spec.partition(":")
    if not sep:
        raise ConfigError(f"model spec '{spec}' needs a provider prefix, e.g. 'openai:{spec}'")
    if provider not in providers():
        close = difflib.get_close_matches(provider, _PROVIDERS, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise ConfigError(
            f"unknown model provider '{provider}' in '{spec}'; "
            f"{hint}known: {', '.join(providers())}"
        )
    if not name.strip():
        raise ConfigError(f"model spec '{spec}' names no model after '{provider}:'")
    return provider, name


def check_model(spec: str, endpoints: Endpoints = None, *, keys: bool = True) -> None:
    """Raise the :class:`ConfigError` that loading or calling ``spec`` would, without calling
    it: an unknown provider, an alias missing from ``endpoints``, an unset API key variable
    (unless ``keys`` is False: a spec that can be right before its key is set; a ``litellm:``
    model's key is the one litellm names)."""
    provider, name = parse_spec(spec)
    if provider == "openai":
        alias, served_by = resolve_endpoints(name, endpoints_table(endpoints))
        for endpoint in served_by if keys else ():
            endpoint.api_key(alias)
    elif provider == "litellm" and keys:
        from maslab.llm.litellm_provider import check_keys

        check_keys(name)


LOCALHOST = "localhost"


def model_identity(spec: str) -> str:
    """The model ``spec`` names, as a run's identity holds it: the spec, except that an
    ``openai:<model>@<URL>`` spec keeps only the URL's host, :data:`LOCALHOST` for any address
    of this machine. A server restarted on another port (or path) serves the same run; another
    host is another run."""
    provider, _, name = spec.partition(":")
    model, at, url = name.partition("@")
    if provider != "openai" or not at or url == DEFAULT_SERVER:
        return spec
    from maslab.llm.openai_compat import is_loopback  # aiohttp loads only when used

    host = LOCALHOST if is_loopback(url) else urlsplit(url).hostname
    return f"openai:{model}@{host}" if host else spec


def options_identity(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` (an evaluator's), each one that is a model spec (a judge's) as
    :func:`model_identity` names it: a judge served on another port of this machine scores as
    the same judge."""
    return {k: model_identity(v) if isinstance(v, str) else v for k, v in options.items()}


@register_provider("openai")
def _openai(name: str, settings: ModelSettings) -> ChatModelBase:
    """OpenAI or any OpenAI-compatible server: an endpoints-file alias, or <model>@<URL>."""
    from maslab.llm.openai_compat import openai_transport  # aiohttp loads only when used

    alias, endpoints = resolve_endpoints(name, settings.endpoints)
    limited = []
    for e in endpoints:
        cap = e.cap(settings.concurrency)
        transport = openai_transport(e, e.model or alias, e.api_key(alias), cap)
        limited.append(Limited(transport, cap, e.rpm))
    return Balanced(f"openai:{alias}", limited, retry=alias_retry(alias, endpoints))


@register_provider("litellm")
def _litellm(name: str, settings: ModelSettings) -> ChatModelBase:
    """Whatever litellm speaks, <provider/model> (needs maslab[litellm])."""
    from maslab.llm.litellm_provider import LiteLLMModel

    return LiteLLMModel(name)


@register_provider("local")
def _local(name: str, settings: ModelSettings) -> ChatModelBase:
    """In-process llama.cpp on an embedded preset or a .gguf path (needs maslab[local])."""
    from maslab.llm.local import LocalModel

    return LocalModel(name)


@register_provider("scripted")
def _scripted(name: str, settings: ModelSettings) -> ChatModelBase:
    """Deterministic answers for tests and demos: echo, or a .json/.yaml script file."""
    from maslab.llm.scripted import ScriptedModel, load_script

    return ScriptedModel(load_script(name), name=f"scripted:{name}")


class TextOnly(Middleware):
    """The inner model, claiming no native feature: methods take their text path with it."""

    def supports(self, feature: Feature) -> bool:
        return False

    async def complete(self, request: ChatRequest) -> Completion:
        return await self.inner.complete(request)


def load_model(
    spec: str,
    *,
    endpoints: Endpoints = None,
    cache: CacheStore | str | Path | None = None,
    retry: RetryPolicy | None = None,
    native: bool = True,
    concurrency: int = ENDPOINT_MAX_CONCURRENCY,
) -> ChatModelBase:
    """Build the model stack for ``spec`` (``openai:gpt-4o-mini``, ``scripted:echo``, ...).

    ``endpoints`` is an endpoints table (alias -> list of :class:`Endpoint` or their fields) or
    YAML file; ``cache`` a :class:`ResponseCache` (or a stand-in), or its SQLite file (None: no
    cache); ``retry`` the retry policy, unless the endpoints of the model's alias set their own.
    ``native=False`` hides what the model does natively (structured output, tools), so every
    method asks for JSON in text, as with a server that does neither. ``concurrency`` caps the
    requests in flight to each endpoint that sets no ``max_concurrency`` (a run passes its own).
    The cache keys its replies by the model as a run's identity names it (:func:`model_identity`:
    a server of this machine restarted on another port replays the same replies), or, for an
    endpoints alias, by the servers behind it.
    """
    provider, name = parse_spec(spec)
    settings = ModelSettings(endpoints_table(endpoints), concurrency)
    inner = _PROVIDERS[provider](name, settings)
    own = inner.retry if isinstance(inner, Balanced) else None
    model: ChatModelBase = Retrying(inner, own or retry)
    if not native:
        model = TextOnly(model)
    model.name = spec
    if cache is not None:
        store = ResponseCache(cache) if isinstance(cache, (str, Path)) else cache
        served = _served_by(provider, name, settings)
        namespace = f"{spec} ({served})" if served else model_identity(spec)
        model = Cached(model, store, namespace=namespace)
    return model


def _served_by(provider: str, name: str, settings: ModelSettings) -> str:
    """Who answers an OpenAI-compatible alias or plain model name: each endpoint's served model
    and URL, so the response cache replays only what the same servers said (an alias pointed
    at another server is another model). "" where the spec says it all (``model@URL``, other
    providers)."""
    if provider != "openai":
        return ""
    alias, endpoints = resolve_endpoints(name, settings.endpoints)
    served = ", ".join(sorted({f"{e.model or alias}@{e.base_url}" for e in endpoints}))
    return "" if served == name else served
