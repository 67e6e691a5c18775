"""An optional OpenTelemetry export of a run (``maslab run --otel``): a span per run, per
sample, and per model or tool call, with the GenAI semantic conventions' attributes (the
operation, the model, the tokens, why the reply ended; a tool's name) and maslab's own
(``maslab.method``, ``maslab.agent``, ``maslab.round``, ``maslab.task``...).

Off until :func:`enable`: every hook is then a no-op that reads one global. Enabled, spans go
over OTLP/HTTP to the collector the standard ``OTEL_EXPORTER_OTLP_*`` variables name (the
``otel`` extra), batched and flushed at exit, or to the span processor given (a test's
in-memory exporter). Spans nest as the work does: a sample's inside its run, a call's inside
its sample (asyncio tasks carry the span that started them). Samples solved on Ray workers
are not exported: their processes have no exporter.
"""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from maslab.errors import ConfigError
from maslab.version import __version__

_tracer: Any = None
_provider: Any = None


def enable(processor: Any = None) -> None:
    """Export spans through ``processor`` (an OpenTelemetry span processor), by default a
    batch of OTLP/HTTP exports; a one-line ConfigError without the ``otel`` extra."""
    global _tracer, _provider
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigError("--otel needs the optional extra: pip install 'maslab[otel]'") from None
    if processor is None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError(
                "--otel needs the optional extra: pip install 'maslab[otel]'"
            ) from None
        processor = BatchSpanProcessor(OTLPSpanExporter())
    disable()
    _provider = TracerProvider(resource=Resource.create({"service.name": "maslab"}))
    _provider.add_span_processor(processor)
    _tracer = _provider.get_tracer("maslab", __version__)
    atexit.register(disable)


def disable() -> None:
    """Flush what was recorded and stop exporting."""
    global _tracer, _provider
    provider, _tracer, _provider = _provider, None, None
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    return _tracer is not None


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """A span named ``name`` around the block, the current one inside it, with
    ``attributes`` (None values left out); yields it (None when export is off), for
    attributes known only at the end. An exception escaping the block marks it failed."""
    if _tracer is None:
        yield None
        return
    shown = {k: v for k, v in attributes.items() if v is not None}
    with _tracer.start_as_current_span(name, attributes=shown) as current:
        yield current
