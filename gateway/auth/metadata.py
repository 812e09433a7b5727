"""RFC 9728 protected resource metadata, at the root and path-inserted well-known URLs."""

from __future__ import annotations

from aiohttp import web

from gateway import keys

WELL_KNOWN = "/.well-known/oauth-protected-resource"


async def protected_resource_metadata(request: web.Request) -> web.Response:
    config = request.app[keys.CONFIG]
    if config.server.public_url:
        resource = config.server.public_url.rstrip("/")
    else:
        resource = f"{request.scheme}://{request.host}{config.server.path}"
    meta = config.auth.resource_metadata
    body = {
        "resource": resource,
        "authorization_servers": list(meta.authorization_servers),
        "scopes_supported": list(meta.scopes_supported),
        "bearer_methods_supported": ["header"],
    }
    return web.json_response(body, headers={"Cache-Control": "public, max-age=300"})


def setup_metadata_routes(app: web.Application, mcp_path: str) -> None:
    app.router.add_get(WELL_KNOWN, protected_resource_metadata)
    app.router.add_get(WELL_KNOWN + mcp_path, protected_resource_metadata)
