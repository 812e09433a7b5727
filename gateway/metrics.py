"""Prometheus metrics: one registry per app, bounded labels, cheap updates on the hot path.

Every metric of the DESIGN contract lives on `Metrics`, which the app creates with its own
`CollectorRegistry` (never the process-wide default) and passes to the components that
report. Label values are bounded: tenants and backends come from the config, methods from
`spec.KNOWN_METHODS`, tools from the current catalogue; anything else is `other`.

Hot-path updates add up in plain numbers (`_Pending`: a count or a sum and bucket counts per
metric and label values) and reach prometheus-client at the next flush: a request costs a dict
update per metric, not `labels()` plus a lock per value (and, in multiprocess mode, a write to
the shared file). Every read of the registry flushes first (`_FlushFirst`), so single-process
scrapes are exact; in multiprocess mode each worker also flushes every FLUSH_SECONDS, so a
scrape shows the other workers at most that late. Updates come from the event loop's thread only.

Multiprocess mode (`--workers N`): when PROMETHEUS_MULTIPROC_DIR is set *before*
prometheus_client is first imported, values live in per-process files and `/metrics`
aggregates them with `MultiProcessCollector`; gauges say how to combine workers.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from gateway import keys
from gateway.catalogue.merge import BackendSnapshot, Catalogue
from gateway.config import Config
from gateway.health import readiness_reasons
from gateway.protocol import spec

if TYPE_CHECKING:
    from gateway.tenancy import RequestContext

log = structlog.get_logger("gateway.metrics")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's switch for multiprocess mode (read when it is first imported)."""

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 30.0)
"""Half a millisecond (the gateway's own overhead) up to 30 s (the default backend timeout)."""

OTHER = "other"
"""The label value for anything outside the bounded set (unknown tenant, method, tool)."""

NO_METHOD = "none"
"""`method` of a request refused before its JSON-RPC method was read (401, 429, bad body)."""

BATCH = "batch"
"""`method` of a JSON-RPC batch (2025-03-26 clients); its items are counted as tool calls."""

MAX_AUTH_REASONS = 32
"""Auth failure reasons come from code, but a cap keeps a bug from exploding the series."""

BACKEND_STATES = {"ok": "up", "stale": "stale", "down": "down"}
"""Snapshot status → the state word of `backend_state_changed` lines (stale: serving old tools)."""

EXEMPLAR_INTERVAL = 1.0
"""Seconds between exemplars of one histogram bucket (see _Pending)."""
FLUSH_SECONDS = 1.0
"""In multiprocess mode, how often a worker hands its pending updates to the shared files."""
EXEMPLAR_ROOM = 128
"""OpenMetrics limit on an exemplar's label names and values, in characters."""

SERVER_ERROR_OUTCOMES = frozenset({"error", "timeout", "unavailable", "circuit_open", "overloaded",
                                   "bad_response"})
"""Outcomes that are the gateway's or a backend's failure (not the client's, not the tool's)."""


class _Pending:
    """Updates not yet handed to prometheus-client, keyed by (metric, *label values).

    Counts are added up; an observation adds to its series' sum and bucket count, except the
    first per bucket per EXEMPLAR_INTERVAL with a request id, which goes straight to
    prometheus-client with its exemplar (the registry keeps only the latest of each bucket and
    scrapes come seconds apart, so more would cost without showing anything).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.counts: collections.Counter[tuple[Any, ...]] = collections.Counter()
        self.timings: dict[tuple[Any, ...], list[float]] = {}  # sum, then one count per bucket (+Inf last)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._next_exemplar: dict[tuple[tuple[Any, ...], int], float] = {}
        self._clock = clock

    def observe(self, key: tuple[Any, ...], seconds: float, request_id: str | None = None,
                traceparent: str | None = None) -> None:
        bucket = bisect.bisect_left(LATENCY_BUCKETS, seconds)  # the first bound >= seconds, as prometheus has it
        if request_id is not None:
            now = self._clock()
            if now >= self._next_exemplar.get((key, bucket), 0.0):
                self._next_exemplar[(key, bucket)] = now + EXEMPLAR_INTERVAL
                self.child(key).observe(seconds, exemplar(request_id, traceparent))
                return
        slots = self.timings.get(key)
        if slots is None:
            slots = self.timings[key] = [0.0] * (len(LATENCY_BUCKETS) + 2)
        slots[0] += seconds
        slots[bucket + 1] += 1

    def child(self, key: tuple[Any, ...]) -> Any:
        """The prometheus-client child of (metric, *label values), made once (`labels()` takes a lock)."""
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = key[0].labels(*key[1:])
        return child

    def flush(self) -> None:
        counts, self.counts = self.counts, collections.Counter()
        timings, self.timings = self.timings, {}
        for key, count in counts.items():
            self.child(key).inc(count)
        for key, slots in timings.items():
            # prometheus-client has no public way to add many observations at once; its histogram
            # child keeps one value per bucket (`_buckets`, +Inf last) and the sum (`_sum`).
            child = self.child(key)
            child._sum.inc(slots[0])
            for value, count in zip(child._buckets, slots[1:], strict=True):
                if count:
                    value.inc(count)


class _FlushFirst:
    """A collector registered before every metric: any read of the registry flushes first."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        self._flush()
        return []


class _CatalogueAge:
    """`mcpgw_catalogue_age_seconds`, computed at scrape time from each snapshot's fetched_at."""

    def __init__(self, fetched_at: Mapping[str, float], clock: Callable[[], float]) -> None:
        self.fetched_at = fetched_at
        self.clock = clock

    def describe(self) -> Iterable[Metric]:
        return [self._family()]

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        now = self.clock()
        for backend, fetched in self.fetched_at.items():
            family.add_metric([backend], max(0.0, now - fetched))
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily("mcpgw_catalogue_age_seconds",
                                 "Seconds since the backend's tools were last fetched successfully.",
                                 labels=["backend"])


class Metrics:
    """The gateway's metrics on one registry, and the hooks that update them."""

    def __init__(self, *, registry: CollectorRegistry, tenants: Iterable[str], backends: Iterable[str],
                 multiprocess_dir: str | None = None, clock: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.multiprocess_dir = multiprocess_dir
        self.tenants = frozenset(tenants)
        self.backends = tuple(backends)
        self._backend_set = frozenset(self.backends)
        self._tools: Mapping[str, Any] = {}
        self._fetched_at: dict[str, float] = {}
        self._age = _CatalogueAge(self._fetched_at, clock)
        self._backend_states: dict[str, str] = {}
        self._pending = _Pending(time.monotonic)
        self._methods = frozenset({*spec.KNOWN_METHODS, BATCH})
        self._auth_reasons: set[str] = set()
        self._inflight_now = 0
        registry.register(_FlushFirst(self.flush))  # before the metrics, so it runs before they are read
        self._define(registry)
        registry.register(self._age)
        self._resolve_children()

    @classmethod
    def for_config(cls, config: Config, registry: CollectorRegistry) -> Metrics:
        return cls(registry=registry, tenants=config.tenants, backends=[b.name for b in config.backends],
                   multiprocess_dir=multiprocess_dir_from_env())

    def _define(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def histogram(name: str, doc: str, labels: tuple[str, ...]) -> Histogram:
            return Histogram(name, doc, labels, registry=registry, buckets=LATENCY_BUCKETS)

        def gauge(name: str, doc: str, labels: tuple[str, ...], mode: str) -> Gauge:
            return Gauge(name, doc, labels, registry=registry, multiprocess_mode=mode)  # type: ignore[arg-type]

        self.requests = counter("mcpgw_requests_total", "MCP requests by JSON-RPC method, tenant and outcome.",
                                ("method", "tenant", "outcome"))
        self.request_duration = histogram("mcpgw_request_duration_seconds",
                                          "Time to answer an MCP request, as the gateway saw it.", ("method", "tenant"))
        self.tool_calls = counter("mcpgw_tool_calls_total", "tools/call requests that named a catalogue tool.",
                                  ("tenant", "backend", "tool", "outcome"))
        self.tool_call_duration = histogram("mcpgw_tool_call_duration_seconds",
                                            "Time to answer a tools/call, validation and backend included.",
                                            ("backend", "tool"))
        self.upstream_duration = histogram("mcpgw_upstream_request_duration_seconds",
                                           "Time a backend took to answer one request from the gateway.",
                                           ("backend", "method"))
        self.catalogue_refresh = counter("mcpgw_catalogue_refresh_total", "Catalogue refreshes of one backend.",
                                         ("backend", "outcome"))
        self.catalogue_cache = counter("mcpgw_catalogue_cache_total", "Tenant catalogue view lookups.", ("result",))
        self.rate_limited = counter("mcpgw_rate_limited_total", "Requests refused by the tenant's rate limit.",
                                    ("tenant",))
        self.auth_failures = counter("mcpgw_auth_failures_total", "Requests refused by authentication.", ("reason",))
        # Multiprocess modes: state seen by every worker takes the freshest report; in-flight
        # work and sessions add up across workers; a circuit open in any worker counts.
        self.backend_up = gauge("mcpgw_backend_up", "1 when the backend answered its last tools/list.",
                                ("backend",), "livemostrecent")
        self.circuit_open = gauge("mcpgw_circuit_open", "1 while the backend's circuit breaker is open.",
                                  ("backend",), "livemax")
        self.catalogue_tools = gauge("mcpgw_catalogue_tools", "Tools the backend contributes to the catalogue.",
                                     ("backend",), "livemostrecent")
        self.inflight = gauge("mcpgw_inflight_requests", "MCP requests being answered now.", (), "livesum")
        self.sessions_active = gauge("mcpgw_sessions_active", "Open MCP sessions.", (), "livesum")
        self.ready = gauge("mcpgw_ready", "1 while /readyz would answer 200.", (), "livemostrecent")
        # livemin: one worker cut off from Redis shows as 0 (the memory store is always up).
        self.store_up = gauge("mcpgw_store_up", "1 while the shared store (Redis) answers.", (), "livemin")

    def _resolve_children(self) -> None:
        for tenant in (*self.tenants, OTHER):  # series exist from the start, so rate() and alerts see zeros
            self.rate_limited.labels(tenant)
        self.catalogue_cache.labels("hit")
        self.catalogue_cache.labels("miss")
        for backend in self.backends:
            self.backend_up.labels(backend).set(0)
            self.circuit_open.labels(backend).set(0)
            self.catalogue_tools.labels(backend).set(0)
        self.ready.set(0)
        self.store_up.set(1)

    # ---------------------------------------------------------------- labels

    def tenant_label(self, tenant: str | None) -> str:
        return tenant if tenant in self.tenants else OTHER

    def method_label(self, method: str | None) -> str:
        if method is None:
            return NO_METHOD
        return method if method in self._methods else OTHER

    def backend_label(self, backend: str) -> str:
        return backend if backend in self._backend_set else OTHER

    def tool_label(self, tool: str) -> str:
        return tool if tool in self._tools else OTHER

    # ---------------------------------------------------------------- hot path

    def request_done(self, *, method: str | None, tenant: str | None, outcome: str, seconds: float,
                     request_id: str | None = None, traceparent: str | None = None) -> None:
        """One MCP request (a POST) answered, refused or failed."""
        method, tenant = self.method_label(method), self.tenant_label(tenant)
        self._pending.counts[(self.requests, method, tenant, outcome)] += 1
        self._pending.observe((self.request_duration, method, tenant), seconds, request_id, traceparent)

    def dispatched(self, method: str | None, ctx: RequestContext, seconds: float) -> None:
        """The dispatcher answered one JSON-RPC request; a tools/call that resolved a tool is counted."""
        if method != spec.TOOLS_CALL or ctx.backend is None or ctx.tool is None:
            return
        backend, tool = self.backend_label(ctx.backend), self.tool_label(ctx.tool)
        self._pending.counts[(self.tool_calls, self.tenant_label(ctx.tenant.name), backend, tool, ctx.outcome)] += 1
        self._pending.observe((self.tool_call_duration, backend, tool), seconds, ctx.request_id, ctx.traceparent)

    def upstream_done(self, backend: str, method: str, seconds: float) -> None:
        key = (self.upstream_duration, self.backend_label(backend), self.method_label(method))
        self._pending.observe(key, seconds)

    def cache_lookup(self, hit: bool) -> None:
        self._pending.counts[(self.catalogue_cache, "hit" if hit else "miss")] += 1

    def auth_failed(self, reason: str) -> None:
        if reason not in self._auth_reasons:
            if len(self._auth_reasons) >= MAX_AUTH_REASONS:
                reason = OTHER
            self._auth_reasons.add(reason)
        self._pending.counts[(self.auth_failures, reason)] += 1

    def rate_limit_hit(self, tenant: str | None) -> None:
        self._pending.counts[(self.rate_limited, self.tenant_label(tenant))] += 1

    def inflight_add(self, amount: int) -> None:
        self._inflight_now += amount  # the gauge is set at the flush

    def flush(self) -> None:
        """Hand the pending hot-path updates to prometheus-client (its values, or the worker's file)."""
        self._pending.flush()
        self.inflight.set(self._inflight_now)

    # ---------------------------------------------------------------- state

    def catalogue_refreshed(self, snapshot: BackendSnapshot) -> None:
        """This replica refreshed a backend (ok, stale or down): count it, then follow its state."""
        outcome = "ok" if snapshot.status == "ok" else "error"
        self._pending.counts[(self.catalogue_refresh, self.backend_label(snapshot.backend), outcome)] += 1
        self.snapshot_adopted(snapshot)

    def snapshot_adopted(self, snapshot: BackendSnapshot) -> None:
        """A backend snapshot is installed (refreshed here or by another replica): up/down, age, log line."""
        backend = snapshot.backend
        self.backend_up.labels(self.backend_label(backend)).set(1 if snapshot.status == "ok" else 0)
        if snapshot.fetched_at > 0:
            self._fetched_at[backend] = snapshot.fetched_at
        self._state_changed(backend, BACKEND_STATES.get(snapshot.status, snapshot.status))

    async def catalogue_changed(self, old: Catalogue, new: Catalogue) -> None:
        """A new catalogue version: tool labels and per-backend tool counts follow it."""
        self._tools = new.by_name
        counts = dict.fromkeys(self.backends, 0)
        for entry in new.entries:
            counts[entry.backend] = counts.get(entry.backend, 0) + 1
        for backend, count in counts.items():
            self.catalogue_tools.labels(self.backend_label(backend)).set(count)

    def circuit_observed(self, backend: str, state: str) -> None:
        """The breaker's state (closed, open, half_open); routing logs the transitions themselves."""
        self.circuit_open.labels(self.backend_label(backend)).set(1 if state == "open" else 0)

    def sessions_observed(self, count: int) -> None:
        self.sessions_active.set(count)

    def ready_observed(self, ready: bool) -> None:
        self.ready.set(1 if ready else 0)

    def store_observed(self, up: bool) -> None:
        """The shared store went down or came back (gateway.store.health calls it on each transition)."""
        self.store_up.set(1 if up else 0)

    def _state_changed(self, backend: str, state: str) -> None:
        """One `backend_state_changed` line per transition (up, stale, down); the first `up` too."""
        previous = self._backend_states.get(backend)
        if previous == state:
            return
        self._backend_states[backend] = state
        emit = log.info if state == "up" else log.warning
        emit("backend_state_changed", backend=backend, state=state, previous=previous)

    # ---------------------------------------------------------------- exposition

    def render(self, accept: str | None) -> tuple[bytes, str]:
        """The scrape body and its content type (OpenMetrics, with exemplars, when asked for)."""
        encoder, content_type = choose_encoder(accept or "")
        self.flush()  # the multiprocess registry below has no _FlushFirst of this worker
        return encoder(self._exposed()), content_type

    def _exposed(self) -> CollectorRegistry:
        if not self.multiprocess_dir:
            return self.registry
        # Every worker's files, plus this worker's scrape-time collectors.
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self.multiprocess_dir)
        registry.register(self._age)
        return registry


def exemplar(request_id: str, traceparent: str | None) -> dict[str, str]:
    """Exemplar labels linking a latency sample to its request (OpenMetrics caps them at 128 chars)."""
    labels = {"trace_id": traceparent[3:35]} if traceparent else {}
    if len(request_id) <= EXEMPLAR_ROOM - sum(len(k) + len(v) for k, v in labels.items()) - len("request_id"):
        labels["request_id"] = request_id
    return labels


def multiprocess_dir_from_env() -> str | None:
    """The multiprocess directory, when prometheus-client really runs in multiprocess mode."""
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        return None
    if not getattr(values.ValueClass, "_multiprocess", False):
        # Set after prometheus_client was imported: values stay in this process, so serve them as such.
        log.warning("metrics_multiprocess_unavailable", hint=f"set {MULTIPROC_ENV} before prometheus_client loads")
        return None
    return path


# ---------------------------------------------------------------- the /metrics endpoint


def setup_metrics(app: web.Application, metrics: Metrics) -> None:
    """Serve /metrics on the main port, or only on `metrics.port` (a second site) when set."""
    app[keys.METRICS] = metrics
    app.cleanup_ctx.append(_flushing(metrics))
    handler = _scrape_handler(app, metrics)
    port = app[keys.CONFIG].metrics.port
    if port is None:
        app.router.add_get("/metrics", handler)
    else:
        app.cleanup_ctx.append(_metrics_site(handler, port))


def _flushing(metrics: Metrics) -> Callable[[web.Application], AsyncIterator[None]]:
    """In multiprocess mode, flush every FLUSH_SECONDS (a scrape may reach another worker) and at the end."""

    async def flushing(app: web.Application) -> AsyncIterator[None]:
        task = asyncio.create_task(_flush_every(metrics, FLUSH_SECONDS)) if metrics.multiprocess_dir else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
            metrics.flush()

    return flushing


async def _flush_every(metrics: Metrics, seconds: float) -> None:
    while True:
        await asyncio.sleep(seconds)
        metrics.flush()


def _scrape_handler(app: web.Application, metrics: Metrics) -> Handler:
    async def scrape(request: web.Request) -> web.Response:
        await _observe_live(app, metrics)
        body, content_type = metrics.render(request.headers.get("Accept"))
        return web.Response(body=body, headers={"Content-Type": content_type})

    return scrape


async def _observe_live(app: web.Application, metrics: Metrics) -> None:
    """State that nothing pushes: readiness, session count, breaker states (this worker's view)."""
    metrics.ready_observed(not await readiness_reasons(app))
    sessions = app.get(keys.SESSIONS)
    if sessions is not None:
        metrics.sessions_observed(sessions.count())
    catalogue = app.get(keys.CATALOGUE)
    if catalogue is not None:
        for backend in metrics.backends:
            metrics.circuit_observed(backend, catalogue.circuit_state(backend))


def _metrics_site(handler: Handler, port: int) -> Callable[[web.Application], AsyncIterator[None]]:
    async def metrics_site(app: web.Application) -> AsyncIterator[None]:
        site_app = web.Application()
        site_app.router.add_get("/metrics", handler)
        runner = web.AppRunner(site_app, access_log=None)
        await runner.setup()
        # Workers share the port like the main one (reuse_port); any of them answers for all.
        reuse = bool(app[keys.METRICS].multiprocess_dir)
        await web.TCPSite(runner, app[keys.CONFIG].server.host, port, reuse_port=reuse).start()
        try:
            yield
        finally:
            await runner.cleanup()

    return metrics_site
