"""The GET streams of the HTTP upstream's backend sessions: messages the backend sends unasked.

They carry `notifications/tools/list_changed` and the backend's own requests (ping, or one
that belongs to no call). Each stream has a client of one connection of its own, so it never
takes a call's connection. While its session lives a stream is reopened after a break, with
backoff; a backend that refuses GET (a 4xx other than conflict or throttling) has no such
stream, and is not asked again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import aclosing

import orjson
import structlog

from gateway.protocol.spec import SSE
from gateway.protocol.sse import SseDecoder, SseEvent
from gateway.upstream.base import BackgroundTasks, Backoff, JsonObject, UpstreamError
from gateway.upstream.http.body import BoundedBody
from gateway.upstream.http.client import TRANSPORT_ERRORS, HttpTransport, Response
from gateway.upstream.http.session import BackendSession, SessionKey

_log = structlog.get_logger("gateway.upstream")

MessageHandler = Callable[[BackendSession, JsonObject], None]


class StreamListener:
    """Keeps sessions' GET streams open and hands every decoded message to `on_message`."""

    def __init__(self, body: BoundedBody, open_client: Callable[[], HttpTransport], on_message: MessageHandler,
                 tasks: BackgroundTasks) -> None:
        self._body = body
        self._open_client = open_client
        self._on_message = on_message
        self._tasks = tasks
        self._clients: dict[SessionKey, HttpTransport] = {}

    def listen(self, session: BackendSession, alive: Callable[[], bool]) -> None:
        """Listen to `session`'s stream in a task, on a client of its own, while `alive()`."""
        client = self._clients[session.key] = self._open_client()
        self._tasks.spawn(self._listen(session, alive, client), "listen")

    async def close(self) -> None:
        """Close the clients of streams whose task never ran (the others close their own)."""
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)

    async def _listen(self, session: BackendSession, alive: Callable[[], bool], client: HttpTransport) -> None:
        try:
            await self.run(session, alive, client)
        finally:
            if self._clients.get(session.key) is client:
                del self._clients[session.key]
            await client.close()

    async def run(self, session: BackendSession, alive: Callable[[], bool], client: HttpTransport) -> None:
        """Listen while `alive()`; stop for good if the backend offers no GET stream."""
        backoff, decoder = Backoff(), SseDecoder()
        while alive():
            try:
                status = await self._listen_once(session, decoder, backoff, client)
            except (*TRANSPORT_ERRORS, UpstreamError) as exc:
                _log.debug("upstream stream broke", backend=self._body.backend, error=repr(exc))
                status = 0
            if stream_refused(status):
                _log.debug("upstream offers no GET stream", backend=self._body.backend, status=status)
                return
            await asyncio.sleep(backoff.next())

    async def _listen_once(self, session: BackendSession, decoder: SseDecoder, backoff: Backoff,
                           client: HttpTransport) -> int:
        async def consume(resp: Response) -> int:
            if resp.status != 200 or resp.content_type != SSE:
                return resp.status
            backoff.reset()
            decoder.reconnected()
            async with aclosing(self._body.events(resp, decoder)) as events:
                async for event in events:
                    self._on_event(session, event)
            return resp.status

        return await client.send("GET", session.stream_headers(decoder.last_event_id), None, consume)

    def _on_event(self, session: BackendSession, event: SseEvent) -> None:
        if event.event != "message" or not event.data:
            return
        try:
            message = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            _log.warning("upstream sent a non-JSON event", backend=self._body.backend)
            return
        self._on_message(session, message)


def stream_refused(status: int) -> bool:
    """A 4xx other than conflict/throttling means: no GET stream here, stop asking. A refused token
    (401/403) is tried again: the session's next call renews it (BackendSession.renew)."""
    return 400 <= status < 500 and status not in (401, 403, 408, 409, 429)
