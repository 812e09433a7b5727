"""subscriptions/listen: a 2026-07-28 client's stream of change notifications (PROTOCOL-2026 §A.7).

One listen request is one stream. Its first frame acknowledges what the gateway will send: the
requested list kinds this tenant is served, and the requested URIs it could subscribe to (an
unknown URI and one the tenant may not see are both simply left out). Then only those
notifications, each tagged with the request's id as `subscriptionId`, fed by the same catalogue
changes as the sessions' GET streams and by the backends' resource updates (subscriptions.py),
with a keep-alive comment while idle. The client ends it by closing the stream (the handler is
cancelled, its subscriptions released); the gateway ends it gracefully (`close_all`, at
shutdown) with the result frame; a client too slow to read gets an error frame instead.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import structlog

from gateway.catalogue.audience import Sees
from gateway.dispatch import servers
from gateway.dispatch.forward import PassThrough
from gateway.dispatch.subscriptions import MAX_HELD, Subscriptions
from gateway.protocol import spec
from gateway.protocol.errors import GatewayError, InternalError, InvalidParams, LimitReached
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.tenancy import Channel, ChannelClosed, Principal, RequestContext

log = structlog.get_logger("gateway.subscriptions")

KEEPALIVE_SECONDS = 15.0
"""An SSE comment this often keeps an idle listen stream alive through proxies."""
MAX_BACKLOG = 1024
"""Notifications queued for one stream; beyond, the stream ends with an error (re-listen and refetch)."""
MAX_URIS = MAX_HELD
"""Resource URIs one listen request may name."""


@dataclass(slots=True)
class _Stream:
    tenant: str
    meta: JsonObject  # {subscriptionId: the listen request's id}
    principal: Principal | None = None  # whose policy decides which list changes concern it
    methods: frozenset[str] = frozenset()
    queue: asyncio.Queue[JsonObject | None] = field(default_factory=asyncio.Queue)
    overflowed: bool = False

    def put(self, method: str, params: JsonObject) -> None:
        if self.overflowed:
            return
        if self.queue.qsize() >= MAX_BACKLOG:
            self.overflowed = True
            self.queue.put_nowait(None)
            return
        meta = params.get("_meta")
        params = {**params, "_meta": {**meta, **self.meta} if isinstance(meta, dict) else self.meta}
        self.queue.put_nowait({"jsonrpc": "2.0", "method": method, "params": params})


def _nothing() -> None:
    pass


class ListenStreams:
    """The open listen streams of this process."""

    def __init__(self, *, subscriptions: Subscriptions, keepalive: float = KEEPALIVE_SECONDS) -> None:
        self.subscriptions = subscriptions
        self.catalogue = subscriptions.catalogue
        self.keepalive = keepalive
        self._streams: dict[str, _Stream] = {}
        self._ids = itertools.count(1)
        self.on_listening: Callable[[], None] = _nothing
        """Called when the streams that asked for list changes may have changed (see `listening`)."""

    async def listen(self, message: Message, ctx: RequestContext) -> JsonObject:
        """Serve one listen stream until the client or the gateway ends it; the result closes it."""
        wanted = (message.params or {}).get("notifications")
        if not isinstance(wanted, dict):
            raise InvalidParams("Invalid params: notifications must be an object")
        if self.count_of(ctx.tenant.name) >= ctx.tenant.limits.streams:
            raise LimitReached("streams", ctx.tenant.limits.streams)
        key = f"listen-{next(self._ids)}"
        stream = self._streams[key] = _Stream(ctx.tenant.name, {spec.SUBSCRIPTION_ID_KEY: message.id}, ctx.principal)
        self.subscriptions.attach(key, partial(_updated, stream), ctx.tenant.name, ctx.principal,
                                  ctx.server.name if ctx.server is not None else "")
        try:
            honored = self._kinds(wanted, ctx)
            stream.methods = frozenset(spec.LISTEN_FLAGS[flag][1] for flag in honored)
            self.on_listening()
            uris = await self._subscribe(key, wanted.get("resourceSubscriptions"), ctx)
            if uris:
                honored["resourceSubscriptions"] = uris
            await self._serve(stream, honored, ctx)
        finally:
            del self._streams[key]
            self.on_listening()
            self.subscriptions.release(key)
        return {"_meta": stream.meta}

    def publish(self, tenants: set[str], message: JsonObject, sees: Sees | None = None) -> None:
        """A list change for these tenants' clients (those `sees` admits): to their streams that asked for that kind."""
        method = message.get("method")
        for stream in self._streams.values():
            if stream.tenant in tenants and method in stream.methods and (
                    sees is None or sees(stream.tenant, stream.principal)):
                stream.put(method, {})

    def count_of(self, tenant: str) -> int:
        """The listen streams `tenant` holds open here (its `limits.streams` applies to these)."""
        return sum(stream.tenant == tenant for stream in self._streams.values())

    def listening(self) -> list[str]:
        """The tenants with a listen stream here that asked for list changes."""
        return [stream.tenant for stream in self._streams.values() if stream.methods]

    def close_all(self) -> None:
        """End every stream gracefully (each sends its result frame)."""
        for stream in self._streams.values():
            stream.queue.put_nowait(None)

    def _kinds(self, wanted: JsonObject, ctx: RequestContext) -> JsonObject:
        """The list kinds asked for that the caller is served (through a virtual server: that the server has)."""
        offers = self.catalogue.view(ctx.tenant, ctx.principal).offers if ctx.server is None \
            else partial(servers.offers, ctx.server)
        return {flag: True for flag, (capability, _) in spec.LISTEN_FLAGS.items()
                if wanted.get(flag) is True and (capability == "tools" or offers(capability))}

    async def _subscribe(self, key: str, uris: Any, ctx: RequestContext) -> list[str]:
        """The requested URIs this stream now holds; the others are left out, whatever the reason."""
        if uris is None:
            return []
        if not isinstance(uris, list) or len(uris) > MAX_URIS or not all(isinstance(u, str) for u in uris):
            raise InvalidParams(f"Invalid params: resourceSubscriptions must be at most {MAX_URIS} URIs")
        held = []
        for uri in dict.fromkeys(uris):
            try:
                _, upstream = self.subscriptions.route({"uri": uri}, ctx)
                await self.subscriptions.hold(key, upstream, uri, ctx)
            except (GatewayError, PassThrough) as exc:
                log.debug("listen_uri_left_out", error=type(exc).__name__, request_id=ctx.request_id)
                continue
            held.append(uri)
        return held

    async def _serve(self, stream: _Stream, honored: JsonObject, ctx: RequestContext) -> None:
        channel = ctx.channel
        assert channel is not None
        ack = {"jsonrpc": "2.0", "method": spec.SUBSCRIPTIONS_ACKNOWLEDGED,
               "params": {"notifications": honored, "_meta": stream.meta}}
        try:
            await channel.notify(ack)
            while (notification := await self._next(stream, channel)) is not None:
                await channel.notify(notification)
        except ChannelClosed:
            return  # the client is gone: nothing more to say
        if stream.overflowed:
            raise InternalError("Subscription backlog exceeded: listen again and refetch")

    async def _next(self, stream: _Stream, channel: Channel) -> JsonObject | None:
        while True:
            try:
                async with asyncio.timeout(self.keepalive):
                    return await stream.queue.get()
            except TimeoutError:
                await channel.keepalive()


def _updated(stream: _Stream, message: JsonObject) -> None:
    stream.put(message["method"], message["params"])
