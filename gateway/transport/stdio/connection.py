"""The stdio transport: one local client, newline-delimited JSON-RPC on stdin and stdout.

A thin adapter over the exchange core, as `transport.http` is: it splits lines, runs each
message as its own task (so a slow tool call never holds up a ping, and a later
`notifications/cancelled` finds the request in flight), writes replies, and turns errors into
JSON-RPC error lines. There are no sessions: the caller's token is fixed at start and verified
again on every message.

Both eras, one per connection, fixed by the client's first request as the official SDK fixes it
for stdio: `initialize` (or anything without the 2026 envelope) opens a handshake connection,
whose version comes from `initialize`; a request carrying the 2026-07-28 envelope opens a 2026
one, each of whose requests is admitted on its own (transport.modern, without the HTTP headers
stdio has none of), gets only its progress and the log messages it asked for, and cancels with
`notifications/cancelled` (stdio's way at 2026). What a backend asks such a client is relayed in
rounds (transport.rounds), as over HTTP. A request of the other era is refused: `initialize` on a
2026 connection -32022, an enveloped request on a handshake one -32600.

Ending: EOF lets requests in flight finish (up to the grace period); a signal or a closed
stdout (broken pipe) cancels them.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from gateway import lifecycle
from gateway.audit import client_of
from gateway.catalogue.audience import Sees
from gateway.config import TenantConfig
from gateway.config.server_model import VirtualServer
from gateway.logs import EventLog, RequestIds
from gateway.protocol import eras, jsonrpc, spec
from gateway.protocol.capabilities import NONE, declared
from gateway.protocol.eras import Envelope
from gateway.protocol.errors import GatewayError, InvalidRequest
from gateway.protocol.jsonrpc import JsonObject
from gateway.protocol.request_state import INPUT_METHODS
from gateway.tenancy import Principal, RequestContext
from gateway.tracing.context import TraceContext, chosen, fresh
from gateway.tracing.conventions import Peer
from gateway.transport.channel import ChannelClosed, ClientChannel
from gateway.transport.credentials import FixedCredentials
from gateway.transport.exchange import Caller, Exchange, Members
from gateway.transport.inflight import CancelledByClient
from gateway.transport.modern import StatelessRequests, error_reply, no_back_channel, wanted
from gateway.transport.requestlog import HTTP_OUTCOMES, request_line
from gateway.transport.rounds import Rounds

if TYPE_CHECKING:
    from gateway.tracing.spans import RequestSpan, Tracing

log = structlog.get_logger("gateway.stdio")

PIPE = Peer("pipe")
"""The stdio client: `network.transport` pipe, no address."""

CLIENT_KEY = ""
"""The one client's key for in-flight requests and the gateway's own requests to it."""


class End(enum.Enum):
    """Why the session ends."""

    EOF = "eof"
    SIGNAL = "signal"
    BROKEN_PIPE = "broken_pipe"


class StdioClient:
    """One local client: reads its lines, runs each message as a task, writes the replies."""

    def __init__(self, *, exchange: Exchange, tenant: TenantConfig, token: str | None,
                 write: Callable[[bytes], None], events: EventLog | None = None, rounds: Rounds | None = None,
                 tracing: Tracing | None = None, server: VirtualServer | None = None) -> None:
        """`rounds`: where a 2026 client's calls are held while it answers their backends' questions;
        `tracing`: each request's SERVER span (tracing on); `server`: the virtual server it is served (--server)."""
        self.exchange = exchange
        self.tracing = tracing
        self.tenant = tenant
        self.server = server
        self.credentials = FixedCredentials(token)  # None: auth.anonymous_tenant
        self.write = write
        self.events = events or EventLog()
        self.channel = StdoutChannel(self)
        self.protocol_version: str = spec.LATEST_VERSION  # until initialize says otherwise
        self.capabilities = NONE  # what it declared at initialize that the gateway can relay
        self.log_level: str | None = None  # its logging/setLevel
        self.client: dict[str, str] | None = None  # its clientInfo from initialize, for the audit record
        self.initialized = False
        self.principal: Principal | None = None  # as its last request authenticated
        self.modern: bool | None = None  # the connection's era, once its first request fixed it
        self.stateless = StatelessRequests(exchange, rounds.seal if rounds is not None else None)
        self.rounds = rounds
        self.requests = 0
        self.ended: End | None = None
        self._request_ids = RequestIds()
        self._lines: asyncio.Queue[bytes | End] = asyncio.Queue()
        self._hurry = asyncio.Event()  # set when in-flight requests must not be waited for
        self._tasks: set[asyncio.Task[None]] = set()
        self._stdout_gone = False

    # --- input, fed by the reader thread through the loop (pipes.LineSink)

    def feed(self, line: bytes) -> None:
        self._lines.put_nowait(line)

    def eof(self) -> None:
        self.end(End.EOF)

    def end(self, reason: End) -> None:
        if reason is not End.EOF:
            self._hurry.set()
        self._lines.put_nowait(reason)

    def oversize(self, limit: int) -> None:
        self.send(jsonrpc.error_response(None, InvalidRequest(f"Invalid Request: message over {limit} bytes")))

    async def serve(self, *, grace: float) -> End:
        """Answer lines until the end; then let requests finish (EOF) or cancel them."""
        while not isinstance(item := await self._lines.get(), End):
            if item.strip():
                self._spawn(self._answer(item))
        self.ended = item
        log.info("stdio_ending", reason=item.value, in_flight=len(self._tasks))
        await self._finish(item, grace)
        self.exchange.asks.abandon(CLIENT_KEY)
        return item

    async def _finish(self, reason: End, grace: float) -> None:
        tasks = list(self._tasks)
        if tasks and reason is End.EOF:
            await lifecycle.wait_unless(asyncio.gather(*tasks, return_exceptions=True),
                                        cancel_on=self._hurry, timeout=grace)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- messages

    async def _answer(self, line: bytes) -> None:
        started = time.perf_counter()
        request_id = self._request_ids()
        data: Any = None
        ctx: RequestContext | None = None
        span: RequestSpan | None = None
        principal: Principal | None = None
        outcome = "ok"
        try:
            data = jsonrpc.loads(line)
            if self.tracing is not None and type(data) is dict:  # before auth: a JWKS fetch is in it
                span = self.tracing.server(data, None, _pipe)
                span.activate()
            principal = self.principal = await self.exchange.authenticate(self.credentials, data)
            tenant = await self.exchange.admit(principal, data)
            if self._speaks_2026(data):
                ctx, reply = await self._answer_2026(data, (principal, tenant), request_id, span, len(line))
            else:
                ctx = self._context(data, (principal, tenant), request_id, span)
                ctx.size = len(line) if type(data) is dict else 0  # the audit record's bytes in (a batch's: encoded)
                reply = await self.exchange.handle(data, ctx, self._members())
                self._observe(data)
            self.send(reply)
            outcome = ctx.outcome if ctx is not None else outcome
        except GatewayError as exc:  # no JSON-RPC reply came from the core: this line's error is one
            outcome = HTTP_OUTCOMES.get(exc.http_status, "bad_request")
            if span is not None:
                span.failed(exc.code, exc.message)
            self.send(error_reply(jsonrpc.id_of(data), exc) if self.modern else
                      jsonrpc.error_response(jsonrpc.id_of(data), exc))
            if principal is not None:  # refused after authentication (a rate, a budget): audited (auditing on)
                await self.exchange.refused(principal, data, exc, request_id=request_id,
                                            traceparent=ctx.traceparent if ctx else None, ctx=ctx)
        finally:
            if span is not None:
                span.finish(ctx)
        if _is_request(data):
            self.requests += 1
            line_fields = request_line(request_id, ctx.traceparent if ctx else None, ctx.principal if ctx else None,
                                       ctx, outcome, time.perf_counter() - started)
            line_fields["transport"] = "stdio"
            self.events.write(logging.INFO, line_fields)

    def _context(self, data: Any, caller: Caller, request_id: str, span: RequestSpan | None) -> RequestContext:
        """A handshake-era request's context; its trace: its span's, else its `_meta`'s, else a new one."""
        if span is not None:
            trace = TraceContext(span.traceparent)
        else:
            params = data.get("params") if type(data) is dict else None
            trace = chosen(params.get("_meta") if type(params) is dict else None, fresh())
        return RequestContext(caller[0], caller[1], request_id, self.protocol_version, channel=self.channel,
                              capabilities=self.capabilities, log_level=self.log_level, settings=self,
                              traceparent=trace.traceparent, tracestate=trace.tracestate, span=span,
                              server=self.server, client=self.client)

    def _members(self) -> Members | None:
        """A batch member's SERVER span (tracing on)."""
        return None if self.tracing is None else functools.partial(self.tracing.server, header=None, peer=_pipe)

    def _speaks_2026(self, data: Any) -> bool:
        """Whether `data` is served at 2026-07-28: the connection's era, fixed by its first request; an
        enveloped request on a handshake connection is refused."""
        request = isinstance(data, dict) and "id" in data and "method" in data
        if self.modern is None and request:
            self.modern = data["method"] != spec.INITIALIZE and eras.claims_modern(data)
        if self.modern is False and request and eras.claims_modern(data):
            raise InvalidRequest("Invalid Request: this connection opened in the handshake era (initialize); "
                                 "it takes no 2026-07-28 requests")
        return bool(self.modern)

    async def _answer_2026(self, data: Any, caller: Caller, request_id: str, span: RequestSpan | None,
                           size: int) -> tuple[RequestContext | None, JsonObject | None]:
        """One 2026 message: its context and reply (None, None for a notification)."""
        method = data.get("method") if isinstance(data, dict) else None
        if method == spec.INITIALIZE:
            params = data.get("params")
            version = params.get("protocolVersion") if isinstance(params, dict) else None
            raise eras.unsupported(version if isinstance(version, str) else "")
        if method == spec.CANCELLED and "id" not in data:  # stdio cancels by notification at 2026 too
            cancel = RequestContext(caller[0], caller[1], request_id, spec.MODERN_VERSIONS[-1], method=method)
            await self.exchange.handle_message(jsonrpc.parse_message(data), cancel)
            return None, None
        admitted = self.stateless.admit(data, None, caller, request_id, fresh(), span)
        if admitted is None:
            return None, None
        message, ctx = admitted
        assert ctx.envelope is not None
        ctx.server, ctx.size = self.server, size
        stream = RequestStdout(self, ctx.envelope)
        if self.rounds is not None and message.method in INPUT_METHODS and (
                ctx.capabilities or "requestState" in message.params):  # type: ignore[operator]
            try:  # its backend may ask its client: in rounds (a cancel drops the round)
                return ctx, await self.exchange.inflight.run((CLIENT_KEY, message.id),
                                                             self.rounds.handle(message, ctx, stream))
            except CancelledByClient:
                ctx.outcome = "cancelled"
                return ctx, None
        ctx.channel = stream
        return ctx, await self.exchange.run_request(message, ctx)

    def _observe(self, data: Any) -> None:
        """What the transport itself tracks of a message the core accepted: the negotiated version,
        and whether the client is ready."""
        for message in data if isinstance(data, list) else (data,):
            method = message.get("method") if isinstance(message, dict) else None
            if method == spec.INITIALIZE and "id" in message:
                params = message.get("params")
                params = params if isinstance(params, dict) else {}
                self.protocol_version = spec.negotiate_version(params.get("protocolVersion"))
                self.capabilities = declared(params.get("capabilities"))
                self.client = client_of(params.get("clientInfo"))
            elif method == spec.INITIALIZED:
                self.initialized = True

    async def set_log_level(self, session_id: str, level: str) -> None:
        """The client's logging/setLevel (ClientSettings: stdio has one client, no session store)."""
        self.log_level = level

    # --- output

    @property
    def reachable(self) -> bool:
        return not self._stdout_gone

    def send(self, message: JsonObject | list[JsonObject] | None) -> None:
        if message is None or self._stdout_gone:
            return
        try:
            self.write(jsonrpc.dumps(message) + b"\n")
        except OSError as exc:  # EPIPE above all: the client closed its end
            self._stdout_gone = True
            log.info("stdio_client_gone", error=exc.strerror or str(exc))
            self.end(End.BROKEN_PIPE)

    def deliver(self, tenants: set[str], message: JsonObject, sees: Sees | None = None) -> None:
        """A notification for every client of these tenants (that `sees` admits): ours, once it is ready."""
        if not self.initialized or self.tenant.name not in tenants:
            return
        if sees is None or sees(self.tenant.name, self.principal):
            self.send(message)


class StdoutChannel(ClientChannel):
    """The way back to the stdio client: its stdout; its answers come back on stdin."""

    __slots__ = ("_client",)

    def __init__(self, client: StdioClient) -> None:
        super().__init__(client.exchange.asks, CLIENT_KEY)
        self._client = client

    async def send(self, message: JsonObject) -> None:
        if not self._client.reachable:
            raise ChannelClosed("the client closed its stdout")
        self._client.send(message)


class RequestStdout(StdoutChannel):
    """A 2026 request's way back on stdout: its progress and the log messages it asked for (`modern.wanted`),
    never a request of ours (a call that may ask its client runs in rounds)."""

    __slots__ = ("envelope",)

    def __init__(self, client: StdioClient, envelope: Envelope) -> None:
        super().__init__(client)
        self.envelope = envelope

    async def notify(self, message: JsonObject) -> None:
        if wanted(message, self.envelope):
            await self.send(message)

    async def ask(self, method: str, params: JsonObject | None, *, timeout: float) -> JsonObject:  # noqa: ASYNC109
        raise no_back_channel(method)


def _pipe(_source: Any) -> Peer:
    return PIPE


def _is_request(data: Any) -> bool:
    """A request or a batch (what gets a log line; notifications and responses do not)."""
    return isinstance(data, list) or (isinstance(data, dict) and "id" in data and "method" in data)
