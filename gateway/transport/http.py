"""The MCP Streamable HTTP endpoint: POST, GET and DELETE on `server.path`.

A thin adapter over the exchange core: it checks the HTTP framing (media types, body size,
the session header), reads and writes bytes, and leaves every MCP decision to `Exchange`.
Errors it raises become HTTP replies in `transport.errors`.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from aiohttp import web

from gateway.config import Config
from gateway.errors import (
    BadRequest,
    GatewayError,
    InvalidRequest,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    ParseError,
    PayloadTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
)
from gateway.protocol import eras, jsonrpc, spec
from gateway.protocol.capabilities import declared
from gateway.protocol.eras import Envelope
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.protocol.request_state import INPUT_METHODS
from gateway.protocol.routing_headers import VERSION_KEY
from gateway.protocol.sse import encode_event
from gateway.tenancy import Principal, RequestContext
from gateway.transport.channel import ChannelClosed, ClientChannel, PendingAsks
from gateway.transport.credentials import HttpCredentials
from gateway.transport.exchange import Caller, Exchange
from gateway.transport.modern import StatelessRequests, error_reply, no_back_channel, reply_status, wanted
from gateway.transport.requestlog import CONTEXT, PRINCIPAL, REQUEST_ID, TRACEPARENT, stream_headers
from gateway.transport.rounds import Rounds
from gateway.transport.sessions import Session, SessionStore
from gateway.transport.streams import StreamHub

MAX_ACCEPT_CHARS = 1024
"""Longer Accept headers are cut: no real client sends one, and the cache keys stay small."""
KEEPALIVE_SECONDS = 15.0
"""An SSE comment this often keeps idle GET streams alive through proxies."""
SSE_HEADERS = {"Content-Type": spec.SSE, "Cache-Control": "no-cache"}
KEEPALIVE = b": keepalive\n\n"


class McpEndpoint:
    """The three handlers, bound to the app's exchange core, sessions and streams at start-up."""

    exchange: Exchange
    sessions: SessionStore
    streams: StreamHub
    stateless: StatelessRequests
    rounds: Rounds | None = None

    def __init__(self, config: Config) -> None:
        self.config = config
        self.max_body = config.server.max_body_bytes
        self.body_timeout = config.server.body_timeout_seconds

    def bind(self, *, exchange: Exchange, sessions: SessionStore, streams: StreamHub,
             rounds: Rounds | None = None) -> None:
        self.exchange, self.sessions, self.streams = exchange, sessions, streams
        self.stateless = StatelessRequests(exchange, rounds.seal if rounds is not None else None)
        self.rounds = rounds

    def add_routes(self, app: web.Application) -> None:
        path = self.config.server.path
        app.router.add_post(path, self.post)
        app.router.add_get(path, self.get)
        app.router.add_delete(path, self.delete)

    # ---------------------------------------------------------------- POST

    async def post(self, request: web.Request) -> web.StreamResponse:
        _require_json_content(request)
        _require_accept(request, spec.JSON, spec.SSE)
        data = jsonrpc.loads(await self._read_body(request))
        # _admit's two steps, inline: one coroutine fewer on every call (and so are both eras' below)
        principal = request[PRINCIPAL] = await self.exchange.authenticate(HttpCredentials(request, self.config), data)
        caller = principal, await self.exchange.admit(principal, data)
        if _stateless(request, data):  # admitted without a session, or refused with its own HTTP status
            traceparent = request[TRACEPARENT]
            try:
                admitted = self.stateless.admit(data, request.headers, caller, request[REQUEST_ID], traceparent)
            except GatewayError as exc:
                return _json(error_reply(jsonrpc.id_of(data), exc), status=eras.http_status(exc.code))
            if admitted is None:  # a notification
                return web.Response(status=202)
            message, ctx = admitted
            request[CONTEXT] = ctx
            if ctx.traceparent is not traceparent:  # _meta's: the log line shows the trace the backends continue
                request[TRACEPARENT] = ctx.traceparent  # type: ignore[assignment]
            stream = PostStream(request, self.exchange.asks, "", ctx.envelope)
            if self.rounds is not None and message.method in INPUT_METHODS and (
                    ctx.capabilities or "requestState" in message.params):  # type: ignore[operator]
                # its backend may ask its client (who declared what it may be asked), or a retry: in rounds.
                # Not opened early for progress: the round's in-flight slot, or 429, comes first.
                return await _stateless_reply(stream, await self.rounds.handle(message, ctx, stream))
            ctx.channel, run = stream, self.stateless.run
        else:
            if isinstance(data, list):
                return await self._post_batch(request, caller, data)
            message = jsonrpc.parse_message(data)
            if message.method == spec.INITIALIZE:
                return await self._post_initialize(request, caller, message)
            session = await self._session(request, caller[0])
            ctx = self._context(request, caller, session, message.method)
            if not message.is_request:
                await self.exchange.handle_message(message, ctx)
                return web.Response(status=202)
            stream = ctx.channel = PostStream(request, self.exchange.asks, session.id)
            run = self.exchange.dispatch_request
        self.exchange.take_slot(caller[1])  # the tenant's in-flight budget: a refusal (429) before any reply starts
        try:
            if _wants_progress(message):
                await stream.open()
            reply = await run(message, ctx)
            if stream.streaming:
                return await stream.finish(reply)
            if reply is None:
                return web.Response(status=202)
            return _json(reply, status=reply_status(reply) if ctx.envelope is not None and "error" in reply else 200)
        finally:
            self.exchange.release_slot(caller[1])

    async def _post_initialize(self, request: web.Request, caller: Caller, message: Message) -> web.Response:
        if not message.is_request:
            raise InvalidRequest("Invalid Request: initialize must be a request")
        params = message.params or {}
        version = spec.negotiate_version(params.get("protocolVersion"))
        session = await self.sessions.create(caller[0], version, declared(params.get("capabilities")))
        ctx = self._context(request, caller, session, message.method)
        reply = await self.exchange.handle_message(message, ctx)
        return _json(reply, headers={spec.SESSION_HEADER: session.id})

    async def _post_batch(self, request: web.Request, caller: Caller, items: list[Any]) -> web.Response:
        session = await self._session(request, caller[0])
        ctx = self._context(request, caller, session, None)
        replies = await self.exchange.handle_batch(items, ctx)
        return _json(replies) if replies else web.Response(status=202)

    # ---------------------------------------------------------------- GET and DELETE

    async def get(self, request: web.Request) -> web.StreamResponse:
        """The session's server-to-client stream (e.g. notifications/tools/list_changed)."""
        await self._refuse_stateless(request)
        _require_accept(request, spec.SSE)
        caller = await self._admit(request, None)
        session = await self._session(request, caller[0])
        queue = self.streams.open(session.id, session.tenant, caller[1].limits.streams)
        try:
            response = web.StreamResponse(headers=stream_headers(request, SSE_HEADERS))
            await response.prepare(request)
            last_event_id = request.headers.get(spec.LAST_EVENT_ID_HEADER)
            for event_id, data in self.streams.replay(session.id, last_event_id) if last_event_id else ():
                await response.write(encode_event(data, event_id=event_id))
            await _pump(response, queue)
            return response
        finally:
            self.streams.detach(session.id, queue)

    async def delete(self, request: web.Request) -> web.Response:
        await self._refuse_stateless(request)
        caller = await self._admit(request, None)
        session = await self._session(request, caller[0])
        await self.sessions.delete(session.id)  # its end listeners drop its stream and pending asks
        return web.Response(status=204)

    def session_channel(self, session_id: str) -> SessionStream:
        """The way to one session's client outside any request of its own (its GET stream)."""
        return SessionStream(self.streams, self.exchange.asks, session_id)

    # ---------------------------------------------------------------- checks

    async def _read_body(self, request: web.Request) -> bytes:
        limit = self.max_body
        if request.content_length is not None and request.content_length > limit:
            raise PayloadTooLarge(f"Payload Too Large: the limit is {limit} bytes")
        try:
            if request.content.is_eof():  # all there already (the usual case): no deadline to arm
                return await request.read()
            async with asyncio.timeout(self.body_timeout):
                return await request.read()
        except web.HTTPRequestEntityTooLarge as exc:
            raise PayloadTooLarge(f"Payload Too Large: the limit is {limit} bytes") from exc
        except TimeoutError as exc:
            raise RequestTimeout(f"Request Timeout: the body took over {self.body_timeout:g} s") from exc
        except web.RequestPayloadError as exc:  # e.g. Content-Encoding: gzip on a body that is not gzip
            raise ParseError("Parse error: the body could not be decoded") from exc

    async def _admit(self, request: web.Request, data: Any) -> Caller:
        """Every request is authenticated, its tenant must exist (403) and be within its rate (429)."""
        principal = request[PRINCIPAL] = await self.exchange.authenticate(HttpCredentials(request, self.config), data)
        return principal, await self.exchange.admit(principal, data)

    async def _refuse_stateless(self, request: web.Request) -> None:
        """2026-07-28 has no GET stream and no session to DELETE: 405 (once the caller is admitted)."""
        if eras.is_modern(request.headers.get(VERSION_KEY)):
            await self._admit(request, None)
            raise MethodNotAllowed("Method Not Allowed: a 2026-07-28 request is a POST", headers={"Allow": "POST"})

    async def _session(self, request: web.Request, principal: Principal) -> Session:
        """The request's session; missing → 400, unknown, ended or someone else's → 404."""
        session_id = request.headers.get(spec.SESSION_HEADER)
        if not session_id:
            raise BadRequest("Bad Request: Mcp-Session-Id header is required")
        session = await self.sessions.get(session_id)
        if session is None or not session.belongs_to(principal):
            raise NotFound("Not Found: unknown or ended session")
        return session

    def _context(self, request: web.Request, caller: Caller, session: Session,
                 method: str | None) -> RequestContext:
        ctx = request[CONTEXT] = RequestContext(
            caller[0], caller[1], request[REQUEST_ID], session.protocol_version, session.id, method,
            capabilities=session.capabilities, log_level=session.log_level, settings=self.sessions,
            traceparent=request[TRACEPARENT])  # set with REQUEST_ID (requestlog): no Mapping.get
        return ctx


class PostStream(ClientChannel):
    """A POST's way back: one JSON reply, unless something must reach the client first.

    The first notification or request for the client turns the reply into an SSE stream that
    carries them, then the response, then ends (spec: a POST may answer with a stream).
    A 2026 request's (its `envelope` given) carries only its progress and the log messages it
    asked for (`modern.wanted`), and never a request of ours.
    """

    __slots__ = ("_lock", "_response", "envelope", "request")

    def __init__(self, request: web.Request, pending: PendingAsks, client: str,
                 envelope: Envelope | None = None) -> None:
        self.pending, self.client = pending, client  # ClientChannel's, set here: one made per request
        self.request, self.envelope = request, envelope
        self._response: web.StreamResponse | None = None
        self._lock: asyncio.Lock | None = None

    async def open(self) -> web.StreamResponse:
        if self._response is None:
            response = web.StreamResponse(headers=stream_headers(self.request, SSE_HEADERS))
            self._lock = asyncio.Lock()
            self._response = response
            await response.prepare(self.request)
        return self._response

    async def send(self, message: JsonObject) -> None:
        response = await self.open()
        assert self._lock is not None
        async with self._lock:
            try:
                await response.write(encode_event(jsonrpc.dumps(message)))
            except ConnectionError as exc:
                raise ChannelClosed("the client closed the stream") from exc

    async def notify(self, message: JsonObject) -> None:
        if self.envelope is None or wanted(message, self.envelope):
            await self.send(message)

    async def ask(self, method: str, params: JsonObject | None, *, timeout: float) -> JsonObject:  # noqa: ASYNC109
        if self.envelope is not None:  # a call that may ask a 2026 client runs in rounds (transport.rounds)
            raise no_back_channel(method)
        return await super().ask(method, params, timeout=timeout)

    async def keepalive(self) -> None:
        response = await self.open()
        assert self._lock is not None
        async with self._lock:
            try:
                await response.write(KEEPALIVE)
            except ConnectionError as exc:
                raise ChannelClosed("the client closed the stream") from exc

    @property
    def streaming(self) -> bool:
        """Whether the reply became a stream (otherwise it is one JSON body, or 202 for none)."""
        return self._response is not None

    async def finish(self, reply: JsonObject | None) -> web.StreamResponse:
        """The stream's last event (the response) and its end."""
        assert self._response is not None and self._lock is not None
        async with self._lock:
            if reply is not None:  # a cancelled request's stream ends without one (spec)
                await self._response.write(encode_event(jsonrpc.dumps(reply)))
            await self._response.write_eof()
        return self._response


class SessionStream(ClientChannel):
    """A session's way back outside any request: its GET stream (resource updates, list changes)."""

    __slots__ = ("streams",)

    def __init__(self, streams: StreamHub, pending: PendingAsks, session_id: str) -> None:
        super().__init__(pending, session_id)
        self.streams = streams

    async def send(self, message: JsonObject) -> None:
        if not self.streams.send(self.client, message):
            raise ChannelClosed("the session has no open GET stream")


async def _pump(response: web.StreamResponse, queue: asyncio.Queue[tuple[str, bytes]]) -> None:
    while True:
        try:
            event_id, data = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
        except TimeoutError:
            await response.write(KEEPALIVE)
            continue
        if not data:  # the session ended or the gateway is shutting down
            return
        await response.write(encode_event(data, event_id=event_id))


def _wants_progress(message: Message) -> bool:
    """A request that asked for progress is answered as a stream from the start."""
    meta = (message.params or {}).get("_meta")
    return isinstance(meta, dict) and "progressToken" in meta


async def _stateless_reply(stream: PostStream, reply: JsonObject | None) -> web.StreamResponse:
    """A 2026 reply: on its stream if it became one, else JSON with its error code's status."""
    if stream.streaming:
        return await stream.finish(reply)
    if reply is None:
        return web.Response(status=202)
    return _json(reply, status=reply_status(reply) if "error" in reply else 200)


def _require_json_content(request: web.Request) -> None:
    if request.content_type != spec.JSON:
        raise UnsupportedMediaType("Unsupported Media Type: Content-Type must be application/json")


def _require_accept(request: web.Request, *types: str) -> None:
    offered = _media_types(request.headers.get("Accept", "")[:MAX_ACCEPT_CHARS])
    if "*/*" in offered:
        return
    for media in types:
        if media not in offered and f"{media.split('/')[0]}/*" not in offered:
            raise NotAcceptable(f"Not Acceptable: Accept must include {' and '.join(types)}")


@functools.lru_cache(maxsize=256)
def _media_types(accept: str) -> frozenset[str]:
    """The media types an Accept header lists (cached: a client sends the same one every time)."""
    return frozenset(part.split(";", 1)[0].strip().lower() for part in accept.split(","))


def _stateless(request: web.Request, data: Any) -> bool:
    """The era, header first: a version header that names no handshake-era version means 2026, and
    so does a header-less body whose envelope names one (its ladder then finds the header missing)."""
    version = request.headers.get(VERSION_KEY)
    return eras.is_modern(version) or (version is None and eras.claims_modern(data))


def _json(reply: Any, headers: dict[str, str] | None = None, status: int = 200) -> web.Response:
    return web.Response(body=jsonrpc.dumps(reply), status=status, content_type=spec.JSON, headers=headers)
