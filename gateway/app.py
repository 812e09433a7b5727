"""Assembles the aiohttp application from a Config: state, middlewares, routes, lifecycle."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from prometheus_client import CollectorRegistry

from gateway import keys
from gateway.admin import setup_admin_routes
from gateway.auth.metadata import setup_metadata_routes
from gateway.catalogue.merge import Catalogue
from gateway.catalogue.refresher import CatalogueListener
from gateway.components import build_components
from gateway.config import Config
from gateway.health import add_readiness_check, setup_health_routes
from gateway.logs import EventLog, setup_request_log
from gateway.metrics import Metrics, setup_metrics
from gateway.protocol import spec
from gateway.store.wiring import open_shared_state
from gateway.transport.errors import setup_error_replies
from gateway.transport.http import setup_mcp_routes
from gateway.transport.inflight import InFlight
from gateway.transport.security import setup_origin_check
from gateway.transport.streams import StreamHub

# Room for the JSON-RPC envelope; the body limit itself is enforced by the transport (413).
BODY_SLACK = 1024


def create_app(config: Config, *, registry: CollectorRegistry | None = None,
               events: EventLog | None = None) -> web.Application:
    """The gateway app; its metrics go to `registry` (a fresh one by default, never the global),
    its request lines to `events` (what configure_logging returned; structlog's bound logger if None)."""
    app = web.Application(client_max_size=config.server.max_body_bytes + BODY_SLACK)
    app[keys.CONFIG] = config
    # Middleware order, outermost first: the request log sees every reply (even refusals);
    # error replies turn GatewayErrors into HTTP; the origin check refuses before any work.
    metrics = Metrics.for_config(config, registry or CollectorRegistry())
    setup_request_log(app, metrics, events)
    setup_error_replies(app)
    setup_origin_check(app, config.server, config.server.path)
    setup_mcp_routes(app, config.server.path)
    setup_health_routes(app)
    setup_metadata_routes(app, config.server.path)
    setup_admin_routes(app)
    setup_metrics(app, metrics)
    app.cleanup_ctx.append(_gateway_state)
    return app


async def _gateway_state(app: web.Application) -> AsyncIterator[None]:
    config = app[keys.CONFIG]
    # Memory stores, or Redis ones shared by every replica (config.store); closed after the core.
    async with open_shared_state(config, metrics=app[keys.METRICS]) as shared:
        core = build_components(config, list_changed=True, store=shared.snapshots,
                                metrics=app[keys.METRICS])  # the same core serves stdio
        # A resume this process cannot replay exactly gets a list_changed: the client lists again.
        streams = StreamHub(catch_up={"jsonrpc": "2.0", "method": spec.TOOLS_LIST_CHANGED})
        app[keys.POOL] = core.pool
        app[keys.CATALOGUE] = core.catalogue
        app[keys.STREAMS] = streams
        app[keys.INFLIGHT] = InFlight()
        app[keys.SESSIONS] = shared.sessions
        app[keys.AUTHENTICATOR] = core.authenticator
        app[keys.RATE_LIMITER] = shared.rate_limiter
        app[keys.DISPATCHER] = core.dispatcher
        shared.bind(streams)
        add_readiness_check(app, "store", shared.readiness)
        core.catalogue.subscribe(_notify_list_changed(app))
        await core.start()
        yield
        streams.close_all()
        await core.close()


def _notify_list_changed(app: web.Application) -> CatalogueListener:
    """Tell connected clients whose tenant view changed to list their tools again."""

    async def listener(old: Catalogue, new: Catalogue) -> None:
        config = app[keys.CONFIG]
        changed = app[keys.CATALOGUE].views.tenants_changed(old, new, list(config.tenants.values()))
        if changed:
            app[keys.STREAMS].publish(set(changed), {"jsonrpc": "2.0", "method": spec.TOOLS_LIST_CHANGED})

    return listener
