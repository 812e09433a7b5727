"""Which protocol era an HTTP backend speaks, found out once and kept; and a request in the 2026 era.

The backend's `protocol` setting pins the era ("handshake", "2026") or leaves it to be found
("auto", the default): the handshake first, then `server/discover`. A backend that answers both
serves both eras (the official SDK's servers do), and each request goes to it in the era of the
client it serves, as that client would reach it directly: a 2026 client's request (the forwarder
marks it `capabilities.AT_2026`) at 2026, anything else in a session. A backend that serves one era
gets every request in that era, and the gateway bridges the other era's clients.
List changes are heard in either era: on a session's GET stream, or on a 2026 backend's
`subscriptions/listen` stream when its discover promises them (http/listen.py). At 2026 a
(un)subscribe is answered here: the URI joins or leaves a listen stream of its own (watch.py). A 2026
backend that promises none, or refuses to listen, cannot announce (`announces` False): the
catalogue re-lists it after the requests it serves while clients listen (catalogue/relisting.py).
The era found is kept per backend. When a request then fails in a way that says the backend
did not run it (it refused the session's era with an HTTP 4xx, or the handshake failed), the
era is found again, and if it changed (the backend restarted as the other era) the request is
sent once more in the new one; a pinned era is never re-probed.

A 2026 request carries no session: the gateway's envelope and routing headers (modern.py);
an `InputRequiredResult` is answered through the call's client (input_rounds.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog
from multidict import CIMultiDict

from gateway.config.model import BACKEND_PROTOCOLS
from gateway.protocol import spec
from gateway.protocol.capabilities import AT_2026, NONE, SESSIONLESS, TASKS
from gateway.protocol.errors import FailureReason
from gateway.upstream.base import (
    BackgroundTasks,
    JsonObject,
    ListChangedCallbacks,
    ResourceUpdates,
    UpstreamError,
    handshake_params,
    subscribable,
)
from gateway.upstream.http.body import BoundedBody, Refused
from gateway.upstream.http.client import HttpTransport
from gateway.upstream.http.listen import ListenStream
from gateway.upstream.http.session import NO_HANDLERS, BackendSession, Handlers, SessionExpired, SessionKey
from gateway.upstream.input_rounds import answering, settle
from gateway.upstream.modern import LOCAL_AT_2026, MODERN_VERSION, WATCHED, ModernWire, discovered
from gateway.upstream.watch import ResourceWatch

_log = structlog.get_logger("gateway.upstream")

AUTO, MODERN, HANDSHAKE = BACKEND_PROTOCOLS
"""The values of a backend's `protocol` setting."""
BOTH = "both"
"""The era found for a backend that serves both: each request in its client's."""


def with_extensions(session: JsonObject, discovered: JsonObject) -> JsonObject:
    """A dual-era backend's capabilities: its session's, and the 2026 extensions its discover offers."""
    extensions = discovered.get("extensions")
    return {**session, "extensions": extensions} if isinstance(extensions, dict) and extensions else session


class HttpEras:
    """The era half of HttpUpstream (a mixin: it uses the upstream's sessions and exchanges)."""

    name: str
    _declared: dict[str, JsonObject]
    _protocol: str
    _era: str | None
    _detecting: asyncio.Lock
    _wire: ModernWire
    _sessions: dict[SessionKey, BackendSession]
    _headers: CIMultiDict[str]
    _http: HttpTransport | None
    _body: BoundedBody
    _tasks: BackgroundTasks
    _list_changed: ListChangedCallbacks
    _listen: ListenStream
    _updates: ResourceUpdates
    _watch: ResourceWatch

    def _init_eras(self, protocol: str, client_info: Mapping[str, Any]) -> None:
        self._protocol = protocol  # 2026 too is found out first: server/discover says its capabilities
        self._era = HANDSHAKE if protocol == HANDSHAKE else None
        self._declared = {HANDSHAKE: {}, MODERN: {}}  # what the backend declared in each era
        self._detecting = asyncio.Lock()
        self._wire = ModernWire(client_info)
        self._listen = ListenStream(self._body, self._stream_client, self._wire, self._list_changed.fire, self._tasks)
        watching = ListenStream(self._body, self._stream_client, self._wire, lambda _: None, self._tasks,
                                on_updated=lambda message: self._watch.updated(message))
        self._watch = ResourceWatch(watching, self._updates, self._tasks)

    @property
    def server_capabilities(self) -> JsonObject:
        """What the backend declared: at initialize, or in its discover at 2026 (both eras: the session's,
        with the 2026 extensions)."""
        if self._era == MODERN:
            return self._declared[MODERN]
        if self._era == BOTH:
            return with_extensions(self._declared[HANDSHAKE], self._declared[MODERN])
        return self._declared[HANDSHAKE] or self._declared[MODERN]

    @property
    def eras(self) -> tuple[str, ...]:
        """The eras the backend is spoken to in (both for a dual-era backend; none before it is found)."""
        if self._era == BOTH:
            return HANDSHAKE, MODERN
        return (self._era,) if self._era else ()

    def era_of(self, flags: frozenset[str]) -> str | None:
        """The era a request of a client with `flags` goes in (None before the era is found)."""
        if self._era == BOTH:
            return MODERN if AT_2026 in flags else HANDSHAKE
        return self._era

    lists_per_client = True
    """A backend session declares the capabilities of the clients it serves, a 2026 request its client's: the
    backend may list other tools to each (catalogue.variants)."""

    @property
    def announces(self) -> bool:
        """Whether the backend tells of its list changes: in a session, or on a live listen stream at 2026
        (a dual-era backend's 2026 requests can change its lists without a session to tell)."""
        return self._era not in (MODERN, BOTH) or self._listen.live

    @property
    def protocol_version(self) -> str | None:
        """The version the backend speaks: 2026-07-28, or the one its newest session negotiated (None
        before the first exchange). Shown by /admin/backends."""
        if self._era == MODERN:
            return MODERN_VERSION
        return next((s.protocol_version for s in reversed(self._sessions.values()) if s.protocol_version), None)

    def _stream_client(self) -> HttpTransport: ...

    @property
    def list_ttl_ms(self) -> int | None:
        """The cache hint of the backend's lists (2026 only; the catalogue refreshes no later)."""
        return self._wire.list_ttl_ms if self._era == MODERN else None

    async def _ready_session(self, key: SessionKey, headers: CIMultiDict[str]) -> BackendSession: ...

    async def _call(self, session: BackendSession, method: str, params: JsonObject | None,
                    headers: CIMultiDict[str], handlers: Handlers) -> JsonObject: ...

    async def _in_era(self, era: str, method: str, params: JsonObject | None, key: SessionKey,
                      headers: CIMultiDict[str], handlers: Handlers) -> JsonObject:
        if era == HANDSHAKE:
            return await self._session_request(method, params, key, headers, handlers)
        return await self._modern_request(method, params, key, headers, handlers)

    async def _session_request(self, method: str, params: JsonObject | None, key: SessionKey,
                               headers: CIMultiDict[str], handlers: Handlers) -> JsonObject:
        """In the handshake era: in the session for `key`, re-made once if the backend forgot it."""
        params = handshake_params(params)
        session = await self._ready_session(key, headers)
        session.renew(headers)
        try:
            return await self._call(session, method, params, headers, handlers)
        except SessionExpired:
            self._forget(session)
        session = await self._ready_session(key, headers)  # one fresh handshake, one retry
        return await self._call(session, method, params, headers, handlers)

    def _forget(self, session: BackendSession) -> None:
        """Drop `session` unless a concurrent request already replaced it."""
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]

    async def _detect(self, key: SessionKey, headers: CIMultiDict[str]) -> str:
        """The era of a request for `key`, the backend's found out now (one finding at a time) unless known."""
        async with self._detecting:
            if self._era is None:
                self._era = await self._probe(key, headers)
                _log.info("backend era found", backend=self.name, era=self._era)
        return self.era_of(key[1]) or self._era

    async def _probe(self, key: SessionKey, headers: CIMultiDict[str]) -> str:
        if self._protocol == MODERN:
            if await self._discover(headers):
                return MODERN
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: server/discover refused", sent=False)
        try:
            await self._ready_session(key, headers)
        except UpstreamError:
            if self._protocol == HANDSHAKE or not await self._discover(headers):
                raise
            return MODERN
        return BOTH if self._protocol == AUTO and await self._discover(headers) else HANDSHAKE

    async def _discover(self, headers: CIMultiDict[str]) -> bool:
        """Whether the backend serves our 2026 version (its capabilities are kept if so)."""
        try:
            reply = await self._modern_call(spec.SERVER_DISCOVER, None, ("", NONE), headers, NO_HANDLERS)
        except UpstreamError:
            return False
        capabilities = discovered(reply)
        if capabilities is None:
            return False
        self._declared[MODERN] = capabilities
        # Listened to as the catalogue (configured headers, no tenant's): the catalogue lists it so.
        self._listen.start(capabilities, self._headers, lambda: self._era != HANDSHAKE and self._http is not None)
        return True

    async def _after_failure(self, exc: UpstreamError, era: str, key: SessionKey,
                             headers: CIMultiDict[str]) -> str | None:
        """The new era when `exc` says the backend did not run the request and now speaks the other."""
        if self._protocol != AUTO or not (isinstance(exc, Refused) or not exc.sent):
            return None
        async with self._detecting:
            was = self._era
            if was == BOTH:  # it may serve one era now: found again, from scratch
                self._era = await self._found_again(key, headers) or BOTH
            elif was is None or was == era:  # not switched meanwhile by a concurrent request
                self._era = await self._other_era(era, key, headers) or era
            if self._era != was:
                _log.warning("backend era changed", backend=self.name, was=was or era, era=self._era)
            now = self.era_of(key[1])
            return now if now != era else None

    async def _found_again(self, key: SessionKey, headers: CIMultiDict[str]) -> str | None:
        """A dual-era backend's eras after a refusal: its session is made anew, its discover asked again."""
        self._sessions.pop((key[0], key[1] - SESSIONLESS), None)
        try:
            await self._ready_session(key, headers)
        except UpstreamError:
            return MODERN if await self._discover(headers) else None
        return BOTH if await self._discover(headers) else HANDSHAKE

    async def _other_era(self, era: str, key: SessionKey, headers: CIMultiDict[str]) -> str | None:
        if era == HANDSHAKE:
            return MODERN if await self._discover(headers) else None
        try:
            await self._ready_session(key, headers)
        except UpstreamError:
            return None
        return HANDSHAKE

    async def _modern_request(self, method: str, params: JsonObject | None, key: SessionKey,
                              headers: CIMultiDict[str], handlers: Handlers) -> JsonObject:
        if method in LOCAL_AT_2026:
            return {"jsonrpc": "2.0", "id": 0, "result": {}}
        if method in WATCHED and subscribable(self.server_capabilities) and isinstance((params or {}).get("uri"), str):
            await self._watched(method, params["uri"], key[0])  # type: ignore[index]
            return {"jsonrpc": "2.0", "id": 0, "result": {}}
        return await self._modern_call(method, params, key, headers, handlers)

    async def _watched(self, method: str, uri: str, tenant: str) -> None:
        """A (un)subscribe at 2026: the URI joins or leaves the listen stream of the backend's
        subscriptions, under the catalogue's identity as the list-change stream (watch.py)."""
        alive = lambda: self._era != HANDSHAKE and self._http is not None  # noqa: E731
        if method == spec.RESOURCES_SUBSCRIBE:
            await self._watch.subscribe(tenant, uri, self._headers, alive)
        else:
            self._watch.unsubscribe(tenant, uri, self._headers, alive)

    async def _modern_call(self, method: str, params: JsonObject | None, key: SessionKey,
                           headers: CIMultiDict[str], handlers: Handlers) -> JsonObject:
        session = BackendSession(key, headers, protocol_version=MODERN_VERSION)  # no id: nothing to keep

        async def send(sent: JsonObject) -> JsonObject:
            routed = headers.copy()
            routed.update(self._wire.headers(method, sent))
            return await self._call(session, method, sent, routed, handlers)

        envelope = self._wire.envelope(params, answering(handlers[1], key[1]), logs=handlers[0] is not None)
        return self._wire.received(method, await settle(send, envelope, handlers[1]), tasks=TASKS in key[1])
