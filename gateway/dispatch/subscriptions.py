"""resources/subscribe and resources/unsubscribe, and where a backend's resources/updated goes.

A client subscribes to a gateway URI under its tenant's policy: a URI it may not see gets the
same -32002 as one that does not exist. Upstream, one subscription per backend session and
original URI serves every client that wants it (reference counting): the first client's
subscribe goes to the backend, the last one's leaving unsubscribes there. An HTTP backend's
sessions are per tenant, so tenants never share one; a stdio child is one session for all. A 2026
HTTP backend has no sessions: its upstream turns the (un)subscribes into the URI set of one listen
stream and hands each update back once per tenant holding the URI (upstream/watch.py); a 2026
stdio child's upstream does the same on listen requests over its pipes, the update told with no
tenant as a handshake child's is. So the keys and the fan-out here are the same in both eras.

A backend's `notifications/resources/updated` reaches exactly the clients subscribed to that
URI on that backend session, each with the gateway URI it subscribed to, through its sink: a
session's GET stream (`session_sink`, set by the transport), stdout, or a 2026 listen stream
(`listen.py`). A client that goes away (its session ends, its listen stream closes) releases
everything it held. State is this process's: the replica that took a subscribe holds it.

One `Subscriptions` lives as long as the process: a reload builds a new dispatcher, which hands
it its forwarder (`rebind`). Subscriptions on a kept backend go on untouched; on a replaced one
they are taken out again on the new upstream (as after a restarted child); on a removed one
they are dropped, and their clients simply hear no more updates from it. An update goes out only
while the client's tenant may still see the URI (under the policy in force; through a virtual server,
while the server still takes it and admits the tenant), else it is withheld.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import structlog

from gateway.catalogue.listings import SUBSCRIBE
from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.servers import served_route
from gateway.config import HttpBackend, TenantConfig
from gateway.config.server_model import VirtualServer
from gateway.dispatch.forward import Forwarder
from gateway.protocol import spec
from gateway.protocol.errors import InternalError, InvalidParams, MethodNotFound, ResourceNotFound
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.tenancy import Principal, RequestContext, upstream_headers
from gateway.upstream.base import UpstreamError
from gateway.upstream.routed import RoutedUpstream

log = structlog.get_logger("gateway.subscriptions")

MAX_HELD = 1024
"""Resource subscriptions one client (a session, a listen stream) may hold."""

Sink = Callable[[JsonObject], None]
"""Hands one notification to one client; must not block (it queues, or starts a task)."""

Key = tuple[str, str | None, str]
"""One upstream subscription: backend, backend session (the tenant; None: a stdio child's, shared), original URI."""


@dataclass(slots=True)
class _Client:
    sink: Sink
    tenant: str
    principal: Principal | None = None  # whose policy decides what it may still hear
    server: str = ""  # the virtual server it subscribed through ("": the gateway's own endpoint)
    held: dict[Key, str] = field(default_factory=dict)  # what it subscribed to -> the gateway URI it used


class Subscriptions:
    """Every client's resource subscriptions, and the upstream ones they share."""

    def __init__(self, *, catalogue: CatalogueService, forwarder: Forwarder,
                 tenants: Mapping[str, TenantConfig], servers: Mapping[str, VirtualServer] | None = None) -> None:
        self.catalogue = catalogue
        self.session_sink: Callable[[str], Sink] | None = None  # the transport's way to a session's client
        # a backend session's notifications/tasks/status: to the client that made the task (dispatch.session_tasks)
        self.on_task_status: Callable[[str, str | None, JsonObject, Callable[[str], Sink] | None], None] | None = None
        self._clients: dict[str, _Client] = {}
        self._subscribers: dict[Key, set[str]] = {}
        self._owners: dict[Key, tuple[TenantConfig, Principal]] = {}  # who took it upstream: its headers
        self._locks: dict[str, asyncio.Lock] = {}  # per backend: its upstream (un)subscribes, one at a time
        self._heard: dict[str, RoutedUpstream] = {}  # the upstream whose updates count, by backend
        self._tasks: set[asyncio.Task[None]] = set()
        self.rebind(forwarder, tenants, servers)

    def rebind(self, forwarder: Forwarder, tenants: Mapping[str, TenantConfig],
               servers: Mapping[str, VirtualServer] | None = None) -> None:
        """Serve the backends of `forwarder` (a reload's): drop what removed backends held, take out
        again on each new upstream what its predecessor held, and listen to the new upstreams."""
        self.forwarder, self._tenants, self._servers = forwarder, tenants, servers or {}
        upstreams = {backend.name: forwarder.pool.get(backend.name) for backend in forwarder.backends()}
        self._forget([key for key in self._subscribers if key[0] not in upstreams])
        for name, upstream in upstreams.items():
            if self._heard.get(name) is not upstream:
                self._renew([key for key in self._subscribers if key[0] == name])
                upstream.on_resource_updated(partial(self._from, name, upstream))
        self._heard = upstreams
        self._locks = {name: self._locks.get(name) or asyncio.Lock() for name in upstreams}

    def _forget(self, keys: list[Key]) -> None:
        """Subscriptions on removed backends: gone, with no word upstream (the upstream is retiring)."""
        for key in keys:
            self._owners.pop(key, None)
            for client in self._subscribers.pop(key):
                holder = self._clients.get(client)
                if holder is not None:
                    holder.held.pop(key, None)

    def _from(self, backend: str, upstream: RoutedUpstream, session_key: str | None,
              params: JsonObject | None) -> None:
        """An upstream's update, if it is still the one serving `backend` (a retiring one is not heard)."""
        if self._heard.get(backend) is upstream:
            self.updated(backend, session_key, params)

    # ---------------------------------------------------------------- the handshake-era methods

    async def subscribe(self, message: Message, ctx: RequestContext) -> JsonObject:
        uri, key = self.route(message.params, ctx)
        client = ctx.session_id or ""  # "": the one client of `mcp-gateway stdio`
        if client not in self._clients:
            if self.session_sink is None:
                raise MethodNotFound(f"Method not found: {spec.RESOURCES_SUBSCRIBE}")
            self.attach(client, self.session_sink(client), ctx.tenant.name, ctx.principal,
                        ctx.server.name if ctx.server is not None else "")
        if len(self._clients[client].held) >= MAX_HELD:
            raise InternalError(f"Too many subscriptions: at most {MAX_HELD} per session",
                                data={"reason": "limit", "limit": "subscriptions"})
        await self.hold(client, key, uri, ctx)
        return {}

    async def unsubscribe(self, message: Message, ctx: RequestContext) -> JsonObject:
        _, key = self.route(message.params, ctx)
        await self.drop(ctx.session_id or "", key)
        return {}

    def route(self, params: JsonObject | None, ctx: RequestContext) -> tuple[str, Key]:
        """The gateway URI and its upstream key; unknown, invisible and unsubscribable URIs look alike."""
        uri = (params or {}).get("uri")
        if not isinstance(uri, str):
            raise InvalidParams("Invalid params: uri must be a string")
        view = self.catalogue.view(ctx.tenant, ctx.principal)
        route = view.resolve_uri(uri) if ctx.server is None else served_route(view, ctx.server, uri)
        if route is None or not self.catalogue.current.offers(route.backend, SUBSCRIBE):
            raise ResourceNotFound(uri[:1000])
        ctx.backend, ctx.target = route.backend, route.original
        shared = not isinstance(self.forwarder.backend(route.backend), HttpBackend)
        return uri, (route.backend, None if shared else ctx.principal.tenant, route.original)

    # ---------------------------------------------------------------- clients

    def attach(self, client: str, sink: Sink, tenant: str, principal: Principal | None = None,
               server: str = "") -> None:
        self._clients[client] = _Client(sink, tenant, principal, server=server)

    async def hold(self, client: str, key: Key, uri: str, ctx: RequestContext) -> None:
        """Subscribe `client` to `key` (upstream too when it is the first); a backend's refusal is raised."""
        async with self._lock(key[0]):
            subscribers = self._subscribers.get(key)
            if not subscribers:
                await self._subscribe_upstream(key, ctx)
                subscribers = self._subscribers[key] = set()
            subscribers.add(client)
        holder = self._clients.get(client)
        if holder is None or key[0] not in self._heard:  # it went away (or a reload removed the backend) meanwhile
            await self.drop(client, key)
        else:
            holder.held[key] = uri

    async def drop(self, client: str, key: Key) -> None:
        """`client` no longer wants `key`; the last one out unsubscribes upstream."""
        holder = self._clients.get(client)
        if holder is not None:
            holder.held.pop(key, None)
        async with self._lock(key[0]):
            subscribers = self._subscribers.get(key)
            if subscribers is None or client not in subscribers:
                return
            subscribers.discard(client)
            if not subscribers:
                del self._subscribers[key]
                await self._unsubscribe_upstream(key)

    def release(self, client: str) -> None:
        """The client went away (session ended, listen stream closed): drop all it held, in the background."""
        holder = self._clients.pop(client, None)
        if holder is not None and holder.held:
            self._spawn(self._release(client, list(holder.held)))

    async def _release(self, client: str, keys: list[Key]) -> None:
        for key in keys:
            await self.drop(client, key)

    def _renew(self, keys: list[Key]) -> None:
        """Subscribe a new backend session to what its predecessor held (listed when it began, so a
        subscribe that is itself opening the session is not sent twice)."""
        if keys:
            self._spawn(self._resubscribe(keys))

    async def _resubscribe(self, keys: list[Key]) -> None:
        for key in keys:
            async with self._lock(key[0]):
                if key in self._subscribers:
                    await self._upstream(spec.RESOURCES_SUBSCRIBE, key, self._owners.get(key))

    def _lock(self, backend: str) -> asyncio.Lock:
        """The backend's lock; a backend a reload removed while a client waited gets a lock of its own."""
        return self._locks.get(backend) or asyncio.Lock()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def held(self, key: Key) -> int:
        """How many clients hold `key` (0: not subscribed upstream)."""
        return len(self._subscribers.get(key, ()))

    # ---------------------------------------------------------------- the backends' side

    def updated(self, backend: str, session_key: str | None, params: JsonObject | None) -> None:
        """A backend's resources/updated: to each client subscribed on that backend session, in its URI.
        None: the backend session is new (the backend forgot the old one, or the child restarted)."""
        if params is None:
            self._renew([key for key in self._subscribers if key[:2] == (backend, session_key)])
            return
        if "uri" not in params:  # a task's status (upstream.base.SESSION_NOTICES)
            if self.on_task_status is not None:
                self.on_task_status(backend, session_key, params, self.session_sink)
            return
        key = (backend, session_key, params["uri"])
        for client in self._subscribers.get(key, ()):
            holder = self._clients.get(client)
            uri = holder.held.get(key) if holder is not None else None
            if holder is not None and uri is not None and self._visible(holder, uri, key):
                holder.sink({"jsonrpc": "2.0", "method": spec.RESOURCES_UPDATED, "params": {**params, "uri": uri}})

    def _visible(self, holder: _Client, uri: str, key: Key) -> bool:
        """Whether the client may still see `uri` there: a reload may have changed its policy since (or
        the virtual server it subscribed through: its items, its tenants)."""
        config = self._tenants.get(holder.tenant)
        if config is None:
            return False
        view = self.catalogue.view(config, holder.principal)
        if holder.server:
            server = self._servers.get(holder.server)
            admitted = server is not None and server.admits(holder.tenant)
            route = served_route(view, server, uri) if admitted else None
        else:
            route = view.resolve_uri(uri)
        return route is not None and (route.backend, route.original) == (key[0], key[2])

    async def _subscribe_upstream(self, key: Key, ctx: RequestContext) -> None:
        backend = self.forwarder.backend(key[0])
        # The tenant's session that declared nothing: one per tenant, whatever its clients declared.
        plain = replace(ctx, capabilities=frozenset(), extra={})
        try:
            await self.forwarder.forward(backend, spec.RESOURCES_SUBSCRIBE, {"uri": key[2]}, plain)
        finally:
            ctx.outcome = plain.outcome
        self._owners[key] = (ctx.tenant, ctx.principal)

    async def _unsubscribe_upstream(self, key: Key) -> None:
        await self._upstream(spec.RESOURCES_UNSUBSCRIBE, key, self._owners.pop(key, None))

    async def _upstream(self, method: str, key: Key, owner: tuple[TenantConfig, Principal] | None) -> None:
        """Send a (un)subscribe outside any client request; a failure is logged (nobody waits for it).
        Headers are worked out now, for the backend's current config (a replaced one's may differ)."""
        if key[0] not in self._heard or owner is None:  # removed by a reload: its upstream is retiring
            return
        backend = self.forwarder.backend(key[0])
        headers = upstream_headers(backend, *owner)
        try:
            reply = await self.forwarder.pool.get(backend.name).request(
                method, {"uri": key[2]}, timeout=backend.timeout_seconds, session_key=key[1] or "", headers=headers)
        except UpstreamError as exc:  # an unsubscribe: the backend may still send updates, nobody gets them
            log.warning("upstream_subscription_failed", backend=backend.name, method=method, reason=exc.reason)
            return
        if "error" in reply:
            log.warning("upstream_subscription_refused", backend=backend.name, method=method,
                        error=str(reply["error"])[:200])
