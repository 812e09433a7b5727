"""Which protocol era a stdio child speaks, and a request in the 2026 era over its pipes.

A stdio connection's era is fixed by its first request (the official SDK's dual-era loop), so
it is chosen once per child, when it starts: `protocol` "handshake" sends `initialize`, "2026"
sends `server/discover` with the gateway's envelope, and "auto" tries the handshake first and
`server/discover` when the child refuses it (a 2026-only child). A restarted child is probed
again, so a backend replaced by one of the other era is found out.

At 2026 every request carries the gateway's envelope, declaring what the call's own client
can answer (not everything, as a handshake must for all clients at once); an
`InputRequiredResult` names its call, so its questions reach exactly that call's client.
A 2026 child is listened to for the list changes its discover promises, and a (un)subscribe
to it is answered here: the URI joins or leaves the child's listen request of resource
subscriptions (watch.py's ResourceWatch, its streams run by stdio/listen.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog
from multidict import CIMultiDict

from gateway.config.model import BACKEND_PROTOCOLS
from gateway.protocol.capabilities import ALL, TASKS
from gateway.protocol.errors import FailureReason
from gateway.protocol.spec import INITIALIZE, INITIALIZED, RESOURCES_SUBSCRIBE, SERVER_DISCOVER, SUBSCRIPTIONS_LISTEN
from gateway.upstream.base import (
    BackgroundTasks,
    JsonObject,
    ListChangedCallbacks,
    NotificationHandler,
    RequestHandler,
    ResourceUpdates,
    UpstreamError,
    initialize_params,
    negotiated_version,
    notification_message,
    server_capabilities,
    subscribable,
)
from gateway.upstream.input_rounds import answering, settle
from gateway.upstream.modern import LOCAL_AT_2026, MODERN_VERSION, WATCHED, ModernWire, discovered, promised
from gateway.upstream.stdio.listen import StdioListen
from gateway.upstream.stdio.process import Process
from gateway.upstream.watch import ResourceWatch

_log = structlog.get_logger("gateway.upstream")

AUTO, MODERN, HANDSHAKE = BACKEND_PROTOCOLS
Handlers = tuple[NotificationHandler | None, RequestHandler | None]
SHARED = ""
"""Who holds a URI on the child, for ResourceWatch: one for all tenants (subscriptions.py counts them)."""


class StdioEras:
    """The era half of StdioUpstream (a mixin: it uses the upstream's calls and writes)."""

    name: str
    protocol_version: str | None
    server_capabilities: JsonObject
    _protocol: str
    _modern: bool
    _wire: ModernWire
    _requested_version: str
    _client_info: dict[str, Any]
    _start_timeout: float
    _process: Process | None
    _ready: bool
    _closing: bool
    _tasks: BackgroundTasks
    _list_changed: ListChangedCallbacks
    _updates: ResourceUpdates
    _serving: asyncio.Event
    _listen: StdioListen
    _watch: ResourceWatch

    async def _call(self, process: Process, method: str, params: JsonObject | None, timeout: float | None,  # noqa: ASYNC109
                    handlers: Handlers, *, listens: bool = False) -> JsonObject: ...

    async def _write(self, process: Process, message: JsonObject) -> None: ...

    def _init_eras(self, protocol: str, client_info: Mapping[str, Any]) -> None:
        self._protocol, self._modern, self._wire = protocol, False, ModernWire(client_info)
        self._serving = asyncio.Event()  # set while a child serves: listen requests wait for one
        self._listen = StdioListen(self.name, self._listening, self._serving, self._wire, self._tasks,
                                   on_changed=self._list_changed.fire)
        # Updates of URIs held for all tenants: told with no tenant, as a handshake child's are.
        shared = ResourceUpdates()
        shared.add(lambda _, params: self._updates.fire(None, {"params": params}))
        watching = StdioListen(self.name, self._listening, self._serving, self._wire, self._tasks,
                               on_changed=lambda _: None, on_updated=lambda message: self._watch.updated(message))
        self._watch = ResourceWatch(watching, shared, self._tasks)

    @property
    def list_ttl_ms(self) -> int | None:
        """The cache hint of the backend's lists (2026 only; the catalogue refreshes no later)."""
        return self._wire.list_ttl_ms if self._modern else None

    @property
    def lists_per_client(self) -> bool:
        """Whether the child may list other tools to clients that declared other capabilities: a 2026 child
        hears them per request; a handshake child was told every capability once, at its initialize."""
        return self._modern

    @property
    def announces(self) -> bool:
        """Whether the child tells of its list changes: at 2026 only while a listen request is acknowledged."""
        return not self._modern or self._listen.live

    def _serving_now(self) -> None:
        """The child's first exchange is done: listen to a 2026 child for the list changes it promises."""
        self._serving.set()
        if self._modern:
            self._listen.start(lambda: promised(self.server_capabilities), self._speaks_2026)

    def _speaks_2026(self) -> bool:
        """Whether listen requests still have a child to go to (now, or once one restarted)."""
        return self._modern and not self._closing

    async def _listening(self, params: JsonObject, on_frame: NotificationHandler) -> JsonObject:
        """A listen request to the serving child, pending until the stream ends (no deadline)."""
        process = self._process
        if not self._ready or process is None:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: backend process is not running", sent=False)
        return await self._call(process, SUBSCRIPTIONS_LISTEN, params, None, (on_frame, None), listens=True)

    async def _open(self, process: Process) -> None:
        """The child's first exchange, in the configured era; UpstreamError when it takes neither."""
        self._modern = False
        if self._protocol != MODERN:
            try:
                return await self._initialize(process)
            except UpstreamError:
                if self._protocol == HANDSHAKE:
                    raise
        reply = await self._call(process, SERVER_DISCOVER, self._wire.envelope(None, ALL, logs=False),
                                 self._start_timeout, (None, None))
        capabilities = discovered(reply)
        if capabilities is None:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: refused server/discover at {MODERN_VERSION}")
        self.protocol_version, self.server_capabilities, self._modern = MODERN_VERSION, capabilities, True
        _log.info("backend era found", backend=self.name, era=MODERN)

    async def _initialize(self, process: Process) -> None:
        params = initialize_params(self._requested_version, self._client_info, ALL)
        reply = await self._call(process, INITIALIZE, params, self._start_timeout, (None, None))
        self.protocol_version = negotiated_version(self.name, reply)
        self.server_capabilities = server_capabilities(reply)
        await self._write(process, notification_message(INITIALIZED, None))

    async def _modern_request(self, process: Process, method: str, params: JsonObject | None,
                              timeout: float | None, handlers: Handlers,  # noqa: ASYNC109
                              flags: frozenset[str]) -> JsonObject:
        if method in LOCAL_AT_2026:
            return {"jsonrpc": "2.0", "id": 0, "result": {}}
        if method in WATCHED and subscribable(self.server_capabilities) and isinstance((params or {}).get("uri"), str):
            await self._watched(method, params["uri"], timeout)  # type: ignore[index]
            return {"jsonrpc": "2.0", "id": 0, "result": {}}

        async def send(sent: JsonObject) -> JsonObject:
            return await self._call(process, method, sent, timeout, handlers)

        envelope = self._wire.envelope(params, answering(handlers[1], flags), logs=handlers[0] is not None)
        return self._wire.received(method, await settle(send, envelope, handlers[1]), tasks=TASKS in flags)

    async def _watched(self, method: str, uri: str, timeout: float | None) -> None:  # noqa: ASYNC109
        """A (un)subscribe at 2026: the URI joins or leaves the child's listen request of subscriptions."""
        if method != RESOURCES_SUBSCRIBE:
            return self._watch.unsubscribe(SHARED, uri, CIMultiDict(), self._speaks_2026)
        try:
            async with asyncio.timeout(timeout):
                await self._watch.subscribe(SHARED, uri, CIMultiDict(), self._speaks_2026)
        except TimeoutError as exc:
            raise UpstreamError(FailureReason.TIMEOUT, f"{self.name}: {method} not acknowledged ({timeout}s)") from exc
        return None
