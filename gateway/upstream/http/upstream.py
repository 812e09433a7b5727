"""The Streamable HTTP upstream: MCP over POST (JSON or SSE replies), in either era (eras.py).

One pooled HTTP client (client.py: the builtin or aiohttp's) per backend. In the handshake
era each `session_key` (a tenant, or "" for the catalogue) and set of relayable client capabilities
gets its own backend session (a handshake declaring those capabilities, lazily, once); a 404 means
the backend forgot it: it is re-created and the request sent once more. The catalogue's session,
each that declared capabilities, and every session of a backend that offers resources/subscribe
listen on a GET stream (http/listener.py) for list changes and resource updates (to
`on_resource_updated`, with the session's tenant), and refuse there the backend's requests that
belong to no call; a request on a call's SSE stream goes to that call's `on_request`. Cancelling
the task awaiting `request()` (or its timeout) sends `notifications/cancelled` with the upstream
id. The rest of this folder: session, body (bounded replies), listener (GET streams), listen (2026).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from contextlib import aclosing, suppress
from dataclasses import replace
from functools import partial
from typing import Any

import orjson
import structlog
from multidict import CIMultiDict

from gateway.protocol.capabilities import NONE, RELAYED_METHODS, SESSIONLESS
from gateway.protocol.errors import FailureReason
from gateway.protocol.spec import (
    CANCELLED,
    INITIALIZE,
    INITIALIZED,
    JSON,
    LATEST_VERSION,
    LIST_CHANGED,
    PROGRESS,
    SSE,
)
from gateway.protocol.sse import SseDecoder, SseEvent
from gateway.upstream.base import (
    MAX_RESPONSE_BYTES,
    SESSION_NOTICES,
    BackgroundTasks,
    JsonObject,
    ListChangedCallback,
    ListChangedCallbacks,
    NotificationHandler,
    RequestHandler,
    ResourceUpdatedCallback,
    ResourceUpdates,
    UpstreamError,
    answer_backend_request,
    check_response,
    initialize_params,
    message_kind,
    negotiated_version,
    notification_message,
    progress_token,
    request_message,
    restore_progress_token,
    server_capabilities,
    subscribable,
    swap_progress_token,
)
from gateway.upstream.http.body import BoundedBody
from gateway.upstream.http.client import (
    TRANSPORT_ERRORS,
    BadReply,
    ClientOptions,
    ConnectFailed,
    HttpTransport,
    Response,
)
from gateway.upstream.http.clients import open_client
from gateway.upstream.http.eras import AUTO, HANDSHAKE, HttpEras
from gateway.upstream.http.listener import StreamListener
from gateway.upstream.http.session import (
    CATALOGUE_KEY,
    NO_HANDLERS,
    SESSION_HEADER_KEY,
    BackendSession,
    Handlers,
    OwnAuth,
    Route,
    SessionExpired,
    SessionKey,
    merged_headers,
    own_headers,
)

CLOSE_TIMEOUT = 2.0
"""Seconds close() spends ending backend sessions (DELETE) before giving up."""
NOTIFY_TIMEOUT = 5.0
"""Seconds a best-effort notification may take."""
DEFAULT_RETRY_MS = 1000
"""Reconnect delay for a POST stream closed early when the backend sent no `retry`."""

_log = structlog.get_logger("gateway.upstream")


class HttpUpstream(HttpEras):
    """An MCP backend reached over Streamable HTTP, in either protocol era (eras.py)."""

    def __init__(self, name: str, *, url: str, headers: Mapping[str, str], max_connections: int,
                 protocol_version: str = LATEST_VERSION, client_info: Mapping[str, Any],
                 max_response_bytes: int = MAX_RESPONSE_BYTES, http_client: str = "builtin",
                 client_options: ClientOptions | None = None, protocol: str = AUTO,
                 own_auth: OwnAuth | None = None) -> None:
        self.name, self._url, self._own_auth = name, url, own_auth
        self._headers = CIMultiDict(headers)
        self._max_connections = max_connections
        self._protocol_version = protocol_version
        self._client_info = dict(client_info)
        self._http_client = http_client
        self._client_options = client_options or ClientOptions()
        self._http: HttpTransport | None = None
        self._sessions: dict[SessionKey, BackendSession] = {}
        self._handshake_locks: dict[SessionKey, asyncio.Lock] = {}
        self._ids = itertools.count(1)
        self._tasks = BackgroundTasks(name)
        self._list_changed = ListChangedCallbacks(self._tasks)
        self._updates = ResourceUpdates()
        self._body = BoundedBody(name, max_response_bytes)
        self._stream = StreamListener(self._body, self._stream_client, self._on_unasked, self._tasks)
        self._init_eras(protocol, client_info)

    # --- the Upstream protocol ----------------------------------------------------------

    async def start(self) -> None:
        if self._http is None:  # no client timeouts: request() bounds each exchange with asyncio.timeout
            kind, url, options = self._http_client, self._url, self._client_options
            self._http = open_client(kind, url, replace(options, max_connections=self._max_connections))

    async def request(  # timeout: the per-call budget; None: the caller bounds it
        self, method: str, params: JsonObject | None, *, timeout: float | None,  # noqa: ASYNC109
        session_key: str = "",
        headers: Mapping[str, str] | None = None, on_notification: NotificationHandler | None = None,
        capabilities: frozenset[str] = NONE, on_request: RequestHandler | None = None,
    ) -> JsonObject:
        if headers is None and self._own_auth is not None:  # a request of the gateway's own (its catalogue)
            headers = await own_headers(self._own_auth, self.name)
        merged = merged_headers(self._headers, headers)
        key = (session_key, capabilities)
        if timeout is None:
            return await self._request(method, params, key, merged, (on_notification, on_request))
        try:
            async with asyncio.timeout(timeout):
                return await self._request(method, params, key, merged, (on_notification, on_request))
        except TimeoutError as exc:
            raise UpstreamError(FailureReason.TIMEOUT, f"{self.name}: {method} timed out ({timeout}s)") from exc

    async def notify(self, method: str, params: JsonObject | None, *, session_key: str = "",
                     capabilities: frozenset[str] = NONE) -> None:
        session = self._sessions.get((session_key, capabilities))
        if session is not None:  # no session: the backend has nothing to be notified about
            await self._post_quietly(session, notification_message(method, params))

    def on_list_changed(self, callback: ListChangedCallback) -> None:
        self._list_changed.add(callback)

    def on_resource_updated(self, callback: ResourceUpdatedCallback) -> None:
        self._updates.add(callback)

    async def close(self) -> None:
        http, self._http = self._http, None
        if http is None:
            return
        await self._tasks.cancel_all()
        await self._stream.close()
        sessions = [s for s in self._sessions.values() if s.session_id]
        self._sessions.clear()
        with suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await asyncio.gather(*(self._delete(http, s) for s in sessions), return_exceptions=True)
        await http.close()

    # --- sessions -----------------------------------------------------------------------

    async def _request(self, method: str, params: JsonObject | None, key: SessionKey, headers: CIMultiDict[str],
                       handlers: Handlers) -> JsonObject:
        era = self.era_of(key[1]) or await self._detect(key, headers)
        try:
            if era == HANDSHAKE:
                return await self._session_request(method, params, key, headers, handlers)
            return await self._modern_request(method, params, key, headers, handlers)
        except UpstreamError as exc:  # a backend that restarted as the other era did not run it
            again = await self._after_failure(exc, era, key, headers)
            if again is None:
                raise
        return await self._in_era(again, method, params, key, headers, handlers)

    async def _ready_session(self, key: SessionKey, headers: CIMultiDict[str]) -> BackendSession:
        """The session for `key`, handshaking first if needed (one handshake at a time).

        A failed handshake is marked unsent: the caller's request never left.
        """
        session = self._sessions.get(key)
        if session is not None:  # the usual case, without a lock or a coroutine more
            return session
        if key[1] & SESSIONLESS:  # a 2026 client's era and tasks extension mean nothing to a session
            return await self._ready_session((key[0], key[1] - SESSIONLESS), headers)
        try:
            async with self._handshake_locks.setdefault(key, asyncio.Lock()):
                return self._sessions.get(key) or await self._handshake(key, headers)
        except UpstreamError as exc:
            raise UpstreamError(exc.reason, str(exc), sent=False) from exc

    async def _handshake(self, key: SessionKey, headers: CIMultiDict[str]) -> BackendSession:
        session = BackendSession(key, headers)
        params = initialize_params(self._protocol_version, self._client_info, key[1])
        reply = await self._call(session, INITIALIZE, params, headers, NO_HANDLERS)
        session.protocol_version = negotiated_version(self.name, reply)
        self._declared[HANDSHAKE] = server_capabilities(reply)
        status = await self._send_one_way(session, notification_message(INITIALIZED, None))
        if not 200 <= status < 300:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: initialized got HTTP {status}")
        self._sessions[key] = session
        if key == CATALOGUE_KEY or key[1] or subscribable(self._declared[HANDSHAKE]):  # news may come on it
            self._stream.listen(session, lambda: self._sessions.get(key) is session)
        if not key[1]:  # the plain session, which subscriptions use: a new one holds none
            self._updates.started(key[0])
        return session

    def _client(self) -> HttpTransport:
        if self._http is None:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: upstream not started or closed")
        return self._http

    def _stream_client(self) -> HttpTransport:  # one connection for one GET stream (its listener closes it)
        return open_client(self._http_client, self._url, replace(self._client_options, max_connections=1))

    # --- one request --------------------------------------------------------------------

    async def _call(self, session: BackendSession, method: str, params: JsonObject | None,
                    headers: CIMultiDict[str], handlers: Handlers) -> JsonObject:
        request_id = next(self._ids)
        token = f"{self.name}-{request_id}"  # unique across this upstream's active requests
        params, original = swap_progress_token(params, token)
        route = Route(request_id, token if original is not None else None, original, *handlers)
        try:
            return await self._exchange(session, request_message(request_id, method, params), headers, route)
        except asyncio.CancelledError:
            if method != INITIALIZE:  # initialize must never be cancelled
                self._cancel_upstream(session, request_id)
            raise

    async def _exchange(
        self, session: BackendSession, message: JsonObject, headers: CIMultiDict[str], route: Route
    ) -> JsonObject:
        """POST one request and read its reply; transport failures become `unavailable`."""
        async def consume(resp: Response) -> JsonObject:
            if message["method"] == INITIALIZE:
                session.session_id = resp.headers.get(SESSION_HEADER_KEY)
            return await self._reply(resp, session, route)

        try:
            return await self._client().send("POST", session.post_headers(headers), orjson.dumps(message),
                                             consume)
        except ConnectFailed as exc:  # no connection, so not one byte of the request went out
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: {exc}", sent=False) from exc
        except BadReply as exc:
            raise UpstreamError(FailureReason.BAD_RESPONSE, f"{self.name}: {exc}") from exc
        except TRANSPORT_ERRORS as exc:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: {exc}") from exc

    async def _reply(self, resp: Response, session: BackendSession, route: Route) -> JsonObject:
        if resp.status == 404 and session.session_id:
            raise SessionExpired(self.name)
        if not 200 <= resp.status < 300:
            return await self._body.error_reply(resp, route.request_id)
        if resp.content_type == JSON:
            return check_response(self.name, self._body.decode(await self._body.read(resp)), route.request_id)
        if resp.content_type == SSE:
            return await self._read_stream(resp, session, route)
        raise UpstreamError(FailureReason.BAD_RESPONSE, f"{self.name}: HTTP {resp.status} {resp.content_type}")

    # --- SSE replies --------------------------------------------------------------------

    async def _read_stream(self, resp: Response, session: BackendSession, route: Route) -> JsonObject:
        """Read events up to our response; resume by GET if the backend closes early."""
        decoder = SseDecoder()
        reply = await self._consume(resp, decoder, session, route)
        while reply is None:
            if decoder.last_event_id is None:
                raise UpstreamError(FailureReason.BAD_RESPONSE, f"{self.name}: stream ended without a response")
            reply = await self._resume(decoder, session, route)
        return reply

    async def _resume(self, decoder: SseDecoder, session: BackendSession, route: Route) -> JsonObject | None:
        await asyncio.sleep((decoder.retry or DEFAULT_RETRY_MS) / 1000)
        async def consume(resp: Response) -> JsonObject | None:
            if resp.status != 200 or resp.content_type != SSE:
                raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: resume got HTTP {resp.status}")
            decoder.reconnected()
            return await self._consume(resp, decoder, session, route)

        try:
            return await self._client().send("GET", session.stream_headers(decoder.last_event_id), None, consume)
        except TRANSPORT_ERRORS as exc:  # the POST did go out: even a refused connection is not "unsent"
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: resume failed: {exc}") from exc

    async def _consume(
        self, resp: Response, decoder: SseDecoder, session: BackendSession, route: Route
    ) -> JsonObject | None:
        async with aclosing(self._body.events(resp, decoder)) as events:
            async for event in events:
                reply = await self._on_event(event, session, route)
                if reply is not None:
                    return reply
        return None

    async def _on_event(self, event: SseEvent, session: BackendSession, route: Route) -> JsonObject | None:
        if event.event != "message" or not event.data:
            return None  # priming event or an event type MCP does not use
        message = self._body.decode(event.data)
        kind = message_kind(message)
        if kind == "response":
            return check_response(self.name, message, route.request_id)
        if kind == "notification" and message["method"] in SESSION_NOTICES:
            self._updates.fire(session.key[0], message)
        elif kind == "notification":
            await self._on_notification(message, route)
        elif kind == "request":
            self._on_request(session, message, route)
        return None

    async def _on_notification(self, message: JsonObject, route: Route) -> None:
        if message["method"] in LIST_CHANGED:
            self._list_changed.fire(message["method"])
            return
        if route.handler is None:
            return
        if message["method"] == PROGRESS:
            if route.token is None or progress_token(message) != route.token:
                return  # not about this request's progress
            message = restore_progress_token(message, route.original_token)
        try:
            await route.handler(message)
        except Exception:  # the caller's handler must not break the exchange
            _log.exception("notification handler failed", backend=self.name)

    def _on_request(self, session: BackendSession, request: JsonObject, route: Route) -> None:
        """A request of the backend about this call: relayed to the call's client if it has a handler."""
        if route.on_request is None or request["method"] not in RELAYED_METHODS:
            self._answer(session, request, "the call it belongs to relays no requests")
        else:
            route.on_request(request, partial(self._post_quietly, session))

    # --- messages the gateway sends on its own ---------------------------------------------

    def _answer(self, session: BackendSession, request: JsonObject, why: str) -> None:
        """Refuse a backend->gateway request (or answer ping) so the backend does not hang."""
        self._tasks.spawn(self._post_quietly(session, answer_backend_request(request, why)), "answer")

    def _cancel_upstream(self, session: BackendSession, request_id: int) -> None:
        if self._http is None:
            return
        params = {"requestId": request_id, "reason": "cancelled by the gateway"}
        self._tasks.spawn(self._post_quietly(session, notification_message(CANCELLED, params)), "cancel")

    async def _post_quietly(self, session: BackendSession, message: JsonObject) -> None:
        try:
            async with asyncio.timeout(NOTIFY_TIMEOUT):
                await self._send_one_way(session, message)
        except (UpstreamError, TimeoutError) as exc:
            _log.debug("upstream message lost", backend=self.name, error=str(exc))

    async def _send_one_way(self, session: BackendSession, message: JsonObject) -> int:
        """POST a notification or response; return the HTTP status (202 expected)."""
        headers = session.post_headers(session.headers)
        try:
            return await self._client().send("POST", headers, orjson.dumps(message), _status)
        except TRANSPORT_ERRORS as exc:
            raise UpstreamError(FailureReason.UNAVAILABLE, f"{self.name}: {type(exc).__name__}: {exc}") from exc

    async def _delete(self, http: HttpTransport, session: BackendSession) -> None:
        headers = session.post_headers(session.headers)
        await http.send("DELETE", headers, None, _status)

    # --- the GET stream (server -> gateway messages) --------------------------------------

    def _on_unasked(self, session: BackendSession, message: JsonObject) -> None:
        """A message on a GET stream: a list change (on any session: SDK servers tell the session whose
        call changed the list; the catalogue's re-listings coalesce), a resource update, or a request
        the backend waits on, which belongs to no call: refused, never guessed onto some client."""
        kind = message_kind(message)
        if kind == "notification" and message["method"] in LIST_CHANGED:
            self._list_changed.fire(message["method"])
        elif kind == "notification" and message["method"] in SESSION_NOTICES:
            self._updates.fire(session.key[0], message)
        elif kind == "request":
            self._answer(session, message, "it came on the session's own stream, outside any call")


async def _status(resp: Response) -> int:
    return resp.status
