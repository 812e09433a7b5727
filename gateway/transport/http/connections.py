"""Bounded time for every phase of a client connection, and a cap on how many there are.

aiohttp closes an idle keep-alive connection (`keepalive_timeout`, set from
`server.idle_timeout_seconds`) but gives a client unlimited time to send a request's headers,
and a reply the client never reads stays in the transport's buffer for ever. So each accepted
connection is wrapped in a `GuardedConnection` (an asyncio protocol around aiohttp's own):

- headers: from the first byte of a request (or the connection's start) until a handler runs,
  at most `server.headers_timeout_seconds`; then a 408 and the connection closes;
- writes: a transport whose buffer stays above its high-water mark (the client reads nothing)
  for `server.write_timeout_seconds` is aborted, which frees the buffer at once;
- count: beyond `server.max_connections` (and what the open-file limit allows) a new
  connection gets a 503 and is closed before aiohttp sees it.

The body's deadline is the handler's own (`transport.http`), as only it knows when it reads one.
Deadlines are checked by one sweep a few times a second rather than a timer per request,
so the request path only writes a number.
"""

from __future__ import annotations

import asyncio
import resource
from collections.abc import Callable
from typing import Any, cast

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.config import ServerConfig
from gateway.protocol import jsonrpc
from gateway.protocol.errors import ServiceUnavailable

log = structlog.get_logger("gateway.connections")

RESERVED_FILES = 256
"""Descriptors kept back from the connection cap: backends, Redis, log files, the listener."""
SWEEP_SECONDS = 0.25
"""How often deadlines are checked; a connection may outlive its deadline by this much."""
REFUSAL_LOG_SECONDS = 10.0
"""At most one `connections_refused` line this often, however many are refused."""

_REFUSED_BODY = jsonrpc.dumps(jsonrpc.error_response(None, ServiceUnavailable(
    "Service Unavailable: too many connections")))
REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
           b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(_REFUSED_BODY), _REFUSED_BODY))
HEADERS_TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


def raise_open_file_limit() -> int:
    """Raise this process's open-file soft limit to its hard limit (logged); returns the new soft limit.

    Each connection holds a descriptor: the common soft limit of 1,024 would let a thousand idle
    sockets lock everyone out, whatever the deadlines.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = soft
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        limit = hard
    log.info("open_files_limit", limit=limit, previous=soft)
    return limit if limit != resource.RLIM_INFINITY else 1 << 20


class GuardedConnection(asyncio.Protocol):
    """One client connection: aiohttp's protocol inside, the deadlines of this module around it."""

    __slots__ = ("active", "inner", "make_inner", "owner", "paused_since", "transport", "waiting_since")

    def __init__(self, owner: Connections, make_inner: Callable[[], Any]) -> None:
        self.owner = owner
        self.make_inner = make_inner  # aiohttp's protocol, made once the connection is admitted
        self.inner: asyncio.Protocol
        self.transport: asyncio.Transport | None = None
        self.active = 0  # requests of this connection being handled
        self.waiting_since: float | None = None  # a request has begun but no handler runs yet
        self.paused_since: float | None = None  # the client stopped reading

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's is one without inheriting from it
        if not self.owner.admit(self, transport):
            transport.write(REFUSED)
            transport.close()
            return
        self.transport = transport
        self.waiting_since = self.owner.now
        self.inner = self.make_inner()
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return  # refused: closing already
        if self.active == 0 and self.waiting_since is None:
            self.waiting_since = self.owner.now  # the next request's first bytes
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.transport is not None else None

    def pause_writing(self) -> None:
        self.paused_since = self.owner.now
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.paused_since = None
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:
            return  # refused: aiohttp never saw it
        self.owner.release(self.transport)
        self.inner.connection_lost(exc)

    def expired(self, headers_before: float, writes_before: float) -> str | None:
        """Which deadline this connection missed, if any (and closes it)."""
        assert self.transport is not None
        if self.paused_since is not None and self.paused_since < writes_before:
            self.transport.abort()  # drops the unread reply at once
            return "write"
        if self.active == 0 and self.waiting_since is not None and self.waiting_since < headers_before:
            self.transport.write(HEADERS_TIMED_OUT)
            self.transport.close()
            return "headers"
        return None


class Connections:
    """The process's client connections: the cap, the deadlines' sweep, the request middleware."""

    def __init__(self, *, max_connections: int, headers_timeout: float, write_timeout: float,
                 clock: Callable[[], float] | None = None) -> None:
        self.max_connections = max_connections
        self.headers_timeout = headers_timeout
        self.write_timeout = write_timeout
        self.clock = clock or asyncio.get_running_loop().time
        self.now = self.clock()  # the sweep's time, read by the connections instead of a clock call each
        self.open: dict[asyncio.BaseTransport, GuardedConnection] = {}
        self.refused = 0
        self._refusals_logged_at = float("-inf")

    @classmethod
    def for_server(cls, server: ServerConfig, open_files: int) -> Connections:
        cap = min(server.max_connections, max(1, open_files - RESERVED_FILES))
        if cap < server.max_connections:
            log.warning("max_connections_lowered", configured=server.max_connections, limit=cap,
                        open_files=open_files)
        return cls(max_connections=cap, headers_timeout=server.headers_timeout_seconds,
                   write_timeout=server.write_timeout_seconds)

    def protocol_factory(self, inner: Callable[[], Any]) -> Callable[[], GuardedConnection]:
        """Wrap aiohttp's protocol factory (`runner.server`)."""
        return lambda: GuardedConnection(self, inner)

    def admit(self, connection: GuardedConnection, transport: asyncio.BaseTransport) -> bool:
        if len(self.open) >= self.max_connections:
            self._refuse()
            return False
        self.open[transport] = connection
        return True

    def release(self, transport: asyncio.BaseTransport) -> None:
        self.open.pop(transport, None)

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """A handler runs: the request's headers arrived in time, and its connection is busy."""
        connection = self.open.get(request.transport)  # type: ignore[arg-type]
        if connection is None:
            return await handler(request)
        connection.active += 1
        connection.waiting_since = None
        try:
            return await handler(request)
        finally:
            connection.active -= 1

    async def sweep(self) -> None:
        """Forever: close the connections that missed a deadline."""
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            self.sweep_once()

    def sweep_once(self) -> None:
        self.now = now = self.clock()
        closed = {"headers": 0, "write": 0}
        for connection in list(self.open.values()):
            missed = connection.expired(now - self.headers_timeout, now - self.write_timeout)
            if missed is not None:
                closed[missed] += 1
        if closed["headers"] or closed["write"]:
            log.info("connections_timed_out", headers=closed["headers"], write=closed["write"], open=len(self.open))

    def _refuse(self) -> None:
        self.refused += 1
        if self.now - self._refusals_logged_at >= REFUSAL_LOG_SECONDS:
            self._refusals_logged_at = self.now
            log.warning("connections_refused", limit=self.max_connections, refused_total=self.refused)


class GuardedListener:
    """The listening socket: every connection it accepts is guarded; the sweep runs while it is open."""

    def __init__(self, runner: web.AppRunner, connections: Connections) -> None:
        self.runner = runner
        self.connections = connections
        self._server: asyncio.Server | None = None
        self._sweep: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int, *, reuse_port: bool = False, backlog: int = 1024) -> None:
        server = self.runner.server
        assert server is not None, "runner.setup() first"
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self.connections.protocol_factory(server), host, port,
                                                reuse_port=reuse_port or None, backlog=backlog)
        self._sweep = asyncio.create_task(self.connections.sweep(), name="connection-deadlines")

    def close(self) -> None:
        """Stop accepting; the open connections are aiohttp's to finish (runner.cleanup)."""
        if self._server is not None:
            self._server.close()
        if self._sweep is not None:
            self._sweep.cancel()
