"""Typed keys for everything the app and a request carry (no globals anywhere)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    pass

CONFIG = web.AppKey["Config"]("config")
POOL = web.AppKey["UpstreamPool"]("pool")
CATALOGUE = web.AppKey["CatalogueService"]("catalogue")
DISPATCHER = web.AppKey["Dispatcher"]("dispatcher")
SESSIONS = web.AppKey["SessionStore"]("sessions")
STREAMS = web.AppKey["StreamHub"]("streams")
AUTHENTICATOR = web.AppKey["Authenticator"]("authenticator")
RATE_LIMITER = web.AppKey["RateLimiter"]("rate_limiter")
METRICS = web.AppKey["Metrics"]("metrics")  # owns the app's CollectorRegistry
READINESS_CHECKS = web.AppKey["list[tuple[str, ReadinessCheck]]"]("readiness_checks")  # health.add_readiness_check

REQUEST_ID = web.RequestKey[str]("request_id")
TRACEPARENT = web.RequestKey[str]("traceparent")  # W3C trace context sent to backends
PRINCIPAL = web.RequestKey["Principal"]("principal")
TENANT = web.RequestKey["TenantConfig"]("tenant")
CONTEXT = web.RequestKey["RequestContext"]("context")
