"""The OpenTelemetry SDK set up from `tracing:`: resource, sampler, a bounded export queue, OTLP over HTTP or gRPC.

The gateway keeps a TracerProvider of its own (never the process-wide one), so a library in the same
process that traces through the global API (the `mcp` SDK does) neither joins the gateway's export
nor changes it. Each config key left null falls back to its OTEL_* environment variable, as the
SDK reads them (OTEL_EXPORTER_OTLP_*, OTEL_TRACES_SAMPLER(_ARG), OTEL_SERVICE_NAME,
OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_EXPORT_BATCH_SIZE).

Export runs on the SDK's worker thread, never on the event loop: a collector that is down or slow
costs the gateway nothing but the spans that do not fit in the queue (`max_queue_size`). Those are
dropped as they end, and counted (`on_dropped`), as are the spans of a batch the exporter gave up on.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import NamedTuple

from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    TraceIdRatioBased,
)

from gateway.config import TracingConfig

SERVICE = "mcp-gateway"
VERSION = "0.1.0"
HTTP, GRPC = "http/protobuf", "grpc"
TRACES_PATH = "/v1/traces"
SHUTDOWN_SECONDS = 5.0
"""The longest a stop waits for the last spans to reach the collector."""

Dropped = Callable[[str, int], None]
"""Hears of spans lost: (reason, count); reason is `queue_full` or `export_failed`. Called from any thread."""
Exported = Callable[[int], None]


class Sampling(NamedTuple):
    """The configured sampler's decision, taken before any span is made: the standard samplers are pure
    functions of the parent's sampled flag and the trace id, so a request they drop costs no span at all
    (`spans.Unsampled`), and one they keep gets the same decision again from the SDK's own sampler."""

    parent_based: bool
    root: str  # on | off | ratio
    bound: int  # ratio: trace ids whose low 64 bits are under it are sampled (TraceIdRatioBased's rule)

    def sampled(self, parent_flags: int | None, trace_id: int) -> bool:
        if parent_flags is not None and self.parent_based:
            return bool(parent_flags & 1)
        if self.root == "ratio":
            return trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < self.bound
        return self.root == "on"


class PresetIds(RandomIdGenerator):
    """Random ids, except a root span's trace id chosen beforehand (the one `Sampling` decided on)."""

    def __init__(self) -> None:
        self.trace_id: int | None = None

    def generate_trace_id(self) -> int:
        preset, self.trace_id = self.trace_id, None
        return preset if preset is not None else super().generate_trace_id()


def tracer_provider(config: TracingConfig, *, on_dropped: Dropped, on_exported: Exported, ids: PresetIds,
                    exporter: SpanExporter | None = None) -> TracerProvider:
    """The gateway's provider; `exporter` replaces the OTLP one (tests)."""
    provider = TracerProvider(resource=resource(config), sampler=sampler(config), id_generator=ids)
    exporting = CountingExporter(exporter or otlp_exporter(config), on_dropped=on_dropped, on_exported=on_exported)
    provider.add_span_processor(BoundedSpanProcessor(exporting, config.max_queue_size, on_dropped))
    return provider


async def shut_down(provider: TracerProvider, seconds: float = SHUTDOWN_SECONDS) -> None:
    """Export what is queued, within `seconds` (a daemon thread: a dead collector cannot hold the stop)."""
    with suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await asyncio.shield(asyncio.to_thread(provider.shutdown))


def resource(config: TracingConfig) -> Resource:
    attributes = {SERVICE_VERSION: VERSION, **config.resource_attributes}
    if config.service_name:
        attributes[SERVICE_NAME] = config.service_name
    made = Resource.create(attributes)  # OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME under ours
    if str(made.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        made = made.merge(Resource({SERVICE_NAME: SERVICE}))
    return made


def sampling(config: TracingConfig) -> Sampling:
    name, ratio = _sampler_choice(config)
    root = name.removeprefix("parentbased_")
    return Sampling(name.startswith("parentbased_"), {"always_on": "on", "always_off": "off"}.get(root, "ratio"),
                    TraceIdRatioBased.get_bound_for_rate(ratio))


def _sampler_choice(config: TracingConfig) -> tuple[str, float]:
    name = config.sampler or os.environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
    return name, config.ratio if config.ratio is not None else _ratio_from_env()


def sampler(config: TracingConfig) -> Sampler:
    name, ratio = _sampler_choice(config)
    samplers: dict[str, Callable[[], Sampler]] = {
        "always_on": lambda: ALWAYS_ON,
        "always_off": lambda: ALWAYS_OFF,
        "traceidratio": lambda: TraceIdRatioBased(ratio),
        "parentbased_always_on": lambda: ParentBased(ALWAYS_ON),
        "parentbased_always_off": lambda: ParentBased(ALWAYS_OFF),
        "parentbased_traceidratio": lambda: ParentBasedTraceIdRatio(ratio),
    }
    if name not in samplers:
        raise ValueError(f"OTEL_TRACES_SAMPLER={name!r} is not one of {', '.join(samplers)}")
    return samplers[name]()


def _ratio_from_env() -> float:
    value = os.environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    try:
        ratio = float(value) if value else 1.0
    except ValueError:
        raise ValueError(f"OTEL_TRACES_SAMPLER_ARG={value!r} is not a number") from None
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"OTEL_TRACES_SAMPLER_ARG={value!r} is not between 0 and 1")
    return ratio


def protocol(config: TracingConfig) -> str:
    chosen = (config.protocol or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
              or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or HTTP).strip()
    if chosen not in (HTTP, GRPC):
        raise ValueError(f"OTLP protocol {chosen!r} is not served: use {HTTP} or {GRPC}")
    return chosen


def otlp_exporter(config: TracingConfig) -> SpanExporter:
    """OTLP over HTTP or gRPC; what the config leaves out, the exporter reads from OTEL_EXPORTER_OTLP_*."""
    headers = dict(config.headers) or None
    if protocol(config) == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=config.endpoint, headers=headers, timeout=config.timeout_seconds)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter(endpoint=traces_url(config.endpoint), headers=headers, timeout=config.timeout_seconds)


def traces_url(endpoint: str | None) -> str | None:
    """The OTLP/HTTP traces URL of a base endpoint (as OTEL_EXPORTER_OTLP_ENDPOINT is read)."""
    if endpoint is None or endpoint.rstrip("/").endswith(TRACES_PATH):
        return endpoint
    return endpoint.rstrip("/") + TRACES_PATH


def _batch_size() -> int:
    """OTEL_BSP_MAX_EXPORT_BATCH_SIZE, else the SDK's default (512)."""
    value = os.environ.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 512


class CountingExporter(SpanExporter):
    """Counts what leaves for the collector, and the spans of batches the exporter gave up on."""

    def __init__(self, inner: SpanExporter, *, on_dropped: Dropped, on_exported: Exported) -> None:
        self.inner, self.on_dropped, self.on_exported = inner, on_dropped, on_exported
        self.submitted = 0  # written by the SDK's worker thread only

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.submitted += len(spans)  # before the export: the queue is free of them from now on
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter must not raise; one that does loses its batch, as a failure does
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.on_exported(len(spans))
        else:
            self.on_dropped("export_failed", len(spans))
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class BoundedSpanProcessor(SpanProcessor):
    """The SDK's batch processor behind a gate that counts what it would drop.

    The batch processor drops the oldest span when its queue is full, silently. This gate keeps
    the queue from ever filling: it knows how many spans went in (here, on the loop thread) and how
    many left (`CountingExporter.submitted`), and drops a span that would not fit, counting it.
    """

    def __init__(self, exporter: CountingExporter, max_queue_size: int, on_dropped: Dropped) -> None:
        self.exporter, self.max_queue_size, self.on_dropped = exporter, max_queue_size, on_dropped
        self.batch = BatchSpanProcessor(exporter, max_queue_size=max_queue_size,
                                        max_export_batch_size=min(max_queue_size, _batch_size()))
        self.queued = 0  # spans handed to the batch processor, ever

    def on_end(self, span: ReadableSpan) -> None:
        if not (span.context and span.context.trace_flags.sampled):
            return
        if self.queued - self.exporter.submitted >= self.max_queue_size:
            self.on_dropped("queue_full", 1)
            return
        self.queued += 1
        self.batch.on_end(span)

    def shutdown(self) -> None:
        self.batch.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.batch.force_flush(timeout_millis)
