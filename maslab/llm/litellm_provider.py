"""``litellm:<model>``: non-OpenAI-compatible providers, through the optional litellm extra.

litellm is imported on first use only (its import costs seconds and ~150 MB), with its bundled
model table (no download of the remote one at import) and without its debug prints.
"""

from __future__ import annotations

import importlib
import os
import time
from typing import Any

from maslab.defaults import REQUEST_TIMEOUT_S
from maslab.errors import (
    ConfigError,
    ConnectionRefused,
    LLMConnectionError,
    LLMError,
    LLMTimeout,
)
from maslab.llm.openai_compat import (
    REFUSED,
    causes,
    completion_from_payload,
    error_for_status,
    refused_here,
)
from maslab.llm.types import ChatModelBase, ChatRequest, Completion, Feature
from maslab.secrets import register_environment_secrets


def _import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        litellm: Any = importlib.import_module("litellm")
    except ImportError:
        raise ConfigError(
            "litellm models need the optional extra: pip install 'maslab[litellm]'"
        ) from None
    litellm.suppress_debug_info = True
    return litellm


_ALSO_READ = {"HUGGINGFACE_API_KEY": ("HF_TOKEN",)}
"""Key variables litellm's calls also read where its environment check names only the first."""


def check_keys(model: str) -> None:
    """A one-line :class:`ConfigError` when the environment lacks the API key variable that
    litellm says ``model`` needs (any of them, where it names several). What else it lists (an
    API base, a cloud project, cloud credentials) may come from elsewhere and is left to the
    call."""
    missing = _import_litellm().validate_environment(model)["missing_keys"]
    keys = [
        name
        for name in missing
        if name.endswith("_API_KEY") and not any(map(os.environ.get, _ALSO_READ.get(name, ())))
    ]
    if keys:
        raise ConfigError(
            f"environment variable {' or '.join(keys)} is not set "
            f"(model 'litellm:{model}' needs it)"
        )


def _requested_url(exc: BaseException) -> str:
    """The URL of the HTTP request under ``exc`` (the innermost cause that holds one: litellm's
    own exceptions hold a placeholder), or ""."""
    for cause in reversed(list(causes(exc))):
        if (url := getattr(getattr(cause, "request", None), "url", None)) is not None:
            return str(url)
    return ""


def _as_llm_error(exc: Exception, model: str) -> LLMError:
    """Map a litellm exception by kind, from it or its causes (litellm gives a timeout status 408
    and a refused connection status 500), else by its HTTP status. A connection a server of this
    machine refused is :class:`ConnectionRefused`, not retried."""
    kinds = list(causes(exc))
    if any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in kinds):
        return LLMTimeout(str(exc), model=model)
    if refused_here(exc, _requested_url(exc)):
        return ConnectionRefused(REFUSED, model=model)
    if any(isinstance(e, ConnectionError) or "Connect" in type(e).__name__ for e in kinds):
        return LLMConnectionError(str(exc), model=model)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status != 200:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None) or {}
        return error_for_status(status, str(exc), model, headers.get("retry-after"))
    return LLMError(f"{type(exc).__name__}: {exc}", model=model)


class LiteLLMModel(ChatModelBase):
    """Calls ``litellm.acompletion`` with its own retries off (maslab retries).

    litellm reads provider keys from the environment itself, so every credential-named
    variable is registered as a secret. What the model does natively is what litellm's model
    table says.
    """

    def __init__(self, model: str, *, timeout: float = REQUEST_TIMEOUT_S) -> None:
        self.litellm = _import_litellm()
        register_environment_secrets()
        self.model = model
        self.name = f"litellm:{model}"
        self.timeout = timeout

    async def complete(self, request: ChatRequest) -> Completion:
        started = time.perf_counter()
        try:
            response = await self.litellm.acompletion(
                model=self.model,
                messages=list(request.messages),
                num_retries=0,
                timeout=self.timeout,
                # plain function tools: without this, litellm releases before 1.108 route any
                # request with tools through their MCP gateway, which needs the mcp package
                _skip_mcp_handler=True,
                **request.params(),
            )
        except Exception as exc:  # litellm raises many types; classify, never swallow
            raise _as_llm_error(exc, self.name) from None
        latency = time.perf_counter() - started
        data = response.model_dump() if hasattr(response, "model_dump") else dict(response)
        return completion_from_payload(data, self.model, latency, request, source=self.name)

    def supports(self, feature: Feature) -> bool:
        check = {
            "structured_output": self.litellm.supports_response_schema,
            "tools": self.litellm.supports_function_calling,
        }[feature]
        try:
            return bool(check(model=self.model))
        except Exception:  # litellm raises for models its table does not know
            return False
