"""One keep-alive HTTP/1.1 connection of the hand-written client: a request out, its reply parsed in.

httptools (llhttp, the parser Node.js uses) parses; this module bounds what a backend may
send before its body (MAX_HEADERS, MAX_FIELD_BYTES, MAX_HEAD_BYTES: a head past them fails
the exchange as `BadReply` before it costs the event loop anything), skips 1xx interim
replies, and applies flow control to the body.
"""

from __future__ import annotations

import asyncio
import select
from collections import deque
from collections.abc import AsyncIterator
from typing import cast

import httptools

from gateway.upstream.http.client import (
    MAX_FIELD_BYTES,
    MAX_HEAD_BYTES,
    MAX_HEADERS,
    BadReply,
    ConnectionReset,
    TransportFailed,
)
from gateway.upstream.http.decoding import decoded, needs_decoding

HIGH_WATER = 256 * 1024
"""Buffered body bytes at which reading pauses until the consumer catches up."""


class Response:
    """A reply whose headers have arrived; the body is read with `read()` or `chunks()`."""

    def __init__(self, connection: Connection, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers  # names lower-cased; repeated headers joined with ", "
        self.content_type = headers.get("content-type", "").partition(";")[0].strip().lower()
        self._encoding = headers.get("content-encoding", "")
        length = headers.get("content-length", "")
        self.content_length = int(length) if length.isdigit() and not self._encoding else None
        self._connection = connection

    async def read(self) -> bytes:
        """The whole body (callers check `content_length` or use `chunks()` to bound it)."""
        if not self._encoding:
            body = self._connection.take_complete_body()  # the usual small reply: already all here
            if body is not None:
                return body
        return b"".join([chunk async for chunk in self.chunks()])

    def chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive (decoded), until the end of the message."""
        if self._encoding and needs_decoding(self._encoding):
            return decoded(self._raw_chunks(), self._encoding)
        return self._raw_chunks()

    async def _raw_chunks(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._connection.next_chunk()
            if not chunk:
                return
            yield chunk


class Connection(asyncio.Protocol):
    """One keep-alive connection: a request is written, its reply parsed as it streams in."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._readable: select.poll | None = None  # its socket, for `closed_by_peer`
        self.idle_since = 0.0
        self.requests = 0  # sent on this connection so far: > 1 means it was reused
        self.received = False  # any byte of the current request's reply
        self._parser = httptools.HttpResponseParser(self)
        self._headers: dict[str, str] = {}
        self._head_bytes = 0
        self._head: asyncio.Future[Response] | None = None
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._interim = False
        self._complete = False
        self._reusable = False
        self._error: TransportFailed | None = None
        self._waiter: asyncio.Future[None] | None = None

    # --- the request side ---------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing() and self._error is None

    def closed_by_peer(self) -> bool:
        """Whether the socket of this idle connection is readable: the server closed it (or sent
        something unasked), though a busy event loop may not have run `eof_received` yet.
        (Under TLS a late record could also wake it: that costs one new connection, nothing more.)"""
        return self._readable is not None and bool(self._readable.poll(0))

    def send(self, head: bytes, body: bytes | None) -> asyncio.Future[Response]:
        """Write one request; the future resolves when the final reply's headers are in."""
        assert self.transport is not None
        self._start_message()
        self.requests += 1
        self.received = False
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

    def reusable(self) -> bool:
        """Whether the reply was read to its end and the server keeps the connection open."""
        return self._complete and self._reusable and not self._body and self.usable

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _start_message(self) -> None:
        self._headers, self._head_bytes = {}, 0
        self._body, self._buffered = deque(), 0

    def _taken(self, size: int) -> None:
        """`size` buffered bytes went to the reader: resume reading once the buffer has drained."""
        self._buffered -= size
        if self._paused and self._buffered < HIGH_WATER // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    # --- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio subclasses
        sock = transport.get_extra_info("socket")
        if sock is not None:  # poll, not select: descriptors past 1024 are common on a busy gateway
            self._readable = select.poll()
            self._readable.register(sock.fileno(), select.POLLIN)

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            if self._head is not None and not self._head.done():
                data = self._within_head_limit(data)
            self._parser.feed_data(data)
        except BadReply as exc:
            self._abort(exc)
        except httptools.HttpParserCallbackError as exc:  # a limit, raised in a callback below
            self._abort(exc.__context__ if isinstance(exc.__context__, BadReply) else BadReply("malformed reply"))
        except httptools.HttpParserError as exc:
            self._abort(BadReply(f"malformed HTTP reply ({type(exc).__name__})"))

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head is not None and self._head.done() and not self._complete and self._reads_to_close():
            self.on_message_complete()  # a body without length or chunking ends with the connection
        if exc is None:
            self._fail(TransportFailed("connection closed by the backend"))
        elif isinstance(exc, ConnectionResetError | BrokenPipeError):
            self._fail(ConnectionReset(f"connection reset by the backend: {exc}"))
        else:
            self._fail(TransportFailed(f"connection lost: {exc}"))

    def _within_head_limit(self, data: bytes) -> bytes:
        """`data` while the head may still fit; past MAX_HEAD_BYTES, `BadReply` once the head is over it."""
        room = MAX_HEAD_BYTES - self._head_bytes
        self._head_bytes += len(data)
        if len(data) <= room:
            return data
        self._parser.feed_data(data[:room])  # its callbacks may end the head, or raise a limit
        if self._head is not None and not self._head.done():
            raise BadReply(f"reply head over {MAX_HEAD_BYTES} bytes")
        return data[room:]

    # --- httptools callbacks --------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self._headers) >= MAX_HEADERS or len(name) + len(value) > MAX_FIELD_BYTES:
            raise BadReply(f"reply head over {MAX_HEADERS} fields or {MAX_FIELD_BYTES} bytes in a field")
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        self._interim = 100 <= status < 200
        if self._interim:  # 100 Continue, 103 Early Hints: the real reply follows
            if status == 101:
                raise BadReply("HTTP 101: the backend switched protocols")
            self._headers = {}
            return
        self._reusable = self._parser.should_keep_alive()
        if self._head is not None and not self._head.done():
            self._head.set_result(Response(self, status, self._headers))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._complete = True
        self._wake()

    # --- helpers --------------------------------------------------------------------------

    def _reads_to_close(self) -> bool:
        return "content-length" not in self._headers and "chunked" not in self._headers.get("transfer-encoding", "")

    def _abort(self, error: TransportFailed) -> None:
        self._fail(error)
        self.close()

    def _fail(self, error: TransportFailed) -> None:
        if self._error is None:
            self._error = error
        if self._head is not None and not self._head.done():
            self._head.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
