"""Who may use the admin endpoints, and how their JSON goes out.

A bearer token in the Authorization header (never `?token=`), with the admin scope, naming a
configured tenant. Replies are never cached (they name tenants, backends and callers), and the
window a figure covers is asked for in seconds, within what the traffic window keeps.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway import keys
from gateway.metrics.window import TrafficWindow
from gateway.protocol.errors import BadRequest
from gateway.tenancy import Principal, resolve_tenant
from gateway.transport.credentials import HeaderCredentials
from gateway.transport.requestlog import PRINCIPAL, REQUEST_ID

NO_STORE = {"Cache-Control": "no-store"}
DEFAULT_WINDOW_SECONDS = 300.0
"""The window of the traffic figures when none is asked for: the last five minutes."""


async def require_admin(request: web.Request) -> Principal:
    """401/403 unless the bearer token is an admin's. Keys and tenants are the exchange's: the
    current ones, which a reload may have changed (the admin section itself needs a restart)."""
    config = request.app[keys.CONFIG]
    exchange = request.app[keys.EXCHANGE]
    credentials = HeaderCredentials(request, config)
    principal = request[PRINCIPAL] = await exchange.authenticator.authenticate(credentials, None)
    resolve_tenant(principal, exchange.tenants)  # 403 for a tenant that is not configured
    exchange.authenticator.require_scope(principal, config.admin.scope, credentials)
    return principal


async def audited(request: web.Request, action: str, principal: Principal, outcome: str,
                  detail: dict[str, Any] | None = None) -> None:
    """An admin action's audit record (auditing on): who, which request, how it ended."""
    trail = request.app.get(keys.AUDIT)
    if trail is not None:
        await trail.admin(action, tenant=principal.tenant, subject=principal.subject,
                          request_id=request.get(REQUEST_ID), outcome=outcome, detail=detail)


def admin_json(body: Any, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, headers=NO_STORE)


def window_seconds(request: web.Request, traffic: TrafficWindow) -> float:
    """The `window` query parameter in seconds (default five minutes); 400 unless a number from
    the sampling step up to the history kept."""
    raw = request.query.get("window")
    if raw is None:
        return min(DEFAULT_WINDOW_SECONDS, traffic.keep)
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not traffic.every <= seconds <= traffic.keep:  # NaN fails too
        raise BadRequest(f"Bad Request: window must be a number of seconds from {traffic.every:g} "
                         f"to {traffic.keep:g}")
    return seconds
