"""Fixtures of the tracing tests: an OTLP receiver, a gateway exporting to it, the SDK client's own spans."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from backend_fixtures import RunningBackend, start_http_backend
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracing.collector import Collector
from tracing.helpers import BACKEND

_CLIENT_SPANS = InMemorySpanExporter()


@pytest.fixture(scope="session")
def _client_provider() -> InMemorySpanExporter:
    """The SDK client traces through the global API: a provider of the test process keeps its spans in memory."""
    provider = TracerProvider(resource=Resource.create({"service.name": "sdk-client"}))
    provider.add_span_processor(SimpleSpanProcessor(_CLIENT_SPANS))
    trace.set_tracer_provider(provider)
    return _CLIENT_SPANS


@pytest.fixture
def client_spans(_client_provider: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    _client_provider.clear()
    yield _client_provider
    _client_provider.clear()


@pytest.fixture(autouse=True)
def _quick_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans leave the gateway's batch processor within 50 ms (the SDK's default is 5 s)."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")


@pytest.fixture
async def collector(aiohttp_server: Any) -> tuple[Collector, str]:
    """An OTLP/HTTP receiver and its base URL (the gateway adds /v1/traces)."""
    received = Collector()
    server = await aiohttp_server(received.http_app())
    return received, str(server.make_url("/")).rstrip("/")


@pytest.fixture
async def traced_backend(collector: tuple[Collector, str]) -> AsyncIterator[RunningBackend]:
    """The SDK backend exporting its own spans to `collector`, over HTTP."""
    backend = await start_http_backend("traced", script=BACKEND,
                                       env={"TRACED_BACKEND_OTLP": collector[1] + "/v1/traces"})
    yield backend
    await backend.stop()
