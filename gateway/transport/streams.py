"""Server-to-client GET streams: one per session, with a short replay buffer for resumption."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass, field

from gateway.errors import Conflict
from gateway.protocol.jsonrpc import JsonObject, dumps

REPLAY_EVENTS = 100
"""Events kept per session so a client reconnecting with Last-Event-ID misses nothing recent."""


@dataclass(slots=True)
class _SessionStream:
    tenant: str
    queue: asyncio.Queue[tuple[str, bytes]] | None = None
    history: deque[tuple[int, bytes]] = field(default_factory=lambda: deque(maxlen=REPLAY_EVENTS))


class StreamHub:
    """Routes notifications to the GET streams of the sessions that should see them."""

    def __init__(self) -> None:
        self._streams: dict[str, _SessionStream] = {}
        self._ids = itertools.count(1)

    def open(self, session_id: str, tenant: str) -> asyncio.Queue[tuple[str, bytes]]:
        """Attach the one GET stream of a session; a second concurrent one is refused (409)."""
        stream = self._streams.setdefault(session_id, _SessionStream(tenant))
        if stream.queue is not None:
            raise Conflict("Conflict: this session already has a GET stream")
        stream.queue = asyncio.Queue(maxsize=1000)
        return stream.queue

    def detach(self, session_id: str, queue: asyncio.Queue[tuple[str, bytes]]) -> None:
        stream = self._streams.get(session_id)
        if stream is not None and stream.queue is queue:
            stream.queue = None

    def forget(self, session_id: str) -> None:
        """The session ended: drop its stream and history."""
        stream = self._streams.pop(session_id, None)
        if stream and stream.queue is not None:
            stream.queue.put_nowait(("", b""))  # wakes the writer, which then closes

    def replay(self, session_id: str, last_event_id: str) -> list[tuple[str, bytes]]:
        """Events after `last_event_id` on this session's stream (empty if unknown)."""
        stream = self._streams.get(session_id)
        try:
            after = int(last_event_id)
        except ValueError:
            return []
        if stream is None:
            return []
        return [(str(n), data) for n, data in stream.history if n > after]

    def publish(self, tenants: set[str], message: JsonObject) -> int:
        """Queue `message` for every session of these tenants; returns how many got it."""
        data = dumps(message)
        sent = 0
        for stream in self._streams.values():
            if stream.tenant not in tenants:
                continue
            event_id = next(self._ids)
            stream.history.append((event_id, data))
            if stream.queue is not None and not stream.queue.full():
                stream.queue.put_nowait((str(event_id), data))
                sent += 1
        return sent

    def close_all(self) -> None:
        for session_id in list(self._streams):
            self.forget(session_id)
