"""Typed keys for everything the app and a request carry (no globals anywhere)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:  # the names in the AppKey strings below
    from gateway.audit import AuditTrail  # noqa: F401
    from gateway.catalogue.refresher import CatalogueService  # noqa: F401
    from gateway.config import Config  # noqa: F401
    from gateway.health import Readiness  # noqa: F401
    from gateway.metrics import Metrics  # noqa: F401
    from gateway.metrics.window import TrafficWindow  # noqa: F401
    from gateway.oauth.outbound import BackendCredentials  # noqa: F401
    from gateway.store.reloads import ReloadLog  # noqa: F401
    from gateway.store.replicas import Replicas  # noqa: F401
    from gateway.tracing.spans import Tracing  # noqa: F401
    from gateway.transport.exchange import Exchange  # noqa: F401
    from gateway.transport.http.endpoint import McpEndpoint  # noqa: F401
    from gateway.transport.http.streams import StreamHub  # noqa: F401
    from gateway.transport.rounds import Rounds  # noqa: F401
    from gateway.transport.sessions import SessionStore  # noqa: F401
    from gateway.upstream.pool import UpstreamPool  # noqa: F401

CONFIG = web.AppKey["Config"]("config")
POOL = web.AppKey["UpstreamPool"]("pool")
CATALOGUE = web.AppKey["CatalogueService"]("catalogue")
SESSIONS = web.AppKey["SessionStore"]("sessions")
STREAMS = web.AppKey["StreamHub"]("streams")
EXCHANGE = web.AppKey["Exchange"]("exchange")  # the transport-free core the MCP endpoint drives
ENDPOINT = web.AppKey["McpEndpoint"]("endpoint")  # POST/GET/DELETE on server.path; session channels
METRICS = web.AppKey["Metrics"]("metrics")  # owns the app's CollectorRegistry
READINESS = web.AppKey["Readiness"]("readiness")  # gates, checks and draining behind /readyz
ROUNDS = web.AppKey["Rounds"]("rounds")  # 2026 calls held across multi-round trips
TRACING = web.AppKey["Tracing | None"]("tracing")  # the gateway's spans; None with tracing off
TRAFFIC = web.AppKey["TrafficWindow"]("traffic")  # the last minutes of the metrics, for the status page
RELOADS = web.AppKey["ReloadLog"]("reloads")  # config loads and reloads (every replica's, with Redis)
REPLICAS = web.AppKey["Replicas"]("replicas")  # this replica's heartbeat, and the others seen through the store
CREDENTIALS = web.AppKey["BackendCredentials"]("credentials")  # backends' OAuth tokens, users' grants
AUDIT = web.AppKey["AuditTrail | None"]("audit")  # the audit trail; None with auditing off
