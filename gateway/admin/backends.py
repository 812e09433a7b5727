"""`GET /admin/backends` and `POST /admin/catalogue/refresh`.

Each backend's catalogue status, what it offers, collisions and renames (the original contract),
and beside them what the status page shows live: the era it speaks, whether it serves now
(`state`), its stdio child, and its traffic over the asked window. A catalogue refresh asks every
backend, so it runs at most once per `admin.refresh_interval_seconds` (429 with Retry-After).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from gateway import keys
from gateway.admin.access import admin_json, audited, require_admin, window_seconds
from gateway.catalogue.merge import BackendSnapshot
from gateway.catalogue.refresher import CatalogueService
from gateway.protocol.errors import RateLimited
from gateway.upstream.modern import MODERN_VERSION


def live_state(status: str, circuit: str, transport: str, pid: int | None) -> str:
    """pending (not listed yet), down (its list failed, its circuit is open, or its stdio child is not
    running), degraded (serving a stale list, or its circuit is probing), else up."""
    if status == "pending":
        return "pending"
    if status == "down" or circuit == "open" or (transport == "stdio" and pid is None):
        return "down"
    if status == "stale" or circuit == "half_open":
        return "degraded"
    return "up"


def era_of(version: str | None) -> str | None:
    if version is None:
        return None
    return "2026" if version == MODERN_VERSION else "handshake"


async def backends(request: web.Request) -> web.Response:
    """Each backend's catalogue status, what it offers, collisions and renames; its live state and traffic."""
    await require_admin(request)
    traffic = request.app[keys.TRAFFIC]
    seconds = window_seconds(request, traffic)
    catalogue = request.app[keys.CATALOGUE]
    configured = catalogue.config.backends  # the current config's: a reload may have changed them
    figures = await traffic.backends(seconds, [backend.name for backend in configured])
    rows = [{**_listed(catalogue, backend.name, backend.transport, backend.namespace),
             **_live(request, catalogue, backend.name, backend.transport),
             "traffic": {"window_seconds": seconds, **figures[backend.name]}}
            for backend in configured]
    return admin_json({"catalogue_version": catalogue.current.version, "backends": rows})


def _listed(catalogue: CatalogueService, name: str, transport: str, namespace: str) -> dict[str, Any]:
    """What the catalogue holds of one backend (the original /admin/backends row)."""
    current = catalogue.current
    snapshot: BackendSnapshot | None = current.snapshots.get(name)
    return {
        "name": name,
        "transport": transport,
        "namespace": namespace,
        "status": snapshot.status if snapshot else "pending",
        "tools": sum(1 for e in current.entries if e.backend == name),
        **{kind: sum(1 for e in listing.entries if e.backend == name)
           for kind, listing in current.listings.items()},  # prompts, resources, templates
        "offers": sorted(snapshot.offers) if snapshot else [],
        "version": snapshot.version if snapshot else None,
        "fetched_at": snapshot.fetched_at if snapshot else None,
        "last_refresh": catalogue.last_refresh.get(name),
        "last_error": snapshot.error if snapshot else None,
        "circuit": catalogue.circuit_state(name),
        "collisions": [{"tool": c.exposed, "winner": c.winner} for c in current.collisions if c.loser == name],
        "listing_collisions": [{"kind": kind, "key": key, "winner": winner}
                               for kind, listing in current.listings.items()
                               for key, winner, loser in listing.collisions if loser == name],
        "renamed": [{"original": o, "exposed": x} for b, o, x in current.renamed if b == name],
    }


def _live(request: web.Request, catalogue: CatalogueService, name: str, transport: str) -> dict[str, Any]:
    """How the backend is doing now: its era, its stdio child, and the state the page shows."""
    upstream = request.app[keys.POOL].get(name)
    version = upstream.protocol_version
    snapshot = catalogue.current.snapshots.get(name)
    return {"protocol_version": version, "era": era_of(version), "pid": upstream.pid,
            "in_flight": upstream.busy,
            "state": live_state(snapshot.status if snapshot else "pending", upstream.circuit_state, transport,
                                upstream.pid)}


def refresh_handler(interval: float,
                    clock: Callable[[], float] = time.monotonic) -> Callable[[web.Request], Awaitable[web.Response]]:
    """POST /admin/catalogue/refresh, at most once per `interval` seconds in this process."""
    last = -math.inf

    async def refresh(request: web.Request) -> web.Response:
        nonlocal last
        principal = await require_admin(request)
        wait = last + interval - clock()
        if wait > 0:
            raise RateLimited(f"Too Many Requests: a refresh runs at most every {interval:g} s",
                              headers={"Retry-After": str(math.ceil(wait))})
        last = clock()
        catalogue = request.app[keys.CATALOGUE]
        await catalogue.refresh_all()
        await audited(request, "admin/catalogue/refresh", principal, "ok",
                      {"catalogue_version": catalogue.current.version})
        return admin_json({"catalogue_version": catalogue.current.version, "tools": len(catalogue.current.entries)})

    return refresh
