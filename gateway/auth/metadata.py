"""RFC 9728 protected resource metadata, at the root and path-inserted well-known URLs.

The MCP endpoint's resource identifier is `origin + server.path`, where the origin comes
from `server.public_url` (behind a proxy) or else from the request. Only the origin of
`public_url` is used: the gateway serves `server.path` at the root of that origin.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from aiohttp import web

from gateway.config import Config

WELL_KNOWN = "/.well-known/oauth-protected-resource"

BEARER_METHODS = {"header": "header", "query": "query"}
"""Our token sources that RFC 6750 names; JSON-RPC `params.token` has no RFC 6750 name."""


def public_origin(config: Config, request: web.Request) -> str:
    """`scheme://host[:port]` as clients reach the gateway."""
    if config.server.public_url:
        parts = urlsplit(config.server.public_url)
        return f"{parts.scheme}://{parts.netloc}"
    return f"{request.scheme}://{request.host}"


def resource_metadata_url(config: Config, request: web.Request) -> str:
    """Where the metadata of the MCP endpoint lives (the path-inserted form, RFC 9728 §3.1)."""
    return f"{public_origin(config, request)}{WELL_KNOWN}{config.server.path}"


def metadata_handler(config: Config) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def protected_resource_metadata(request: web.Request) -> web.Response:
        return _metadata_reply(config, request)

    return protected_resource_metadata


def _metadata_reply(config: Config, request: web.Request) -> web.Response:
    # RFC 9728 §3.3: `resource` must be the identifier this well-known URL was built from.
    resource = public_origin(config, request) + request.path[len(WELL_KNOWN):]
    meta = config.auth.resource_metadata
    body = {
        "resource": resource,
        "authorization_servers": list(meta.authorization_servers),
        "scopes_supported": list(meta.scopes_supported),
        "bearer_methods_supported": [BEARER_METHODS[s] for s in config.auth.token_sources if s in BEARER_METHODS],
    }
    return web.json_response(body, headers={"Cache-Control": "public, max-age=300"})


def setup_metadata_routes(app: web.Application, config: Config) -> None:
    handler = metadata_handler(config)
    app.router.add_get(WELL_KNOWN, handler)
    app.router.add_get(WELL_KNOWN + config.server.path, handler)
