"""Typed keys for everything the app and a request carry (no globals anywhere)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:  # the names in the AppKey strings below
    from gateway.auth.authenticator import Authenticator  # noqa: F401
    from gateway.catalogue.refresher import CatalogueService  # noqa: F401
    from gateway.config import Config, TenantConfig  # noqa: F401
    from gateway.dispatch import Dispatcher  # noqa: F401
    from gateway.health import ReadinessCheck  # noqa: F401
    from gateway.metrics import Metrics  # noqa: F401
    from gateway.ratelimit import RateLimiter  # noqa: F401
    from gateway.tenancy import Principal, RequestContext  # noqa: F401
    from gateway.transport.inflight import InFlight  # noqa: F401
    from gateway.transport.sessions import SessionStore  # noqa: F401
    from gateway.transport.streams import StreamHub  # noqa: F401
    from gateway.upstream.pool import UpstreamPool  # noqa: F401

CONFIG = web.AppKey["Config"]("config")
POOL = web.AppKey["UpstreamPool"]("pool")
CATALOGUE = web.AppKey["CatalogueService"]("catalogue")
DISPATCHER = web.AppKey["Dispatcher"]("dispatcher")
SESSIONS = web.AppKey["SessionStore"]("sessions")
STREAMS = web.AppKey["StreamHub"]("streams")
INFLIGHT = web.AppKey["InFlight"]("inflight")  # requests a client may cancel
AUTHENTICATOR = web.AppKey["Authenticator"]("authenticator")
RATE_LIMITER = web.AppKey["RateLimiter"]("rate_limiter")
METRICS = web.AppKey["Metrics"]("metrics")  # owns the app's CollectorRegistry
READINESS_CHECKS = web.AppKey["list[tuple[str, ReadinessCheck]]"]("readiness_checks")  # health.add_readiness_check

REQUEST_ID = web.RequestKey[str]("request_id")
TRACEPARENT = web.RequestKey[str]("traceparent")  # W3C trace context sent to backends
PRINCIPAL = web.RequestKey["Principal"]("principal")
TENANT = web.RequestKey["TenantConfig"]("tenant")
CONTEXT = web.RequestKey["RequestContext"]("context")
