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

REQUEST_ID = web.RequestKey[str]("request_id")
PRINCIPAL = web.RequestKey["Principal"]("principal")
TENANT = web.RequestKey["TenantConfig"]("tenant")
CONTEXT = web.RequestKey["RequestContext"]("context")
