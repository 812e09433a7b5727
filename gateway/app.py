"""Assembles the aiohttp application from a Config: state, middlewares, routes, lifecycle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from aiohttp import web
from prometheus_client import CollectorRegistry

from gateway import keys
from gateway.admin import describe_replica, setup_admin_routes
from gateway.audit import open_trail
from gateway.auth.metadata import setup_metadata_routes
from gateway.catalogue.serving import any_backend_serving
from gateway.components import build_components
from gateway.config import Config
from gateway.connections import setup_connection_routes
from gateway.health import Readiness, setup_health_routes
from gateway.logs import EventLog
from gateway.metrics import Metrics, setup_metrics
from gateway.protocol import spec
from gateway.reload import RELOADER, ConfigSource, Reloader, reload_endpoint
from gateway.shared_state import SharedState, open_shared_state
from gateway.store.health import cancel_quietly
from gateway.tracing import open_tracing
from gateway.transport.channel import PendingAsks
from gateway.transport.exchange import Exchange, to_both
from gateway.transport.http.endpoint import McpEndpoint
from gateway.transport.http.errors import error_replies
from gateway.transport.http.security import origin_check
from gateway.transport.http.streams import StreamHub
from gateway.transport.requestlog import setup_request_log
from gateway.transport.rounds import Rounds

# Room for the JSON-RPC envelope; the body limit itself is enforced by the transport (413).
BODY_SLACK = 1024


def create_app(config: Config, *, registry: CollectorRegistry | None = None,
               events: EventLog | None = None, reload_source: ConfigSource | None = None) -> web.Application:
    """The gateway app; its metrics go to `registry` (a fresh one by default, never the global),
    its request lines to `events` (what configure_logging returned; structlog's bound logger if None).
    `reload_source` reads the config again for SIGHUP and POST /admin/reload (None: reloads are refused)."""
    app = web.Application(client_max_size=config.server.max_body_bytes + BODY_SLACK)
    app[keys.CONFIG] = config
    # Middleware order, outermost first: the request log sees every reply (even refusals);
    # error replies turn GatewayErrors into HTTP; the origin check refuses before any work.
    metrics = app[keys.METRICS] = Metrics.for_config(config, registry or CollectorRegistry())
    readiness = app[keys.READINESS] = Readiness(on_verdict=metrics.ready_observed)
    setup_request_log(app, config, metrics, events)
    refusals = [error_replies(), origin_check(config.server)]  # the metrics port's site gets them too
    app.middlewares.extend(refusals)
    endpoint = app[keys.ENDPOINT] = McpEndpoint(config)
    endpoint.add_routes(app)
    setup_health_routes(app, readiness)
    setup_metadata_routes(app, config, lambda: app[keys.EXCHANGE].dispatcher.config.servers)  # reloads change them
    setup_admin_routes(app)
    setup_connection_routes(app)
    app.router.add_post("/admin/reload", reload_endpoint)
    setup_metrics(app, metrics, host=config.server.host, port=config.metrics.port, token=config.metrics.token,
                  middlewares=refusals)
    app.cleanup_ctx.append(_tracing(endpoint))  # opened first, closed last: the shutdown's own spans go out too
    app.cleanup_ctx.append(_audit)  # closed after the core: the last calls' records get out
    app.cleanup_ctx.append(_gateway_state(endpoint, reload_source))
    return app


def _tracing(endpoint: McpEndpoint) -> Callable[[web.Application], AsyncIterator[None]]:
    """The gateway's tracer (None with tracing off: nothing of OpenTelemetry is loaded then)."""

    async def tracing_state(app: web.Application) -> AsyncIterator[None]:
        metrics = app[keys.METRICS]
        tracing = endpoint.tracing = app[keys.TRACING] = open_tracing(
            app[keys.CONFIG].tracing, on_dropped=metrics.spans_dropped, on_exported=metrics.spans_exported)
        yield
        if tracing is not None:
            await tracing.close()

    return tracing_state


async def _audit(app: web.Application) -> AsyncIterator[None]:
    """The audit trail (None with auditing off), reported in readiness when `audit.required`."""
    config = app[keys.CONFIG]
    trail = app[keys.AUDIT] = open_trail(config, on_dropped=app[keys.METRICS].audit_dropped)
    if trail is None:
        yield
        return
    trail.start()
    if config.audit.required:
        app[keys.READINESS].add_check("audit", trail.readiness)
    yield
    await trail.close()


def _gateway_state(endpoint: McpEndpoint,
                   reload_source: ConfigSource | None) -> Callable[[web.Application], AsyncIterator[None]]:
    """The app's parts, built at start-up and bound to the endpoint; torn down in reverse."""

    async def gateway_state(app: web.Application) -> AsyncIterator[None]:
        config = app[keys.CONFIG]
        # Memory stores, or Redis ones shared by every replica (config.store); closed after the core.
        reloader: Reloader | None = None

        def current() -> Config:
            return reloader.config if reloader is not None else config

        metrics, tracing = app[keys.METRICS], app[keys.TRACING]
        async with open_shared_state(config, metrics=metrics, current=current) as shared:
            core = build_components(config, list_changed=True, store=shared.snapshots, secrets=shared.secrets,
                                    metrics=metrics, tracing=tracing, audit=app[keys.AUDIT])  # stdio's too
            asks = PendingAsks()  # the gateway's questions to clients; answers may come via another replica
            exchange = Exchange(dispatcher=core.dispatcher, authenticator=core.authenticator,
                                tenants=config.tenants, rate_limiter=shared.rate_limiter, asks=asks,
                                forward_answer=shared.share_answers(asks))
            # A resume this process cannot replay exactly gets every list_changed: the client lists again.
            streams = StreamHub(catch_up=[{"jsonrpc": "2.0", "method": method} for method in spec.LIST_CHANGED_ORDER])
            rounds = _rounds(config, exchange, shared)  # kept across reloads: they hold calls under way

            def bind() -> None:  # again after each reload: the endpoint keeps parts of the exchange
                endpoint.bind(exchange=exchange, sessions=shared.sessions, streams=streams, rounds=rounds)

            bind()
            app[keys.POOL] = core.pool
            app[keys.CREDENTIALS] = core.credentials
            app[keys.CATALOGUE] = core.catalogue
            app[keys.STREAMS] = streams
            app[keys.SESSIONS] = shared.sessions
            app[keys.EXCHANGE] = exchange
            app[keys.ROUNDS] = rounds
            subscriptions, listeners = core.subscriptions, core.listeners  # a reload keeps both
            announce = to_both(streams.publish, listeners.publish)  # list changes: the catalogue's and the reloads'
            reloader = app[RELOADER] = Reloader(config=config, core=core, exchange=exchange, source=reload_source,
                                                deliver=announce, metrics=app[keys.METRICS], on_swap=bind,
                                                history=shared.reloads, audit=app[keys.AUDIT])
            reloader.loaded()
            app[keys.RELOADS], app[keys.REPLICAS] = shared.reloads, shared.replicas
            shared.replicas.describe = describe_replica(app)
            heartbeat = asyncio.create_task(shared.replicas.run(), name="replica-heartbeat")
            shared.bind(streams, on_ended=exchange.asks.abandon)
            subscriptions.session_sink = shared.session_sink(streams)  # resource updates to GET streams
            shared.sessions.on_ended(subscriptions.release)  # an ended session's subscriptions go too
            app[keys.READINESS].gate("catalogue not built yet", core.catalogue.ready)
            app[keys.READINESS].add_check("store", shared.readiness)
            if config.server.ready_requires == "any_backend":
                app[keys.READINESS].add_check("backends", any_backend_serving(core.catalogue))
            # only tenants with a stream here can hear a change: checking every configured tenant against the
            # changed tools made each backend listed at start cost O(tenants x its tools)
            core.catalogue.subscribe(exchange.list_changed_listener(
                announce, lambda: [t for name in streams.reached().union(listeners.listening())
                                   if (t := exchange.tenants.get(name)) is not None]))
            core.catalogue.relisting.watch(lambda: [*streams.listening(), *listeners.listening()],
                                           shared.listening)  # listeners on other replicas count too
            streams.on_listening = listeners.on_listening = core.catalogue.relisting.changed
            await core.start()
            yield
            await cancel_quietly(heartbeat)  # the replica's field leaves the store
            await reloader.close()
            await shared.reloads.close()
            streams.close_all()
            await rounds.close()
            listeners.close_all()
            await core.close()

    return gateway_state


def _rounds(config: Config, exchange: Exchange, shared: SharedState) -> Rounds:
    """Multi-round trips for 2026 clients (transport.rounds), reachable from every replica."""
    rounds = Rounds.of(config, exchange, shared.seal, replica=shared.replica_id)
    # a retry may come as late as a call may last, plus the wait for its round to be retried
    longest = max((backend.call_cap_seconds for backend in config.backends), default=0.0)
    shared.share_rounds(rounds, max_wait=longest + config.mrtr.round_seconds)
    return rounds
