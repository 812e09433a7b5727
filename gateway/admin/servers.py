"""`GET /admin/servers`: each virtual server, its items and whether each is served, pending (its
backend not listed yet) or withdrawn and why, and its recent withdrawals and restorations."""

from __future__ import annotations

from aiohttp import web

from gateway import keys
from gateway.admin.access import admin_json, require_admin


async def servers(request: web.Request) -> web.Response:
    await require_admin(request)
    catalogue = request.app[keys.CATALOGUE]
    return admin_json({"servers": catalogue.servers.report(catalogue.current)})
