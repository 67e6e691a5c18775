"""Model access: providers, middleware (cache, limiter, retry), usage ledger."""

from maslab.llm.cache import Cached, ResponseCache
from maslab.llm.endpoints import Endpoint, load_endpoints
from maslab.llm.ledger import CallRecord, UsageLedger, UsageTotals
from maslab.llm.registry import ModelPool, load_model, parse_spec, providers, register_provider
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
