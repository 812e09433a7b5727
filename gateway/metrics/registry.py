"""The gateway's Prometheus metrics: their definitions, bounded labels and the hooks that update them.

Every metric of the DESIGN contract lives on `Metrics`, which the app creates with its own
`CollectorRegistry` (never the process-wide default) and passes to the components that
report. Label values are bounded: tenants and backends come from the config, methods from
`spec.KNOWN_METHODS`, tools from the current catalogue; anything else is `other`.

Hot-path metrics go through a batch (see `batch`); state gauges are prometheus-client
gauges set when their owner reports a change: the session store its count, readiness its
verdict, the breaker its state, the catalogue its snapshots. Nothing is pulled at scrape time
except the catalogue's age, which is computed from the pushed fetch times.

Multiprocess mode (`--workers N`): when PROMETHEUS_MULTIPROC_DIR is set *before*
prometheus_client is first imported, values live in per-process files and `/metrics`
aggregates them; gauges say how to combine workers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import structlog
from prometheus_client import CollectorRegistry, Gauge, values

from gateway.config import Config
from gateway.metrics.age import CatalogueAge
from gateway.metrics.batch import Batch, Deferred, Family, Totals
from gateway.protocol import spec
from gateway.protocol.capabilities import RELAYED_METHODS
from gateway.protocol.errors import FailureReason

log = structlog.get_logger("gateway.metrics")

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's switch for multiprocess mode (read when it is first imported)."""

OTHER = "other"
"""The label value for anything outside the bounded set (unknown tenant, method, tool)."""

NO_METHOD = "none"
"""`method` of a request refused before its JSON-RPC method was read (401, 429, bad body)."""

BATCH = "batch"
"""`method` of a JSON-RPC batch (2025-03-26 clients); its items are counted as tool calls."""

MAX_AUTH_REASONS = 32
"""Auth failure reasons come from code, but a cap keeps a bug from exploding the series."""

CLIENT_REQUEST_OUTCOMES = frozenset({"ok", "error", "undeclared", "timeout", "unreachable"})
"""How a relayed request ended: the client's result or error; refused as undeclared; no answer in time;
the client could not be reached."""

SERVER_ERROR_OUTCOMES = frozenset({"error", *FailureReason}) - {FailureReason.UNAUTHORIZED}
"""The gateway's or a backend's failures, not the client's or tool's (`unauthorized`: mostly a user yet to connect)."""

REQUESTS = Family("mcpgw_requests_total", "MCP requests by JSON-RPC method, tenant and outcome.",
                  ("method", "tenant", "outcome"))
REQUEST_DURATION = Family("mcpgw_request_duration_seconds", "Time to answer an MCP request, as the gateway saw it.",
                          ("method", "tenant"), "histogram")
TOOL_CALLS = Family("mcpgw_tool_calls_total", "tools/call requests that named a catalogue tool.",
                    ("tenant", "backend", "tool", "outcome"))
TOOL_CALL_DURATION = Family("mcpgw_tool_call_duration_seconds",
                            "Time to answer a tools/call, validation and backend included.", ("backend", "tool"),
                            "histogram")
UPSTREAM_DURATION = Family("mcpgw_upstream_request_duration_seconds",
                           "Time a backend took to answer one request from the gateway.", ("backend", "method"),
                           "histogram")
CATALOGUE_REFRESH = Family("mcpgw_catalogue_refresh_total", "Catalogue refreshes of one backend.",
                           ("backend", "outcome"))
CATALOGUE_CACHE = Family("mcpgw_catalogue_cache_total", "Tenant catalogue view lookups.", ("result",))
RATE_LIMITED = Family("mcpgw_rate_limited_total", "Requests refused by the tenant's rate limit.", ("tenant",))
AUTH_FAILURES = Family("mcpgw_auth_failures_total", "Requests refused by authentication.", ("reason",))
CLIENT_REQUESTS = Family("mcpgw_client_requests_total",
                         "Backend requests (sampling, elicitation, roots) relayed to the client of a call, "
                         "by outcome.", ("kind", "outcome"))
INFLIGHT = Family("mcpgw_inflight_requests", "MCP requests being answered now.", (), "gauge", "livesum")
BACKEND_RESTARTS = Family("mcpgw_backend_restarts_total", "Times a stdio backend's process was started again "
                          "after it ended.", ("backend",))
CONFIG_RELOADS = Family("mcpgw_config_reloads_total", "Config reloads (SIGHUP, POST /admin/reload) by outcome.",
                        ("outcome",))
RELOAD_OUTCOMES = ("applied", "rejected")
POLICY_DENIED = Family("mcpgw_policy_denied_total", "Calls refused by policy rules, by why: a deny rule, the "
                       "tenant's default, a condition, an argument limit.", ("tenant", "reason"))
DENIAL_REASONS = frozenset({"rule", "default", "condition", "arguments"})
TRACE_SPANS = Family("mcpgw_trace_spans_total", "Spans the trace collector took (tracing on).", ())
TRACE_SPANS_DROPPED = Family("mcpgw_trace_spans_dropped_total", "Spans lost (tracing on): queue_full, the export "
                             "queue had no room; export_failed, the collector did not take them.", ("reason",))
SPAN_DROP_REASONS = ("queue_full", "export_failed")
AUDIT_DROPPED = Family("mcpgw_audit_dropped_total", "Audit records lost (audit.policy drop): the sink's queue had "
                       "no room.", ("sink",))
AUDIT_SINKS = ("file", "redis", "stdout")
HOT_FAMILIES = (REQUESTS, REQUEST_DURATION, TOOL_CALLS, TOOL_CALL_DURATION, UPSTREAM_DURATION, CATALOGUE_REFRESH,
                CATALOGUE_CACHE, RATE_LIMITED, AUTH_FAILURES, CLIENT_REQUESTS, INFLIGHT, BACKEND_RESTARTS,
                CONFIG_RELOADS, POLICY_DENIED, TRACE_SPANS, TRACE_SPANS_DROPPED, AUDIT_DROPPED)
"""The metrics updated per request (or often), batched; the state gauges are on `Metrics`."""


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class CallReport(Protocol):
    """What the dispatcher reports about one request (a RequestContext has these)."""

    @property
    def tenant(self) -> _Named: ...
    @property
    def backend(self) -> str | None: ...
    @property
    def tool(self) -> str | None: ...
    @property
    def outcome(self) -> str: ...
    @property
    def request_id(self) -> str: ...
    @property
    def traceparent(self) -> str | None: ...


class SnapshotReport(Protocol):
    """One backend's catalogue snapshot as the catalogue reports it: status ok, stale or down."""

    @property
    def backend(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def fetched_at(self) -> float: ...


class _ToolReport(Protocol):
    @property
    def backend(self) -> str: ...


class CatalogueReport(Protocol):
    """A catalogue version as the catalogue reports it: its tools by exposed name, and each tool's backend."""

    @property
    def by_name(self) -> Mapping[str, Any]: ...
    @property
    def entries(self) -> Sequence[_ToolReport]: ...


class Metrics:
    """The gateway's metrics on one registry, and the hooks that update them."""

    def __init__(self, *, registry: CollectorRegistry, tenants: Iterable[str], backends: Iterable[str],
                 multiprocess_dir: str | None = None, clock: Callable[[], float] = time.time) -> None:
        self.registry = registry
        self.multiprocess_dir = multiprocess_dir
        self._labels(tenants, backends)
        self._tools: Mapping[str, Any] = {}
        self._fetched_at: dict[str, float] = {}
        self.clock = clock
        self.age = CatalogueAge(self._fetched_at, clock)
        self._methods = frozenset({*spec.KNOWN_METHODS, BATCH})
        self._auth_reasons: set[str] = set()
        self._batch = self._new_batch(registry)
        self._define_gauges(registry)
        registry.register(self.age)
        self._start_series()

    def _labels(self, tenants: Iterable[str], backends: Iterable[str]) -> None:
        self.tenants = frozenset(tenants)
        self.backends = tuple(backends)
        self._backend_set = frozenset(self.backends)

    def reconfigure(self, config: Config) -> None:
        """A reload: tenants and backends of the new config become label values (their series start at 0)."""
        known = self._backend_set
        self._labels(config.tenants, [b.name for b in config.backends])
        for tenant in self.tenants:
            self._batch.counts[(RATE_LIMITED, tenant)] += 0
        for backend in self._backend_set - known:
            self._start_backend(backend)

    @classmethod
    def for_config(cls, config: Config, registry: CollectorRegistry) -> Metrics:
        return cls(registry=registry, tenants=config.tenants, backends=[b.name for b in config.backends],
                   multiprocess_dir=multiprocess_dir_from_env())

    def _new_batch(self, registry: CollectorRegistry) -> Batch:
        if self.multiprocess_dir:
            return Deferred(HOT_FAMILIES, registry)
        totals = Totals(HOT_FAMILIES)
        registry.register(totals)
        return totals

    def _define_gauges(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, doc: str, labels: tuple[str, ...], mode: str) -> Gauge:
            return Gauge(name, doc, labels, registry=registry, multiprocess_mode=mode)  # type: ignore[arg-type]

        # Multiprocess modes: state seen by every worker takes the freshest report; sessions add
        # up across workers; a circuit open in any worker counts.
        self.backend_up = gauge("mcpgw_backend_up", "1 when the backend answered its last tools/list.",
                                ("backend",), "livemostrecent")
        self.circuit_open = gauge("mcpgw_circuit_open", "1 while the backend's circuit breaker is open.",
                                  ("backend",), "livemax")
        self.catalogue_tools = gauge("mcpgw_catalogue_tools", "Tools the backend contributes to the catalogue.",
                                     ("backend",), "livemostrecent")
        self.sessions_active = gauge("mcpgw_sessions_active", "Open MCP sessions.", (), "livesum")
        self.ready = gauge("mcpgw_ready", "1 while /readyz would answer 200.", (), "livemostrecent")
        # livemin: one worker cut off from Redis shows as 0 (the memory store is always up).
        self.store_up = gauge("mcpgw_store_up", "1 while the shared store (Redis) answers.", (), "livemin")
        self.last_reload = gauge("mcpgw_config_last_reload_success_timestamp_seconds",
                                 "When the config in force was loaded (start or reload), in Unix seconds.",
                                 (), "livemax")

    def _start_series(self) -> None:
        """Series exist from the start, so rate() and alerts see zeros."""
        counts = self._batch.counts
        for tenant in (*self.tenants, OTHER):
            counts[(RATE_LIMITED, tenant)] += 0
        counts[(CATALOGUE_CACHE, "hit")] += 0
        counts[(CATALOGUE_CACHE, "miss")] += 0
        counts[(INFLIGHT,)] += 0
        for kind in RELAYED_METHODS:
            counts[(CLIENT_REQUESTS, kind, "ok")] += 0
        for outcome in RELOAD_OUTCOMES:
            counts[(CONFIG_RELOADS, outcome)] += 0
        counts[(TRACE_SPANS,)] += 0
        for reason in SPAN_DROP_REASONS:
            counts[(TRACE_SPANS_DROPPED, reason)] += 0
        for sink in AUDIT_SINKS:
            counts[(AUDIT_DROPPED, sink)] += 0
        for backend in self.backends:
            self._start_backend(backend)
        self.ready.set(0)
        self.store_up.set(1)
        self.last_reload.set(self.clock())

    def _start_backend(self, backend: str) -> None:
        self._batch.counts[(BACKEND_RESTARTS, backend)] += 0
        self.backend_up.labels(backend).set(0)
        self.circuit_open.labels(backend).set(0)
        self.catalogue_tools.labels(backend).set(0)

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
        self._batch.counts[(REQUESTS, method, tenant, outcome)] += 1
        self._batch.observe((REQUEST_DURATION, method, tenant), seconds, request_id, traceparent)

    def dispatched(self, method: str | None, ctx: CallReport, seconds: float) -> None:
        """The dispatcher answered one JSON-RPC request; a tools/call that resolved a tool is counted."""
        if method != spec.TOOLS_CALL or ctx.backend is None or ctx.tool is None:
            return
        backend, tool = self.backend_label(ctx.backend), self.tool_label(ctx.tool)
        self._batch.counts[(TOOL_CALLS, self.tenant_label(ctx.tenant.name), backend, tool, ctx.outcome)] += 1
        self._batch.observe((TOOL_CALL_DURATION, backend, tool), seconds, ctx.request_id, ctx.traceparent)

    def upstream_done(self, backend: str, method: str, seconds: float) -> None:
        self._batch.observe((UPSTREAM_DURATION, self.backend_label(backend), self.method_label(method)), seconds)

    def client_request(self, method: str, outcome: str) -> None:
        """A backend's request relayed to a client (or refused): `outcome` is one of CLIENT_REQUEST_OUTCOMES."""
        kind = method if method in RELAYED_METHODS else OTHER
        self._batch.counts[(CLIENT_REQUESTS, kind, outcome if outcome in CLIENT_REQUEST_OUTCOMES else OTHER)] += 1

    def cache_lookup(self, hit: bool) -> None:
        self._batch.counts[(CATALOGUE_CACHE, "hit" if hit else "miss")] += 1

    def auth_failed(self, reason: str) -> None:
        if reason not in self._auth_reasons:
            if len(self._auth_reasons) >= MAX_AUTH_REASONS:
                reason = OTHER
            self._auth_reasons.add(reason)
        self._batch.counts[(AUTH_FAILURES, reason)] += 1

    def policy_denied(self, tenant: str | None, reason: str) -> None:
        """A call refused by policy; `reason` is one of DENIAL_REASONS (no subject, no tool: bounded labels)."""
        label = reason if reason in DENIAL_REASONS else OTHER
        self._batch.counts[(POLICY_DENIED, self.tenant_label(tenant), label)] += 1

    def rate_limit_hit(self, tenant: str | None) -> None:
        self._batch.counts[(RATE_LIMITED, self.tenant_label(tenant))] += 1

    def backend_restarted(self, backend: str) -> None:
        """A stdio backend's process ended and is being started again."""
        self._batch.counts[(BACKEND_RESTARTS, self.backend_label(backend))] += 1

    def config_reloaded(self, applied: bool) -> None:
        """A reload ended: applied (the new config serves from now on) or rejected (the old one goes on)."""
        self._batch.counts[(CONFIG_RELOADS, RELOAD_OUTCOMES[0] if applied else RELOAD_OUTCOMES[1])] += 1
        if applied:
            self.last_reload.set(self.clock())

    def spans_exported(self, count: int) -> None:
        """The collector took `count` spans (the tracer hands this over to the loop's thread)."""
        self._batch.counts[(TRACE_SPANS,)] += count

    def spans_dropped(self, reason: str, count: int) -> None:
        """`count` spans were lost, for one of SPAN_DROP_REASONS (on the loop's thread)."""
        self._batch.counts[(TRACE_SPANS_DROPPED, reason if reason in SPAN_DROP_REASONS else OTHER)] += count

    def audit_dropped(self, sink: str, count: int = 1) -> None:
        """`count` audit records did not reach `sink` (one of AUDIT_SINKS): its queue was full."""
        self._batch.counts[(AUDIT_DROPPED, sink if sink in AUDIT_SINKS else OTHER)] += count

    def inflight_add(self, amount: int) -> None:
        self._batch.counts[(INFLIGHT,)] += amount

    def flush(self) -> None:
        """Hand pending hot-path updates to prometheus-client (multiprocess mode; a no-op otherwise)."""
        self._batch.flush()

    @property
    def running_totals(self) -> Totals | None:
        """The hot-path totals themselves (the status page's traffic window reads them); None in
        multiprocess mode, where only a collection of the workers' files adds them up."""
        return self._batch if isinstance(self._batch, Totals) else None

    # ---------------------------------------------------------------- state, pushed by its owners

    def catalogue_refreshed(self, snapshot: SnapshotReport) -> None:
        """This replica refreshed a backend (ok, stale or down): count it, then follow its state."""
        outcome = "ok" if snapshot.status == "ok" else "error"
        self._batch.counts[(CATALOGUE_REFRESH, self.backend_label(snapshot.backend), outcome)] += 1
        self.snapshot_adopted(snapshot)

    def snapshot_adopted(self, snapshot: SnapshotReport) -> None:
        """A backend snapshot is installed (refreshed here or by another replica): up/down and age."""
        self.backend_up.labels(self.backend_label(snapshot.backend)).set(1 if snapshot.status == "ok" else 0)
        if snapshot.fetched_at > 0:
            self._fetched_at[snapshot.backend] = snapshot.fetched_at

    async def catalogue_changed(self, old: CatalogueReport, new: CatalogueReport) -> None:
        """A new catalogue version: tool labels and per-backend tool counts follow it."""
        self._tools = new.by_name
        counts = dict.fromkeys(self.backends, 0)
        for entry in new.entries:
            counts[entry.backend] = counts.get(entry.backend, 0) + 1
        for backend, count in counts.items():
            self.catalogue_tools.labels(self.backend_label(backend)).set(count)

    def circuit_observed(self, backend: str, state: str) -> None:
        """The breaker's state (closed, open, half_open), on each transition."""
        self.circuit_open.labels(self.backend_label(backend)).set(1 if state == "open" else 0)

    def sessions_observed(self, count: int) -> None:
        """The session store's count, whenever it changes."""
        self.sessions_active.set(count)

    def ready_observed(self, ready: bool) -> None:
        """Readiness's verdict, whenever it is evaluated."""
        self.ready.set(1 if ready else 0)

    def store_observed(self, up: bool) -> None:
        """The shared store went down or came back (gateway.store.health calls it on each transition)."""
        self.store_up.set(1 if up else 0)


def multiprocess_dir_from_env() -> str | None:
    """The multiprocess directory, when prometheus-client really runs in multiprocess mode."""
    path = os.environ.get(MULTIPROC_ENV)
    if not path:
        return None
    if values.ValueClass is values.MutexValue:
        # Set after prometheus_client was imported: values stay in this process, so serve them as such.
        log.warning("metrics_multiprocess_unavailable", hint=f"set {MULTIPROC_ENV} before prometheus_client loads")
        return None
    return path
