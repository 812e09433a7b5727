"""Server-to-client GET streams: one per session, with a short replay buffer for resumption.

Event ids are `<hub epoch>-<n>`: the epoch is random per process, so an id issued by
another replica (or by this process before a restart) is recognised as foreign rather
than mistaken for one of ours. A resume that the buffer cannot serve exactly (a foreign
id, or events already pushed out of the buffer) gets the hub's `catch_up` messages instead,
e.g. `notifications/{tools,prompts,resources}/list_changed`: the client lists again and misses
nothing.

A session's entry (stream and history) lives as long as the session: the session store's end
listener calls `forget`, whatever ended it. Each tenant may hold `limits.streams` open streams.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gateway.catalogue.audience import Sees
from gateway.policy import Principal
from gateway.protocol.errors import Conflict, LimitReached
from gateway.protocol.jsonrpc import JsonObject, dumps

REPLAY_EVENTS = 100
"""Events kept per session so a client reconnecting with Last-Event-ID misses nothing recent."""


@dataclass(slots=True)
class _SessionStream:
    tenant: str
    principal: Principal | None = None  # whose policy decides which list changes concern it
    queue: asyncio.Queue[tuple[str, bytes]] | None = None
    history: deque[tuple[int, bytes]] = field(default_factory=lambda: deque(maxlen=REPLAY_EVENTS))
    dropped_upto: int = 0  # the newest event pushed out of `history`


def _nothing() -> None:
    pass


class StreamHub:
    """Routes notifications to the GET streams of the sessions that should see them."""

    def __init__(self, *, catch_up: Sequence[JsonObject] = (), epoch: str | None = None) -> None:
        self._streams: dict[str, _SessionStream] = {}
        self._open: dict[str, int] = {}  # attached GET streams per tenant (limits.streams)
        self._ids = itertools.count(1)
        self.epoch = epoch or secrets.token_hex(4)
        self._catch_up = [dumps(message) for message in catch_up]
        self.on_listening: Callable[[], None] = _nothing
        """Called when a tenant may have gained or lost its last open stream (see `listening`)."""

    def open(self, session_id: str, tenant: str, limit: int | None = None,
             principal: Principal | None = None) -> asyncio.Queue[tuple[str, bytes]]:
        """Attach the one GET stream of a session; a second concurrent one is refused (409), and one
        beyond the tenant's `limit` of open streams too (429)."""
        stream = self._streams.get(session_id)
        if stream is not None and stream.queue is not None:
            raise Conflict("Conflict: this session already has a GET stream")
        if limit is not None and self._open.get(tenant, 0) >= limit:
            raise LimitReached("streams", limit)
        stream = self._streams.setdefault(session_id, _SessionStream(tenant))
        stream.principal = principal
        stream.queue = asyncio.Queue(maxsize=1000)
        self._open[tenant] = self._open.get(tenant, 0) + 1
        self.on_listening()
        return stream.queue

    def open_count(self, tenant: str) -> int:
        """The GET streams `tenant` holds open here (its `limits.streams` applies to these)."""
        return self._open.get(tenant, 0)

    def detach(self, session_id: str, queue: asyncio.Queue[tuple[str, bytes]]) -> None:
        stream = self._streams.get(session_id)
        if stream is not None and stream.queue is queue:
            self._close(stream)

    def forget(self, session_id: str) -> None:
        """The session ended: drop its stream and history."""
        stream = self._streams.pop(session_id, None)
        if stream and stream.queue is not None:
            if stream.queue.full():
                stream.queue.get_nowait()  # the writer is ending anyway: room for the sign to stop
            stream.queue.put_nowait(("", b""))  # wakes the writer, which then closes
            self._close(stream)

    def _close(self, stream: _SessionStream) -> None:
        stream.queue = None
        self._open[stream.tenant] -= 1
        self.on_listening()

    def listening(self) -> list[str]:
        """The tenants with a GET stream open here: their clients hear of list changes."""
        return [tenant for tenant, count in self._open.items() if count]

    def reached(self) -> set[str]:
        """The tenants `publish` can reach: those with a session stream here, open or awaiting a resume."""
        return {stream.tenant for stream in self._streams.values()}

    def count(self) -> tuple[int, int]:
        """(sessions with an entry, attached streams)."""
        return len(self._streams), sum(self._open.values())

    def replay(self, session_id: str, last_event_id: str) -> list[tuple[str, bytes]]:
        """Events after `last_event_id` on this session's stream; the catch-up if they cannot be known."""
        stream = self._streams.get(session_id)
        if stream is None:
            return []
        after = self._own_number(last_event_id)
        if after is None or after < stream.dropped_upto:
            return self._catch_up_for(stream)
        return [(self._event_id(n), data) for n, data in stream.history if n > after]

    def _own_number(self, event_id: str) -> int | None:
        epoch, _, number = event_id.rpartition("-")
        return int(number) if epoch == self.epoch and number.isdigit() else None

    def _event_id(self, number: int) -> str:
        return f"{self.epoch}-{number}"

    def _catch_up_for(self, stream: _SessionStream) -> list[tuple[str, bytes]]:
        return [(self._event_id(self._record(stream, data)), data) for data in self._catch_up]

    def _record(self, stream: _SessionStream, data: bytes) -> int:
        number = next(self._ids)
        if len(stream.history) == stream.history.maxlen:
            stream.dropped_upto = stream.history[0][0]
        stream.history.append((number, data))
        return number

    def send(self, session_id: str, message: JsonObject) -> bool:
        """Queue `message` on one session's GET stream; False when no stream is open to take it."""
        stream = self._streams.get(session_id)
        if stream is None or stream.queue is None or stream.queue.full():
            return False
        data = dumps(message)
        stream.queue.put_nowait((self._event_id(self._record(stream, data)), data))
        return True

    def publish(self, tenants: set[str], message: JsonObject, sees: Sees | None = None) -> int:
        """Queue `message` for every session of these tenants (that `sees` admits); returns how many got it."""
        data = dumps(message)
        sent = 0
        for stream in self._streams.values():
            if stream.tenant not in tenants or (sees is not None and not sees(stream.tenant, stream.principal)):
                continue
            number = self._record(stream, data)
            if stream.queue is not None and not stream.queue.full():
                stream.queue.put_nowait((self._event_id(number), data))
                sent += 1
        return sent

    def close_all(self) -> None:
        for session_id in list(self._streams):
            self.forget(session_id)
