"""The ways back to an HTTP client: a POST's reply (JSON, or an SSE stream), and a session's GET stream."""

from __future__ import annotations

import asyncio

from aiohttp import web

from gateway.protocol import jsonrpc, spec
from gateway.protocol.eras import Envelope
from gateway.protocol.jsonrpc import JsonObject
from gateway.protocol.sse import encode_event
from gateway.transport.channel import ChannelClosed, ClientChannel, PendingAsks
from gateway.transport.held import HeldReplies
from gateway.transport.http.replies import write_event
from gateway.transport.http.streams import StreamHub
from gateway.transport.modern import no_back_channel, wanted
from gateway.transport.requestlog import stream_headers

SSE_HEADERS = {"Content-Type": spec.SSE, "Cache-Control": "no-cache"}
KEEPALIVE = b": keepalive\n\n"


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

    async def finish(self, body: bytes | None, replies: HeldReplies, tenant: str) -> web.StreamResponse:
        """The stream's last event (the encoded response), counted against `tenant` while the client takes
        it, and its end."""
        assert self._response is not None and self._lock is not None
        async with self._lock:
            try:
                if body is not None:  # a cancelled request's stream ends without one (spec)
                    await write_event(self._response, body, replies, tenant)
                await self._response.write_eof()
            except ConnectionError:
                pass  # the client went away, or the write deadline cut it: nothing left to send
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
