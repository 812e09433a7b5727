"""Admin endpoints: a bearer token in the Authorization header (never `?token=`), with the
admin scope, naming a configured tenant. A catalogue refresh asks every backend, so it runs
at most once per `admin.refresh_interval_seconds` (429 with Retry-After in between)."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateway import keys
from gateway.errors import RateLimited
from gateway.tenancy import resolve_tenant
from gateway.transport.credentials import HeaderCredentials
from gateway.transport.requestlog import PRINCIPAL


async def require_admin(request: web.Request) -> None:
    """401/403 unless the bearer token is an admin's. Keys and tenants are the exchange's: the
    current ones, which a reload may have changed (the admin section itself needs a restart)."""
    config = request.app[keys.CONFIG]
    exchange = request.app[keys.EXCHANGE]
    credentials = HeaderCredentials(request, config)
    principal = request[PRINCIPAL] = await exchange.authenticator.authenticate(credentials, None)
    resolve_tenant(principal, exchange.tenants)  # 403 for a tenant that is not configured
    exchange.authenticator.require_scope(principal, config.admin.scope, credentials)


async def backends(request: web.Request) -> web.Response:
    """Each backend's catalogue status, what it offers, collisions and renames."""
    await require_admin(request)
    catalogue = request.app[keys.CATALOGUE]
    current = catalogue.current
    rows: list[dict[str, Any]] = []
    for backend in catalogue.config.backends:  # the current config's: a reload may have changed them
        snapshot = current.snapshots.get(backend.name)
        rows.append({
            "name": backend.name,
            "transport": backend.transport,
            "namespace": backend.namespace,
            "status": snapshot.status if snapshot else "pending",
            "tools": sum(1 for e in current.entries if e.backend == backend.name),
            **{name: sum(1 for e in listing.entries if e.backend == backend.name)
               for name, listing in current.listings.items()},  # prompts, resources, templates
            "offers": sorted(snapshot.offers) if snapshot else [],
            "version": snapshot.version if snapshot else None,
            "fetched_at": snapshot.fetched_at if snapshot else None,
            "last_refresh": catalogue.last_refresh.get(backend.name),
            "last_error": snapshot.error if snapshot else None,
            "circuit": catalogue.circuit_state(backend.name),
            "collisions": [{"tool": c.exposed, "winner": c.winner} for c in current.collisions
                           if c.loser == backend.name],
            "listing_collisions": [{"kind": name, "key": key, "winner": winner}
                                   for name, listing in current.listings.items()
                                   for key, winner, loser in listing.collisions if loser == backend.name],
            "renamed": [{"original": o, "exposed": x} for b, o, x in current.renamed if b == backend.name],
        })
    return web.json_response({"catalogue_version": current.version, "backends": rows})


def refresh_handler(interval: float,
                    clock: Callable[[], float] = time.monotonic) -> Callable[[web.Request], Awaitable[web.Response]]:
    """POST /admin/catalogue/refresh, at most once per `interval` seconds in this process."""
    last = -math.inf

    async def refresh(request: web.Request) -> web.Response:
        nonlocal last
        await require_admin(request)
        wait = last + interval - clock()
        if wait > 0:
            raise RateLimited(f"Too Many Requests: a refresh runs at most every {interval:g} s",
                              headers={"Retry-After": str(math.ceil(wait))})
        last = clock()
        catalogue = request.app[keys.CATALOGUE]
        await catalogue.refresh_all()
        return web.json_response({"catalogue_version": catalogue.current.version,
                                  "tools": len(catalogue.current.entries)})

    return refresh


def setup_admin_routes(app: web.Application) -> None:
    app.router.add_get("/admin/backends", backends)
    app.router.add_post("/admin/catalogue/refresh", refresh_handler(app[keys.CONFIG].admin.refresh_interval_seconds))
