"""Admin endpoints, for tokens with the admin scope only."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway import keys
from gateway.transport.credentials import HttpCredentials
from gateway.transport.requestlog import PRINCIPAL


async def _require_admin(request: web.Request) -> None:
    authenticator = request.app[keys.AUTHENTICATOR]
    credentials = HttpCredentials(request, request.app[keys.CONFIG])
    principal = request[PRINCIPAL] = await authenticator.authenticate(credentials, None)
    authenticator.require_scope(principal, request.app[keys.CONFIG].admin.scope, credentials)


async def backends(request: web.Request) -> web.Response:
    """Each backend's catalogue status, collisions and renames."""
    await _require_admin(request)
    catalogue = request.app[keys.CATALOGUE]
    current = catalogue.current
    rows: list[dict[str, Any]] = []
    for backend in request.app[keys.CONFIG].backends:
        snapshot = current.snapshots.get(backend.name)
        rows.append({
            "name": backend.name,
            "transport": backend.transport,
            "namespace": backend.namespace,
            "status": snapshot.status if snapshot else "pending",
            "tools": sum(1 for e in current.entries if e.backend == backend.name),
            "version": snapshot.version if snapshot else None,
            "fetched_at": snapshot.fetched_at if snapshot else None,
            "last_refresh": catalogue.last_refresh.get(backend.name),
            "last_error": snapshot.error if snapshot else None,
            "circuit": catalogue.circuit_state(backend.name),
            "collisions": [{"tool": c.exposed, "winner": c.winner} for c in current.collisions
                           if c.loser == backend.name],
            "renamed": [{"original": o, "exposed": x} for b, o, x in current.renamed if b == backend.name],
        })
    return web.json_response({"catalogue_version": current.version, "backends": rows})


async def refresh(request: web.Request) -> web.Response:
    await _require_admin(request)
    catalogue = request.app[keys.CATALOGUE]
    await catalogue.refresh_all()
    return web.json_response({"catalogue_version": catalogue.current.version,
                              "tools": len(catalogue.current.entries)})


def setup_admin_routes(app: web.Application) -> None:
    app.router.add_get("/admin/backends", backends)
    app.router.add_post("/admin/catalogue/refresh", refresh)
