"""Virtual servers over HTTP: `POST|GET|DELETE /servers/<name>/mcp` (gateway.config.server_model).

The same handlers as `server.path` serve them (transport.http.endpoint); what differs is found from
the route: the server named in the path (404 when no such server admits the caller's tenant, the
same answer for both, after authentication), and sessions opened there and used only there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.auth.metadata import SERVER_NAME_KEY, SERVER_PATH
from gateway.config import Config
from gateway.config.server_model import VirtualServer
from gateway.protocol.errors import NotFound
from gateway.tenancy import Principal

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

NAME = SERVER_NAME_KEY
"""The route's match_info key: the virtual server's name (its metadata's route uses the same)."""


def add_server_routes(app: web.Application, post: Handler, get: Handler, delete: Handler) -> None:
    app.router.add_post(SERVER_PATH, post)
    app.router.add_get(SERVER_PATH, get)
    app.router.add_delete(SERVER_PATH, delete)


def served(request: web.Request, config: Config, principal: Principal) -> VirtualServer | None:
    """The virtual server a request is for (None: the gateway's own endpoint); NotFound (404) for a name
    no server of `config` answers to, or whose server does not admit the caller's tenant."""
    name = request.match_info.get(NAME)
    if name is None:
        return None
    server = config.servers.get(name)
    if server is None or not server.admits(principal.tenant):
        raise NotFound("Not Found: unknown server")
    return server


def session_server(request: web.Request) -> str:
    """The name sessions of this route are bound to ("": the gateway's own endpoint)."""
    return request.match_info.get(NAME, "")
