"""gateway.transport.http.connections: the deadlines and the cap, decided with a clock the test moves.

The transports here only record what the guard did to them (the served process is attacked
for real in tests/hardening/test_connections.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.transport.http.connections import HEADERS_TIMED_OUT, REFUSED, Connections, GuardedConnection


class Transport:
    def __init__(self) -> None:
        self.written = b""
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


class Inner(asyncio.Protocol):
    def __init__(self) -> None:
        self.events: list[str] = []

    def connection_made(self, transport: Any) -> None:
        self.events.append("made")

    def data_received(self, data: bytes) -> None:
        self.events.append("data")

    def pause_writing(self) -> None:
        self.events.append("pause")

    def resume_writing(self) -> None:
        self.events.append("resume")

    def connection_lost(self, exc: Exception | None) -> None:
        self.events.append("lost")


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def guarded(connections: Connections) -> tuple[GuardedConnection, Transport, Inner]:
    inner, transport = Inner(), Transport()
    connection = connections.protocol_factory(lambda: inner)()
    connection.connection_made(transport)  # type: ignore[arg-type]
    return connection, transport, inner


def make(clock: Clock, **limits: Any) -> Connections:
    return Connections(**{"max_connections": 10, "headers_timeout": 10.0, "write_timeout": 30.0, **limits},
                       clock=clock)


def test_a_connection_whose_request_never_starts_gets_a_408_after_the_headers_timeout() -> None:
    clock = Clock()
    connections = make(clock)
    _, transport, _ = guarded(connections)
    clock.now += 9.0
    connections.sweep_once()
    assert not transport.closed
    clock.now += 2.0
    connections.sweep_once()
    assert (transport.written, transport.closed) == (HEADERS_TIMED_OUT, True)


def test_a_request_being_handled_has_no_headers_deadline_but_the_next_one_does() -> None:
    clock = Clock()
    connections = make(clock)
    connection, transport, inner = guarded(connections)
    connection.active += 1  # what the middleware does when a handler runs
    connection.waiting_since = None
    clock.now += 60.0
    connections.sweep_once()
    assert not transport.closed
    connection.active -= 1
    connections.sweep_once()
    connection.data_received(b"G")  # the next request's first byte
    clock.now += 11.0
    connections.sweep_once()
    assert transport.closed and inner.events == ["made", "data"]


def test_a_client_that_stops_reading_is_aborted_after_the_write_timeout() -> None:
    clock = Clock()
    connections = make(clock)
    connection, transport, inner = guarded(connections)
    connection.active = 1
    connection.pause_writing()
    clock.now += 20.0
    connections.sweep_once()  # the sweep's ticks are the connections' time
    connection.resume_writing()  # it read a little: the clock starts again at the next pause
    connection.pause_writing()
    clock.now += 29.0
    connections.sweep_once()
    assert not transport.aborted
    clock.now += 2.0
    connections.sweep_once()
    assert transport.aborted and inner.events == ["made", "pause", "resume", "pause"]


def test_connections_beyond_the_cap_are_refused_before_aiohttp_sees_them() -> None:
    clock = Clock()
    connections = make(clock, max_connections=2)
    for _ in range(2):
        guarded(connections)
    refused, transport, inner = guarded(connections)
    assert (transport.written, transport.closed, inner.events) == (REFUSED, True, [])
    refused.connection_lost(None)  # nothing to tell aiohttp
    assert (len(connections.open), connections.refused) == (2, 1)


def test_a_closed_connection_frees_its_place() -> None:
    connections = make(Clock(), max_connections=1)
    connection, _, inner = guarded(connections)
    connection.connection_lost(None)
    _, transport, _ = guarded(connections)
    assert not transport.closed and inner.events == ["made", "lost"]
