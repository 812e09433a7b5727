"""The MCP Streamable HTTP endpoint: POST, GET and DELETE on `server.path`.

A thin adapter over the exchange core: it checks the HTTP framing (media types, body size,
the session header), reads and writes bytes, and leaves every MCP decision to `Exchange`.
Errors it raises become HTTP replies in `transport.errors`.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from aiohttp import web

from gateway.audit import client_of
from gateway.config import Config
from gateway.config.server_model import VirtualServer
from gateway.protocol import eras, jsonrpc, spec
from gateway.protocol.capabilities import declared
from gateway.protocol.errors import (
    BadRequest,
    GatewayError,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
)
from gateway.protocol.jsonrpc import JsonObject, Message
from gateway.protocol.request_state import INPUT_METHODS
from gateway.protocol.routing_headers import VERSION_KEY
from gateway.protocol.sse import encode_event
from gateway.tenancy import Principal, RequestContext
from gateway.tracing.context import TraceContext, chosen
from gateway.transport.credentials import HttpCredentials
from gateway.transport.exchange import Caller, Exchange
from gateway.transport.held import LARGE_REPLY
from gateway.transport.http.channels import KEEPALIVE, SSE_HEADERS, PostStream, SessionStream
from gateway.transport.http.framing import read_body, require_accept, require_json_content
from gateway.transport.http.replies import send_json
from gateway.transport.http.streams import StreamHub
from gateway.transport.http.virtual import add_server_routes, served, session_server
from gateway.transport.modern import StatelessRequests, error_reply, reply_status
from gateway.transport.requestlog import (
    CONTEXT,
    PRINCIPAL,
    REQUEST_ID,
    SPAN,
    TRACE,
    given_trace,
    peer_of,
    stream_headers,
)
from gateway.transport.rounds import Rounds
from gateway.transport.sessions import Session, SessionStore

if TYPE_CHECKING:
    from gateway.tracing.spans import RequestSpan, Tracing

KEEPALIVE_SECONDS = 15.0
"""An SSE comment this often keeps idle GET streams alive through proxies."""


class McpEndpoint:
    """The three handlers, bound to the app's exchange core, sessions and streams at start-up."""

    exchange: Exchange
    sessions: SessionStore
    streams: StreamHub
    stateless: StatelessRequests
    rounds: Rounds | None = None
    tracing: Tracing | None = None  # set by the app when tracing is on

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
        add_server_routes(app, self.post, self.get, self.delete)  # virtual servers: the same handlers

    # ---------------------------------------------------------------- POST

    async def post(self, request: web.Request) -> web.StreamResponse:
        require_json_content(request)
        require_accept(request, spec.JSON, spec.SSE)
        data = jsonrpc.loads(raw := await read_body(request, self.max_body, self.body_timeout))
        span = self._span(request, data) if self.tracing is not None else None  # before auth: a JWKS fetch is in it
        # _admit's two steps, inline: one coroutine fewer on every call (and so are both eras' below)
        credentials = HttpCredentials(request, self.config)
        principal = request[PRINCIPAL] = await self.exchange.authenticate(credentials, data)
        try:  # a refusal from here on has an authenticated caller: audited (auditing on)
            caller = principal, await self.exchange.admit(principal, data)
            server = served(request, self.exchange.dispatcher.config, principal) if request.match_info else None
            if _stateless(request, data):  # admitted without a session, or refused with its own HTTP status
                try:
                    admitted = self.stateless.admit(data, request.headers, caller, request[REQUEST_ID], request[TRACE],
                                                    span)
                except GatewayError as exc:
                    return _json(error_reply(jsonrpc.id_of(data), exc), status=eras.http_status(exc.code))
                if admitted is None:  # a notification
                    return web.Response(status=202)
                message, ctx = admitted
                request[CONTEXT] = ctx
                ctx.server, ctx.size = server, len(raw)  # (size: the audit record's bytes in)
                self.exchange.check_scopes(caller, message.method, message.params, credentials, server)
                stream = PostStream(request, self.exchange.asks, "", ctx.envelope)
                if self.rounds is not None and message.method in INPUT_METHODS and (
                        ctx.capabilities or "requestState" in message.params):  # type: ignore[operator]
                    # its backend may ask its client (who declared what it may be asked), or a retry: in rounds.
                    # Not opened early for progress: the round's in-flight slot, or 429, comes first.
                    return await self._reply(request, stream, await self.rounds.handle(message, ctx, stream), ctx)
                ctx.channel, run = stream, self.stateless.run
            else:
                if isinstance(data, list):
                    return await self._post_batch(request, caller, data, server)
                message = jsonrpc.parse_message(data)
                self.exchange.check_scopes(caller, message.method, message.params, credentials, server)
                if message.method == spec.INITIALIZE:
                    return await self._post_initialize(request, caller, message, server)
                session = await self._session(request, caller[0])
                ctx = self._context(request, caller, session, message.method, message.params, span, server)
                ctx.size = len(raw)  # the audit record's bytes in (a batch's members: encoded)
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
                if reply is None:
                    return await self._finish(stream, None, ctx) if stream.streaming else web.Response(status=202)
                status = reply_status(reply) if ctx.envelope is not None and "error" in reply else 200
                body = jsonrpc.dumps(reply)
                del reply  # and the encoded result it holds: only `body` is in flight from here
            finally:
                self.exchange.release_slot(caller[1])
            if stream.streaming:
                return await self._finish(stream, body, ctx)
            if len(body) < LARGE_REPLY:
                return web.Response(body=body, status=status, content_type=spec.JSON)
            return await send_json(request, body, self.exchange.replies, caller[0].tenant, status=status)
        except GatewayError as exc:
            await self.exchange.refused(principal, data, exc, request_id=request[REQUEST_ID],
                                        traceparent=request[TRACE].traceparent, ctx=request.get(CONTEXT))
            raise

    async def _post_initialize(self, request: web.Request, caller: Caller, message: Message,
                               server: VirtualServer | None) -> web.Response:
        if not message.is_request:
            raise InvalidRequest("Invalid Request: initialize must be a request")
        params = message.params or {}
        version = spec.negotiate_version(params.get("protocolVersion"))
        tasks_version = version if server is None else None  # a virtual server serves no tasks (session_tasks)
        session = await self.sessions.create(caller[0], version, declared(params.get("capabilities"), tasks_version),
                                             server.name if server else "", client_of(params.get("clientInfo")))
        ctx = self._context(request, caller, session, message.method, params, request.get(SPAN), server)
        reply = await self.exchange.handle_message(message, ctx)
        return _json(reply, headers={spec.SESSION_HEADER: session.id})

    async def _post_batch(self, request: web.Request, caller: Caller, items: list[Any],
                          server: VirtualServer | None) -> web.Response:
        session = await self._session(request, caller[0])
        ctx = self._context(request, caller, session, None, None, None, server)
        members = None
        if self.tracing is not None:  # each member its own SERVER span
            members = functools.partial(self.tracing.server, header=given_trace(request), peer=peer_of,
                                        source=request)
        replies = await self.exchange.handle_batch(items, ctx, members)
        if not replies:
            return web.Response(status=202)
        body = jsonrpc.dumps(replies)
        del replies
        return await send_json(request, body, self.exchange.replies, caller[0].tenant)

    # ---------------------------------------------------------------- GET and DELETE

    async def get(self, request: web.Request) -> web.StreamResponse:
        """The session's server-to-client stream (e.g. notifications/tools/list_changed)."""
        await self._refuse_stateless(request)
        require_accept(request, spec.SSE)
        caller = await self._admit(request, None)
        session = await self._session(request, caller[0])
        queue = self.streams.open(session.id, session.tenant, caller[1].limits.streams, caller[0])
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

    async def _reply(self, request: web.Request, stream: PostStream, reply: JsonObject | None,
                     ctx: RequestContext) -> web.StreamResponse:
        """A 2026 round's reply: on its stream if it became one, else JSON with its error code's status."""
        if reply is None:
            return await self._finish(stream, None, ctx) if stream.streaming else web.Response(status=202)
        status = reply_status(reply) if "error" in reply else 200
        body = jsonrpc.dumps(reply)
        del reply
        if stream.streaming:
            return await self._finish(stream, body, ctx)
        return await send_json(request, body, self.exchange.replies, ctx.principal.tenant, status=status)

    async def _finish(self, stream: PostStream, body: bytes | None, ctx: RequestContext) -> web.StreamResponse:
        return await stream.finish(body, self.exchange.replies, ctx.principal.tenant)

    def session_channel(self, session_id: str) -> SessionStream:
        """The way to one session's client outside any request of its own (its GET stream)."""
        return SessionStream(self.streams, self.exchange.asks, session_id)

    # ---------------------------------------------------------------- checks

    async def _admit(self, request: web.Request, data: Any) -> Caller:
        """Every request is authenticated, its tenant must exist (403), be within its rate (429), and
        hold the scopes every request needs (403)."""
        credentials = HttpCredentials(request, self.config)
        principal = request[PRINCIPAL] = await self.exchange.authenticate(credentials, data)
        caller = principal, await self.exchange.admit(principal, data)
        served(request, self.exchange.dispatcher.config, principal)  # a virtual server's: 404 unless it admits them
        self.exchange.check_scopes(caller, None, None, credentials)
        return caller

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
        if session is None or not session.belongs_to(principal, session_server(request)):
            raise NotFound("Not Found: unknown or ended session")
        return session

    def _context(self, request: web.Request, caller: Caller, session: Session, method: str | None,
                 params: JsonObject | None, span: RequestSpan | None, server: VirtualServer | None) -> RequestContext:
        """A session's request context. Its trace: its span's, or (tracing off) its `_meta`'s, else the headers'."""
        trace = request[TRACE]  # set with REQUEST_ID (requestlog): no Mapping.get
        if span is None and params is not None and (meta := params.get("_meta")) is not None:
            trace = chosen(meta, trace)  # the log line names it: it is the trace the backends continue
        ctx = request[CONTEXT] = RequestContext(
            caller[0], caller[1], request[REQUEST_ID], session.protocol_version, session.id, method,
            capabilities=session.capabilities, log_level=session.log_level, settings=self.sessions,
            traceparent=span.traceparent if span is not None else trace.traceparent, tracestate=trace.tracestate,
            span=span, server=server, seal=self.stateless.seal,  # 2025-11-25 task handles (dispatch.session_tasks)
            client=session.client)
        return ctx

    def _span(self, request: web.Request, data: Any) -> RequestSpan | None:
        """The SERVER span of a single message (a batch's members get theirs in the exchange), made current."""
        if type(data) is not dict:
            return None
        assert self.tracing is not None
        span = request[SPAN] = self.tracing.server(data, given_trace(request), peer_of, request)
        if span.recording:
            span.activate()
            request[TRACE] = TraceContext(span.traceparent)  # a refusal's log line names the span's trace
        return span


async def _pump(response: web.StreamResponse, queue: asyncio.Queue[tuple[str, bytes]]) -> None:
    while True:
        try:
            async with asyncio.timeout(KEEPALIVE_SECONDS):
                event_id, data = await queue.get()
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


def _stateless(request: web.Request, data: Any) -> bool:
    """The era, header first: a version header that names no handshake-era version means 2026, and
    so does a header-less body whose envelope names one (its ladder then finds the header missing)."""
    version = request.headers.get(VERSION_KEY)
    return eras.is_modern(version) or (version is None and eras.claims_modern(data))


def _json(reply: Any, headers: dict[str, str] | None = None, status: int = 200) -> web.Response:
    return web.Response(body=jsonrpc.dumps(reply), status=status, content_type=spec.JSON, headers=headers)
