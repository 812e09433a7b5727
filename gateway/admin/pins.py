"""Tool pinning's admin endpoints (gateway.catalogue.integrity; how-to/tool-pinning.md).

    GET  /admin/pins               each backend's settings, what is held (with diffs), cleaned, and the
                                   changes this replica saw
    POST /admin/pins/approve       {"backend": B, "items": ["tools/NAME", ...], "fingerprint": F}: items held
                                   for review are approved (none named: every held item of B)
    POST /admin/pins/reject        the same body: they stay held, marked rejected
    GET  /admin/pins/export        the approvals as a lockfile (integrity.lockfile)

An approval is written to the shared store, so every replica serves the item at once (and a
restart keeps it); the tenants that gain it are sent `list_changed`.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from gateway import keys
from gateway.admin.access import admin_json, audited, require_admin
from gateway.catalogue.fingerprints import key_text
from gateway.catalogue.lockfile import lockfile_bytes
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.reviews import ReviewError, approve, chosen_items, held_report, reject
from gateway.protocol.errors import BadRequest, NotFound, ServiceUnavailable
from gateway.store.health import StoreUnavailable

MAX_BODY = 65_536
FINGERPRINT_CHARS = 64


def setup_pins_routes(app: web.Application) -> None:
    app.router.add_get("/admin/pins", pins)
    app.router.add_post("/admin/pins/approve", decide)
    app.router.add_post("/admin/pins/reject", decide)
    app.router.add_get("/admin/pins/export", export)


async def pins(request: web.Request) -> web.Response:
    await require_admin(request)
    catalogue = request.app[keys.CATALOGUE]
    integrity = catalogue.integrity
    try:
        held = [item for backend in catalogue.config.backends
                for item in await held_report(integrity.store, backend.name, integrity.lockfile.get(backend.name, {}))]
    except StoreUnavailable:
        raise ServiceUnavailable("Service Unavailable: the shared store does not answer") from None
    return admin_json({
        "backends": {b.name: {"mode": b.integrity.mode, "new_items": b.integrity.new_items,
                              "invisible": b.integrity.invisible} for b in catalogue.config.backends},
        "held": held,
        "cleaned": [{"backend": backend, "item": key_text(key), "code_points": list(points)}
                    for backend, cleaned in integrity.cleaned.items() for key, points in cleaned.items()],
        "changes": list(integrity.changes),
    })


async def decide(request: web.Request) -> web.Response:
    principal = await require_admin(request)
    catalogue = request.app[keys.CATALOGUE]
    backend, items, fingerprint = await _body(request, catalogue)
    by = f"admin:{principal.subject}"
    try:
        if request.path.endswith("/approve"):
            done = await approve(catalogue.integrity.store, backend, items, by=by, fingerprint=fingerprint)
            await catalogue.reviewed(backend)
            await audited(request, "admin/pins/approve", principal, "ok", {"backend": backend, "items": done})
            return admin_json({"backend": backend, "approved": done, "catalogue_version": catalogue.current.version})
        done = await reject(catalogue.integrity.store, backend, items, by=by, fingerprint=fingerprint)
        await audited(request, "admin/pins/reject", principal, "ok", {"backend": backend, "items": done})
        return admin_json({"backend": backend, "rejected": done})
    except ReviewError as exc:
        raise NotFound(f"Not Found: {exc}") from None
    except StoreUnavailable:
        raise ServiceUnavailable("Service Unavailable: the shared store does not answer") from None


async def export(request: web.Request) -> web.Response:
    await require_admin(request)
    catalogue = request.app[keys.CATALOGUE]
    try:
        approved = {b.name: await catalogue.integrity.baseline(b.name) for b in catalogue.config.backends}
    except StoreUnavailable:
        raise ServiceUnavailable("Service Unavailable: the shared store does not answer") from None
    return web.Response(body=lockfile_bytes(approved), content_type="application/json",
                        headers={"Cache-Control": "no-store"})


async def _body(request: web.Request, catalogue: CatalogueService) -> tuple[str, Any, str | None]:
    raw = await request.content.read(MAX_BODY + 1)
    try:
        body = orjson.loads(raw) if len(raw) <= MAX_BODY else None
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise BadRequest(f"Bad Request: the body must be a JSON object of at most {MAX_BODY} bytes")
    backend, items, fingerprint = body.get("backend"), body.get("items", []), body.get("fingerprint")
    if not isinstance(backend, str) or catalogue.config.backend(backend) is None:
        raise NotFound("Not Found: name a configured backend (\"backend\")")
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise BadRequest("Bad Request: items must be a list of KIND/NAME strings")
    if fingerprint is not None and (not isinstance(fingerprint, str) or len(fingerprint) != FINGERPRINT_CHARS):
        raise BadRequest("Bad Request: fingerprint must be the 64 hex digits of a held definition")
    try:
        return backend, chosen_items(items), fingerprint
    except ReviewError as exc:
        raise BadRequest(f"Bad Request: {exc}") from None
