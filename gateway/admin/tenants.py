"""`GET /admin/tenants`: each tenant's use of its budgets now, and its traffic over the asked window.

Sessions, GET streams, listen streams and requests in flight are this process's (each budget is
enforced per process); the traffic figures are every worker's, as `/metrics` shows them.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway import keys
from gateway.admin.access import admin_json, require_admin, window_seconds
from gateway.config import TenantConfig


async def tenants(request: web.Request) -> web.Response:
    await require_admin(request)
    traffic = request.app[keys.TRAFFIC]
    seconds = window_seconds(request, traffic)
    configured = request.app[keys.EXCHANGE].tenants  # the current ones: a reload may have changed them
    figures = await traffic.tenants(seconds, configured)
    rows = [{**_use(request, tenant), "traffic": {"window_seconds": seconds, **figures[name]}}
            for name, tenant in configured.items()]
    return admin_json({"tenants": rows})


def _use(request: web.Request, tenant: TenantConfig) -> dict[str, Any]:
    """What the tenant holds now against its limits, and its rate limit."""
    app, name = request.app, tenant.name
    limits, rate = tenant.limits, tenant.rate_limit
    return {
        "name": name,
        "backends": list(tenant.backends),
        "sessions": app[keys.SESSIONS].count_of(name),
        "get_streams": app[keys.STREAMS].open_count(name),
        "listen_streams": app[keys.EXCHANGE].dispatcher.listeners.count_of(name),
        "in_flight": app[keys.EXCHANGE].busy.get(name, 0),
        "limits": {"sessions": limits.sessions, "streams": limits.streams, "in_flight": limits.in_flight,
                   "batch_size": limits.batch_size},
        "rate_limit": None if rate is None else {"requests_per_second": rate.requests_per_second,
                                                 "burst": rate.burst},
    }
