"""OpenTelemetry tracing (the `otel` extra), and the W3C trace context the gateway passes on either way.

    context.py      W3C traceparent/tracestate read and passed on, the current span, a request sampled out
    conventions.py  span names and attributes: the MCP semantic conventions and the gateway's `mcpgw.*`
    provider.py     the SDK from `tracing:`: resource, sampler, bounded export queue, OTLP/HTTP or gRPC
    spans.py        the gateway's SERVER, CLIENT and INTERNAL spans

Only `open_tracing` reaches the last two, and only when `tracing.enabled`: with tracing off nothing
imports OpenTelemetry, and the request path pays one `is None` test where a span would start.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gateway.config import TracingConfig

if TYPE_CHECKING:
    from gateway.tracing.provider import Dropped, Exported
    from gateway.tracing.spans import Tracing

INSTALL_HINT = "tracing needs the otel extra: pip install 'mcp-gateway[otel]'"


class TracingUnavailable(Exception):
    """`tracing.enabled` is set but the OpenTelemetry SDK is not installed (or the OTEL_* settings are wrong)."""


def open_tracing(config: TracingConfig, *, on_dropped: Dropped, on_exported: Exported) -> Tracing | None:
    """The gateway's tracer for `config`; None when tracing is off. Called on the running loop: the
    callbacks, which the exporter's thread calls too, are run on the loop's thread."""
    if not config.enabled:
        return None
    on_dropped, on_exported = _on_loop(on_dropped), _on_loop(on_exported)
    try:
        from gateway.tracing.provider import PresetIds, sampling, tracer_provider
        from gateway.tracing.spans import Tracing
    except ImportError as exc:
        raise TracingUnavailable(f"{INSTALL_HINT} ({exc.name} is missing)") from exc
    ids = PresetIds()
    try:
        provider = tracer_provider(config, on_dropped=on_dropped, on_exported=on_exported, ids=ids)
        decide = sampling(config)
    except ValueError as exc:
        raise TracingUnavailable(str(exc)) from exc
    return Tracing(config, provider, decide, ids)


def _on_loop(hook: Callable[..., None]) -> Callable[..., None]:
    """`hook`, run on the running loop's thread whichever thread calls it (dropped once the loop is closed)."""
    loop = asyncio.get_running_loop()

    def on_loop(*args: Any) -> None:
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(hook, *args)

    return on_loop
