"""The hand-written upstream HTTP/1.1 client: one keep-alive pool per backend.

Why not aiohttp's `ClientSession` (upstream/http/aiohttp_client.py, kept as the reference behind
the same interface): on the tools/call path it cost several times the CPU of this client per
request, and it was the gateway's largest single cost (bench/FIGURES.md). Streamable HTTP needs only a
small part of HTTP: POST, GET and DELETE with a byte body; replies with Content-Length,
chunked, or read-to-close bodies; streamed reading for SSE; TLS for https://. Parsing and
the per-connection rules are in upstream/http/connection.py; this module does pooling, the one
retry of a stale keep-alive connection, redirects, and connecting (happy eyeballs).

Errors: `ConnectFailed` when no connection could be made (so not one byte was sent),
`BadReply` for a reply that breaks HTTP or the limits, and `TransportFailed` for anything
else after that (reset, early close).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from collections.abc import Mapping

import aiohappyeyeballs

from gateway.upstream.http.client import (
    ACCEPT_ENCODING,
    IDEMPOTENT,
    USER_AGENT,
    BadReply,
    ClientOptions,
    ConnectFailed,
    ConnectionReset,
    Consume,
    T,
    Target,
    TransportFailed,
    redirect_path,
)
from gateway.upstream.http.connection import Connection, Response
from gateway.upstream.http.proxy import Proxy
from gateway.upstream.slots import Slots

REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))
HAPPY_EYEBALLS_DELAY = 0.25
"""Seconds before the next address is tried alongside one that has not answered (RFC 8305)."""


class HttpClient:
    """Requests to one backend URL over at most `options.max_connections` pooled connections."""

    def __init__(self, url: str, options: ClientOptions) -> None:
        self.target = Target.parse(url, options.tls)
        self._idle_seconds = options.idle_seconds
        self._proxy, self._proxy_error = self._proxy_from_env() if options.proxy_from_env else (None, None)
        forward = self._proxy is not None and self.target.tls is None  # plain http: the proxy gets absolute URLs
        self._origin = self.target.url_for("") if forward else ""
        self._fixed = f"HTTP/1.1\r\nHost: {self.target.authority}\r\nUser-Agent: {USER_AGENT}\r\n" \
                      f"Accept-Encoding: {ACCEPT_ENCODING}\r\n{self._proxy.header_lines() if forward else ''}"
        self._slots = Slots(options.max_connections)
        self._idle: deque[Connection] = deque()  # oldest first
        self._busy: set[Connection] = set()
        self._reaper: asyncio.TimerHandle | None = None
        self._closed = False

    async def send(self, method: str, headers: Mapping[str, str], body: bytes | None, consume: Consume[T]) -> T:
        """Send one request and return what `consume` makes of its reply (headers in, body unread).

        If `consume` does not read the body to its end, or fails, or is cancelled, the
        connection is closed: a reply half-read must never be mistaken for the next one.
        (A callback rather than a context manager: this is the per-call hot path.)
        """
        head = self._head(method, self.target.path, headers, body)
        if not self._slots.try_take():
            await self._slots.take()
        connection: Connection | None = None
        try:
            connection, response = await self._request(head, body, method in IDEMPOTENT)
            if response.status in REDIRECT_STATUSES:
                connection, response = await self._redirected(connection, response, method, headers, body)
            return await consume(response)
        except BaseException:
            if connection is not None:
                connection.close()
            raise
        finally:
            if connection is not None:
                self._release(connection)
            self._slots.give()

    async def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        for connection in (*self._idle, *self._busy):
            connection.close()
        self._idle.clear()

    # --- one exchange ---------------------------------------------------------------------

    async def _request(self, head: bytes, body: bytes | None, idempotent: bool) -> tuple[Connection, Response]:
        """Send on a pooled connection; once more on a fresh one if it was stale and that is safe."""
        connection = self._pooled() or await self._connect()
        try:
            return connection, await self._sent(connection, head, body)
        except BaseException as exc:
            self._drop(connection)
            if not (isinstance(exc, TransportFailed) and _may_resend(connection, exc, idempotent)):
                raise
        connection = await self._connect()
        try:
            return connection, await self._sent(connection, head, body)
        except BaseException:
            self._drop(connection)
            raise

    def _sent(self, connection: Connection, head: bytes, body: bytes | None) -> asyncio.Future[Response]:
        """Write the request; the future is its reply's head (a future, not a coroutine: the hot path)."""
        self._busy.add(connection)
        return connection.send(head, body)

    def _drop(self, connection: Connection) -> None:
        self._busy.discard(connection)
        connection.close()

    async def _redirected(self, connection: Connection, response: Response, method: str,
                          headers: Mapping[str, str], body: bytes | None) -> tuple[Connection, Response]:
        """Follow a same-origin 307/308 once (an app mounted at /mcp redirecting to /mcp/)."""
        self._drop(connection)  # its body is not worth reading
        path = redirect_path(self.target, response.status, response.headers.get("location"))
        connection, response = await self._request(self._head(method, path, headers, body), body, method in IDEMPOTENT)
        if response.status in REDIRECT_STATUSES:
            connection.close()
            raise BadReply(f"HTTP {response.status} redirect to {response.headers.get('location')} after a "
                           f"redirect: not followed")
        return connection, response

    def _head(self, method: str, path: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        fields = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
        # A line break inside a name or value would let it write headers of its own.
        if fields.count("\r") + fields.count("\n") != 2 * len(headers) or "\0" in fields:
            raise ValueError("invalid character in an upstream HTTP header")
        length = f"Content-Length: {len(body)}\r\n" if body is not None else ""
        return f"{method} {self._origin}{path} {self._fixed}{fields}{length}\r\n".encode()

    # --- the pool -------------------------------------------------------------------------

    def _pooled(self) -> Connection | None:
        """An idle connection fit for reuse, if there is one (no coroutine: the hot path)."""
        if self._closed:
            raise ConnectFailed("client closed")
        now = asyncio.get_running_loop().time()
        while self._idle:
            connection = self._idle.pop()  # the most recent: the likeliest to be alive
            if connection.usable and now - connection.idle_since < self._idle_seconds \
                    and not connection.closed_by_peer():
                return connection
            connection.close()
        return None

    def _release(self, connection: Connection) -> None:
        self._busy.discard(connection)
        if connection.reusable() and not self._closed:
            loop = asyncio.get_running_loop()
            connection.idle_since = loop.time()
            self._idle.append(connection)
            if self._reaper is None:
                self._reaper = loop.call_later(self._idle_seconds, self._reap)
        else:
            connection.close()

    def _reap(self) -> None:
        """Close connections idle too long, so a burst's sockets do not stay open for ever."""
        loop = asyncio.get_running_loop()
        self._reaper = None
        while self._idle and loop.time() - self._idle[0].idle_since >= self._idle_seconds:
            self._idle.popleft().close()
        if self._idle:
            self._reaper = loop.call_at(self._idle[0].idle_since + self._idle_seconds, self._reap)

    async def _connect(self) -> Connection:
        """A new connection (through the proxy, if any); TLS to the backend inside a proxy's tunnel."""
        target, proxy, loop = self.target, self._proxy, asyncio.get_running_loop()
        if self._proxy_error is not None:
            raise ConnectFailed(self._proxy_error)
        host, port = (proxy.host, proxy.port) if proxy else (target.host, target.port)
        sock = await self._socket(host, port)
        try:
            if proxy is not None and target.tls is not None:
                await proxy.tunnel(sock, target)
            _, connection = await loop.create_connection(
                Connection, sock=sock, ssl=target.tls, server_hostname=target.host if target.tls else None,
            )
        except ConnectFailed:
            sock.close()
            raise
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            raise ConnectFailed(f"cannot connect: {exc}") from exc
        return connection

    async def _socket(self, host: str, port: int) -> socket.socket:
        """A connected socket; of several addresses, each gets a head start, then the next joins in."""
        loop = asyncio.get_running_loop()
        try:
            addresses = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            return await aiohappyeyeballs.start_connection(addresses, happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
                                                           interleave=1)
        except OSError as exc:
            raise ConnectFailed(f"cannot connect: {exc}") from exc

    def _proxy_from_env(self) -> tuple[Proxy | None, str | None]:
        """The environment's proxy for this backend, or why it cannot be used (then no request is sent)."""
        try:
            return Proxy.from_env(self.target), None
        except ValueError as exc:
            return None, str(exc)


def _may_resend(connection: Connection, error: TransportFailed, idempotent: bool) -> bool:
    """Whether a request that failed on `connection` may go once more on a fresh one.

    A reused connection that fails before one byte of the reply was most likely closed by
    the server while idle (keep-alive timeouts differ: gunicorn 2 s). Repeating is safe for
    an idempotent method, and after a reset (the server's kernel had the request unread);
    a clean close after a POST went out may follow the backend acting on it.
    """
    stale = connection.requests > 1 and not connection.received
    return stale and (idempotent or isinstance(error, ConnectionReset))
