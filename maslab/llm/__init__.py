"""Model access: providers, middleware (cache, limiter, retry), usage ledger."""

from typing import TYPE_CHECKING

from maslab.lazy import lazy_exports

if TYPE_CHECKING:  # each name below loads on first use (see maslab.lazy)
    from maslab.llm.cache import Cached, ResponseCache
    from maslab.llm.endpoints import Endpoint, load_endpoints
    from maslab.llm.ledger import CallRecord, UsageLedger, UsageTotals
    from maslab.llm.pool import ModelPool
    from maslab.llm.registry import load_model, parse_spec, providers, register_provider
    from maslab.llm.retry import RetryPolicy
    from maslab.llm.types import (
        ChatMessage,
        ChatModel,
        ChatModelBase,
        ChatRequest,
        Completion,
        Feature,
        FunctionCall,
        TokenLogprob,
        Usage,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Cached": "maslab.llm.cache",
        "ResponseCache": "maslab.llm.cache",
        "Endpoint": "maslab.llm.endpoints",
        "load_endpoints": "maslab.llm.endpoints",
        "CallRecord": "maslab.llm.ledger",
        "UsageLedger": "maslab.llm.ledger",
        "UsageTotals": "maslab.llm.ledger",
        "ModelPool": "maslab.llm.pool",
        "load_model": "maslab.llm.registry",
        "parse_spec": "maslab.llm.registry",
        "providers": "maslab.llm.registry",
        "register_provider": "maslab.llm.registry",
        "RetryPolicy": "maslab.llm.retry",
        "ChatMessage": "maslab.llm.types",
        "ChatModel": "maslab.llm.types",
        "ChatModelBase": "maslab.llm.types",
        "ChatRequest": "maslab.llm.types",
        "Completion": "maslab.llm.types",
        "Feature": "maslab.llm.types",
        "FunctionCall": "maslab.llm.types",
        "TokenLogprob": "maslab.llm.types",
        "Usage": "maslab.llm.types",
    },
)

__all__ = [
    "Cached",
    "CallRecord",
    "ChatMessage",
    "ChatModel",
    "ChatModelBase",
    "ChatRequest",
    "Completion",
    "Endpoint",
    "Feature",
    "FunctionCall",
    "ModelPool",
    "ResponseCache",
    "RetryPolicy",
    "TokenLogprob",
    "Usage",
    "UsageLedger",
    "UsageTotals",
    "load_endpoints",
    "load_model",
    "parse_spec",
    "providers",
    "register_provider",
]
