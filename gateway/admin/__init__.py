"""The admin endpoints (admin-scope tokens only) and the live status page that reads them.

    access.py     who may call them (require_admin), no-store JSON, the `window` parameter
    backends.py   GET /admin/backends, POST /admin/catalogue/refresh
    tenants.py    GET /admin/tenants
    catalogue.py  GET /admin/catalogue: what one tenant sees, searchable
    status.py     GET /admin/status, /admin/reloads, /admin/replicas
    policy.py     GET /admin/policy/explain: what the rules give one caller
    servers.py    GET /admin/servers: virtual servers' items, and those withdrawn
    pins.py       GET /admin/pins, POST /admin/pins/approve|reject, GET /admin/pins/export: tool pinning
    page.py       GET /admin/: the page (static/), which asks for the token and reads the above

POST /admin/reload lives with the reloader (gateway/reload.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiohttp import web

from gateway import keys
from gateway.admin.access import require_admin
from gateway.admin.backends import backends, refresh_handler
from gateway.admin.catalogue import catalogue
from gateway.admin.page import setup_page_routes
from gateway.admin.pins import setup_pins_routes
from gateway.admin.policy import policy_explain
from gateway.admin.servers import servers
from gateway.admin.status import describe_replica, reloads, replicas, status
from gateway.admin.tenants import tenants
from gateway.metrics.tally import reader
from gateway.metrics.window import TrafficWindow

__all__ = ["describe_replica", "require_admin", "setup_admin_routes"]


def setup_admin_routes(app: web.Application) -> None:
    """The admin JSON endpoints, the status page (unless `admin.status_page` is false), and the
    traffic window they read, sampled from start to shutdown."""
    config = app[keys.CONFIG]
    metrics = app[keys.METRICS]
    app[keys.TRAFFIC] = TrafficWindow(reader(metrics))
    app.router.add_get("/admin/backends", backends)
    app.router.add_get("/admin/policy/explain", policy_explain)
    app.router.add_post("/admin/catalogue/refresh", refresh_handler(config.admin.refresh_interval_seconds))
    app.router.add_get("/admin/tenants", tenants)
    app.router.add_get("/admin/servers", servers)
    app.router.add_get("/admin/catalogue", catalogue)
    app.router.add_get("/admin/status", status)
    app.router.add_get("/admin/reloads", reloads)
    app.router.add_get("/admin/replicas", replicas)
    setup_pins_routes(app)
    if config.admin.status_page:
        setup_page_routes(app)
    app.cleanup_ctx.append(_sampling)


async def _sampling(app: web.Application) -> AsyncIterator[None]:
    task = asyncio.create_task(app[keys.TRAFFIC].run(), name="traffic-window")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
