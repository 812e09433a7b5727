"""A lean HTTP/1.1 client for upstream MCP traffic: one keep-alive pool per backend.

Why not aiohttp's `ClientSession`: on the tools/call path it cost several times the CPU of
this client per request, and it was the gateway's largest single cost (bench/FIGURES.md). Streamable
HTTP needs only a small part of HTTP: POST, GET and DELETE with a byte body; replies with
Content-Length, chunked, or read-to-close bodies; streamed reading for SSE; TLS for
https://. httptools (llhttp, the parser Node.js uses) does the parsing; this module does
connections, pooling and flow control.

Errors: `ConnectFailed` when no connection could be made (so not one byte was sent), and
`TransportFailed` for anything after that (reset, malformed reply, early close).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast
from urllib.parse import urlsplit

import httptools

from gateway.upstream.slots import Slots

USER_AGENT = "mcp-gateway"
IDLE_SECONDS = 4.0
"""A pooled connection idle longer than this is closed rather than reused. Below uvicorn's and
Node's 5 s keep-alive, so a request is not written into a connection the server is closing."""
T = TypeVar("T")
HIGH_WATER = 256 * 1024
"""Buffered body bytes at which reading pauses until the consumer catches up."""


class TransportFailed(Exception):
    """The exchange broke after the request may have been sent."""


class ConnectFailed(TransportFailed):
    """No connection could be opened: the request was never sent."""


TRANSPORT_ERRORS = (TransportFailed, OSError)
"""What `HttpClient.send` raises when the exchange fails: refused, reset, DNS, malformed replies, broken streams."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where requests go, parsed once from the backend's URL."""

    host: str
    port: int
    path: str  # with the query, as sent on the request line
    authority: str  # the Host header
    tls: ssl.SSLContext | None

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url}")
        tls = ssl.create_default_context() if parts.scheme == "https" else None
        port = parts.port or (443 if tls else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = parts.hostname
        authority = f"[{host}]" if ":" in host else host
        if parts.port:
            authority += f":{parts.port}"
        return cls(host, port, path, authority, tls)


class Response:
    """A reply whose headers have arrived; the body is read with `read()` or `chunks()`."""

    def __init__(self, connection: _Connection, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers  # names lower-cased; repeated headers joined with ", "
        self.content_type = headers.get("content-type", "").partition(";")[0].strip().lower()
        length = headers.get("content-length", "")
        self.content_length = int(length) if length.isdigit() else None
        self._connection = connection

    async def read(self) -> bytes:
        """The whole body (callers check `content_length` or use `chunks()` to bound it)."""
        body = self._connection.take_complete_body()  # the usual small reply: already all here
        if body is not None:
            return body
        return b"".join([chunk async for chunk in self.chunks()])

    async def chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive, until the end of the message."""
        while True:
            chunk = await self._connection.next_chunk()
            if not chunk:
                return
            yield chunk


class _Connection(asyncio.Protocol):
    """One keep-alive connection: a request is written, its reply parsed as it streams in."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._headers: dict[str, str] = {}
        self._head: asyncio.Future[Response] | None = None
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._complete = False
        self._reusable = False
        self._error: TransportFailed | None = None
        self._waiter: asyncio.Future[None] | None = None

    # --- the request side ---------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing() and self._error is None

    def send(self, head: bytes, body: bytes | None) -> asyncio.Future[Response]:
        """Write one request; the future resolves when the reply's headers are in."""
        assert self.transport is not None
        self._headers, self._body, self._buffered = {}, deque(), 0
        self._complete = self._reusable = False
        self._head = asyncio.get_running_loop().create_future()
        self.transport.writelines([head, body] if body else [head])
        return self._head

    async def next_chunk(self) -> bytes:
        """The next body chunk, b"" at the end of the message."""
        while not self._body:
            if self._complete:
                return b""
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        chunk = self._body.popleft()
        self._taken(len(chunk))
        return chunk

    def take_complete_body(self) -> bytes | None:
        """The rest of the body if the message is complete, else None (then stream it)."""
        if not self._complete:
            return None
        body = b"".join(self._body)
        self._body.clear()
        self._taken(len(body))
        return body

    def _taken(self, size: int) -> None:
        """`size` buffered bytes went to the reader: resume reading once the buffer has drained."""
        self._buffered -= size
        if self._paused and self._buffered < HIGH_WATER // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def reusable(self) -> bool:
        """Whether the reply was read to its end and the server keeps the connection open."""
        return self._complete and self._reusable and not self._body and self.usable

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # --- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio subclasses

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportFailed(f"malformed HTTP reply ({type(exc).__name__})"))
            self.close()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head is not None and self._head.done() and not self._complete and self._reads_to_close():
            self.on_message_complete()  # a body without length or chunking ends with the connection
        self._fail(TransportFailed("connection closed by the backend" if exc is None else f"connection lost: {exc}"))

    # --- httptools callbacks --------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        self._reusable = self._parser.should_keep_alive()
        if self._head is not None and not self._head.done():
            self._head.set_result(Response(self, self._parser.get_status_code(), self._headers))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self._complete = True
        self._wake()

    # --- helpers --------------------------------------------------------------------------

    def _reads_to_close(self) -> bool:
        return "content-length" not in self._headers and "chunked" not in self._headers.get("transfer-encoding", "")

    def _fail(self, error: TransportFailed) -> None:
        if self._error is None:
            self._error = error
        if self._head is not None and not self._head.done():
            self._head.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class HttpClient:
    """Requests to one backend URL over at most `max_connections` pooled connections."""

    def __init__(self, url: str, *, max_connections: int) -> None:
        self.target = Target.parse(url)
        self._prefix = f"{self.target.path} HTTP/1.1\r\nHost: {self.target.authority}\r\nUser-Agent: {USER_AGENT}\r\n"
        self._slots = Slots(max_connections)
        self._idle: deque[_Connection] = deque()
        self._busy: set[_Connection] = set()
        self._closed = False

    async def send(
        self, method: str, headers: Mapping[str, str], body: bytes | None, consume: Callable[[Response], Awaitable[T]]
    ) -> T:
        """Send one request and return what `consume` makes of its reply (headers in, body unread).

        If `consume` does not read the body to its end, or fails, or is cancelled, the
        connection is closed: a reply half-read must never be mistaken for the next one.
        (A callback rather than a context manager: this is the per-call hot path.)
        """
        head = self._head(method, headers, body)
        if not self._slots.try_take():
            await self._slots.take()
        try:
            connection = await self._connection()
            self._busy.add(connection)
            try:
                return await consume(await connection.send(head, body))
            except BaseException:
                connection.close()
                raise
            finally:
                self._busy.discard(connection)
                self._release(connection)
        finally:
            self._slots.give()

    async def close(self) -> None:
        self._closed = True
        for connection in (*self._idle, *self._busy):
            connection.close()
        self._idle.clear()

    # --- connections ------------------------------------------------------------------------

    async def _connection(self) -> _Connection:
        if self._closed:
            raise ConnectFailed("client closed")
        now = asyncio.get_running_loop().time()
        while self._idle:
            connection = self._idle.pop()  # the most recent: the likeliest to be alive
            if connection.usable and now - connection.idle_since < IDLE_SECONDS:
                return connection
            connection.close()
        return await self._connect()

    async def _connect(self) -> _Connection:
        target, loop = self.target, asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                _Connection, target.host, target.port, ssl=target.tls,
                server_hostname=target.host if target.tls else None,
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConnectFailed(f"cannot connect: {exc}") from exc
        return connection

    def _release(self, connection: _Connection) -> None:
        if connection.reusable() and not self._closed:
            connection.idle_since = asyncio.get_running_loop().time()
            self._idle.append(connection)
        else:
            connection.close()

    def _head(self, method: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        fields = "".join([f"{name}: {value}\r\n" for name, value in headers.items()])
        # A line break inside a name or value would let it write headers of its own.
        if fields.count("\r") + fields.count("\n") != 2 * len(headers) or "\0" in fields:
            raise ValueError("invalid character in an upstream HTTP header")
        length = f"Content-Length: {len(body)}\r\n" if body is not None else ""
        return f"{method} {self._prefix}{fields}{length}\r\n".encode()

