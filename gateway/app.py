"""Assembles the aiohttp application from a Config: state, middlewares, routes, lifecycle."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web

from gateway import keys
from gateway.admin import setup_admin_routes
from gateway.auth.authenticator import Authenticator
from gateway.auth.metadata import setup_metadata_routes
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.store import MemorySnapshotStore
from gateway.config import Config
from gateway.dispatch import Dispatcher
from gateway.health import setup_health_routes
from gateway.logs import setup_request_log
from gateway.protocol import spec
from gateway.ratelimit import MemoryRateLimiter
from gateway.transport.errors import setup_error_replies
from gateway.transport.http import setup_mcp_routes
from gateway.transport.security import setup_origin_check
from gateway.transport.sessions import MemorySessionStore
from gateway.transport.streams import StreamHub
from gateway.upstream.pool import UpstreamPool

# Room for the JSON-RPC envelope; the body limit itself is enforced by the transport (413).
BODY_SLACK = 1024


def create_app(config: Config) -> web.Application:
    app = web.Application(client_max_size=config.server.max_body_bytes + BODY_SLACK)
    app[keys.CONFIG] = config
    # Middleware order, outermost first: the request log sees every reply (even refusals);
    # error replies turn GatewayErrors into HTTP; the origin check refuses before any work.
    setup_request_log(app)
    setup_error_replies(app)
    setup_origin_check(app, config.server, config.server.path)
    setup_mcp_routes(app, config.server.path)
    setup_health_routes(app)
    setup_metadata_routes(app, config.server.path)
    setup_admin_routes(app)
    app.cleanup_ctx.append(_gateway_state)
    return app


async def _gateway_state(app: web.Application) -> AsyncIterator[None]:
    config = app[keys.CONFIG]
    pool = UpstreamPool(config.backends)
    catalogue = CatalogueService(config=config, pool=pool, store=MemorySnapshotStore())
    streams = StreamHub()
    app[keys.POOL] = pool
    app[keys.CATALOGUE] = catalogue
    app[keys.STREAMS] = streams
    app[keys.SESSIONS] = MemorySessionStore()
    app[keys.AUTHENTICATOR] = Authenticator(config)
    app[keys.RATE_LIMITER] = MemoryRateLimiter()
    app[keys.DISPATCHER] = Dispatcher(config=config, catalogue=catalogue, pool=pool,
                                      list_changed=True)
    catalogue.subscribe(_notify_list_changed(app))
    await pool.start()
    await catalogue.start()
    yield
    streams.close_all()
    await catalogue.stop()
    await pool.close()
    await app[keys.AUTHENTICATOR].close()


def _notify_list_changed(app: web.Application):  # type: ignore[no-untyped-def]
    """Tell connected clients whose tenant view changed to list their tools again."""

    async def listener(old, new) -> None:  # type: ignore[no-untyped-def]
        config = app[keys.CONFIG]
        changed = app[keys.CATALOGUE].views.tenants_changed(old, new, list(config.tenants.values()))
        if changed:
            app[keys.STREAMS].publish(set(changed), {"jsonrpc": "2.0", "method": spec.TOOLS_LIST_CHANGED})

    return listener
