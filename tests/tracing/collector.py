"""A real OTLP receiver for the tests: OTLP/HTTP (protobuf bodies) on aiohttp, or OTLP/gRPC on grpc.aio.

It decodes every `ExportTraceServiceRequest` with `opentelemetry-proto` into `Received` spans, which the
tests look up by service and name and follow by parent. It can be told to answer slowly (`delay`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from aiohttp import web
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

KINDS = {Span.SPAN_KIND_SERVER: "server", Span.SPAN_KIND_CLIENT: "client", Span.SPAN_KIND_INTERNAL: "internal",
         Span.SPAN_KIND_PRODUCER: "producer", Span.SPAN_KIND_CONSUMER: "consumer"}


@dataclass(frozen=True)
class Received:
    """One exported span, decoded."""

    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    links: tuple[str, ...]  # the linked spans' ids
    status: str  # unset | ok | error
    status_message: str


@dataclass
class Collector:
    """Spans received so far; `delay` seconds before each answer (a slow collector)."""

    spans: list[Received] = field(default_factory=list)
    delay: float = 0.0
    requests: int = 0

    def take(self, body: bytes) -> None:
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.requests += 1
        for resource_spans in request.resource_spans:
            resource = {kv.key: value_of(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(decoded(str(resource.get("service.name")), span))

    def find(self, service: str, name: str | None = None, **attributes: Any) -> list[Received]:
        return [s for s in self.spans if s.service == service and (name is None or s.name == name)
                and all(s.attributes.get(k) == v for k, v in attributes.items())]

    async def wait_for(self, check: Callable[[], Any], within: float = 30.0) -> Any:
        """Poll until `check()` is truthy (spans arrive after their batch's delay); its value."""
        deadline = time.monotonic() + within
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not received in {within}s; spans: {[(s.service, s.name) for s in self.spans]}")
            await asyncio.sleep(0.05)

    def http_app(self) -> web.Application:
        async def traces(request: web.Request) -> web.Response:
            body = await request.read()
            if self.delay:
                await asyncio.sleep(self.delay)
            self.take(body)
            return web.Response(body=trace_service_pb2.ExportTraceServiceResponse().SerializeToString(),
                                content_type="application/x-protobuf")

        app = web.Application()
        app.router.add_post("/v1/traces", traces)
        return app


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, collector: Collector) -> None:
        self.collector = collector

    async def Export(self, request: Any, context: Any) -> Any:
        self.collector.take(request.SerializeToString())
        return trace_service_pb2.ExportTraceServiceResponse()


async def grpc_server(collector: Collector) -> tuple[grpc.aio.Server, int]:
    """An OTLP/gRPC receiver on 127.0.0.1 (its port)."""
    server = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(collector), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def decoded(service: str, span: Any) -> Received:
    return Received(service=service, name=span.name, kind=KINDS.get(span.kind, "unspecified"),
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_id=span.parent_span_id.hex(),
                    attributes={kv.key: value_of(kv.value) for kv in span.attributes},
                    links=tuple(link.span_id.hex() for link in span.links),
                    status={0: "unset", 1: "ok", 2: "error"}[span.status.code], status_message=span.status.message)


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None
