"""The gateway as an OAuth protected resource: its resource identifier and RFC 9728 metadata.

The MCP endpoint's resource identifier is `origin + server.path` (`https://gw.example.com/mcp`),
where the origin comes from `server.public_url` (behind a proxy) or else from the request; only
the origin of `public_url` is used, as the gateway serves `server.path` at the root of that origin.
OAuth access tokens must name it in `aud` (RFC 8707): a token for the bare origin is another
resource's. Both well-known documents, the path-inserted one the 401 challenge points to and
the root one clients fall back to, name that same resource, so a client that discovers from the
root asks for a token the gateway accepts. Empty lists are left out of the document (a client
reading `scopes_supported: []` would ask for no scope at all).

Each virtual server (`/servers/<name>/mcp`) is a resource of its own: its identifier is its URL, its
metadata lives at the path-inserted `/.well-known/oauth-protected-resource/servers/<name>/mcp`, and
its endpoint's 401 challenge points there, so its clients ask for tokens issued for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container
from urllib.parse import urlsplit

from aiohttp import web

from gateway.config import Config

WELL_KNOWN = "/.well-known/oauth-protected-resource"
SERVER_NAME_KEY = "server"
"""The match_info key of a virtual server's routes (its endpoint's and its metadata's)."""
SERVER_PATH = "/servers/{server}/mcp"


def public_origin(config: Config, request: web.Request) -> str:
    """`scheme://host[:port]` as clients reach the gateway (scheme and host in lower case)."""
    if config.server.public_url:
        return _origin(config.server.public_url)
    return _origin(f"{request.scheme}://{request.host}")


def resource_url(config: Config, request: web.Request) -> str:
    """The MCP endpoint's resource identifier, as clients reach it (a virtual server's: its own URL)."""
    return public_origin(config, request) + endpoint_path(config, request)


def endpoint_path(config: Config, request: web.Request) -> str:
    """The path of the MCP endpoint a request is for: `server.path`, or a virtual server's."""
    name = request.match_info.get(SERVER_NAME_KEY)
    return config.server.path if name is None else f"/servers/{name}/mcp"


def configured_resource(config: Config) -> str | None:
    """The resource identifier `server.public_url` gives, without a request (None when it is unset)."""
    return _origin(config.server.public_url) + config.server.path if config.server.public_url else None


def resource_metadata_url(config: Config, request: web.Request) -> str:
    """Where the metadata of the MCP endpoint lives (the path-inserted form, RFC 9728 §3.1)."""
    return f"{public_origin(config, request)}{WELL_KNOWN}{endpoint_path(config, request)}"


def bearer_methods(config: Config) -> list[str]:
    """The RFC 6750 methods OAuth access tokens may use here: the header, and the query only when allowed."""
    methods = ["header"] if "header" in config.auth.token_sources else []
    if "query" in config.auth.token_sources and (config.auth.jwt.query_tokens or not config.auth.jwt.oauth):
        methods.append("query")
    return methods


def metadata_handler(config: Config, servers: Callable[[], Container[str]] = tuple
                     ) -> Callable[[web.Request], Awaitable[web.Response]]:
    """`servers`: the names of the virtual servers in force (a reload may change them); another is 404."""
    async def protected_resource_metadata(request: web.Request) -> web.Response:
        name = request.match_info.get(SERVER_NAME_KEY)
        if name is not None and name not in servers():
            raise web.HTTPNotFound()
        meta = config.auth.resource_metadata
        body = {
            "resource": resource_url(config, request),
            "authorization_servers": list(meta.authorization_servers),
            "scopes_supported": list(meta.scopes_supported),
            "bearer_methods_supported": bearer_methods(config),
        }
        body = {key: value for key, value in body.items() if value}  # an empty list says something else
        return web.json_response(body, headers={"Cache-Control": "public, max-age=300"})

    return protected_resource_metadata


def setup_metadata_routes(app: web.Application, config: Config, servers: Callable[[], Container[str]] = tuple) -> None:
    handler = metadata_handler(config, servers)
    app.router.add_get(WELL_KNOWN, handler)
    app.router.add_get(WELL_KNOWN + config.server.path, handler)
    app.router.add_get(WELL_KNOWN + SERVER_PATH, handler)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"
