"""`GET /admin/policy/explain`: what the rules give one caller (as `mcp-gateway policy explain`)."""

from __future__ import annotations

import json

from aiohttp import web

from gateway import keys
from gateway.admin.access import require_admin
from gateway.catalogue.explain import explain_list, explain_tool
from gateway.catalogue.explain_servers import explain_served
from gateway.policy import Principal


async def policy_explain(request: web.Request) -> web.Response:
    """What the rules give one caller: `tenant` and `sub`, with `groups` and `scopes` (comma-separated)
    and `claims` (JSON); then `tool` (and `args`, JSON) or `list`; with `server`, through that virtual
    server. As `mcp-gateway policy explain`."""
    await require_admin(request)
    query = request.query
    tenant = request.app[keys.EXCHANGE].tenants.get(query.get("tenant", ""))
    if tenant is None or not query.get("sub") or ("tool" in query) == ("list" in query):
        raise web.HTTPBadRequest(text="give tenant (a configured one), sub, and tool or list")
    try:
        claims = json.loads(query.get("claims", "{}"))
        arguments = json.loads(query["args"]) if "args" in query else None
    except json.JSONDecodeError:
        raise web.HTTPBadRequest(text="claims and args must be JSON") from None
    if not isinstance(claims, dict) or not isinstance(arguments, dict | None):
        raise web.HTTPBadRequest(text="claims and args must be JSON objects")
    principal = Principal(tenant.name, query["sub"], frozenset(_values(query.get("scopes", ""))),
                          groups=frozenset(_values(query.get("groups", ""))), claims=claims)
    catalogue = request.app[keys.CATALOGUE]
    if "server" in query:
        server = request.app[keys.EXCHANGE].dispatcher.config.servers.get(query["server"])
        if server is None:
            raise web.HTTPBadRequest(text="no such server")
        return web.json_response(explain_served(catalogue, tenant, principal, server, query.get("tool"), arguments))
    if "list" in query:
        return web.json_response(explain_list(catalogue, tenant, principal))
    return web.json_response(explain_tool(catalogue, tenant, principal, query["tool"], arguments))


def _values(text: str) -> list[str]:
    return [value for value in text.replace(",", " ").split() if value]
