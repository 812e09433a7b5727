"""A 2026 HTTP backend's resource subscriptions: the URIs held, named on one listen stream (PROTOCOL-2026 §A.7).

At 2026 there is no `resources/subscribe`: a client names the URIs it wants in the
`resourceSubscriptions` of a `subscriptions/listen` request. The gateway's subscribes and
unsubscribes to such a backend (one per tenant and URI, reference-counted in subscriptions.py)
land here, and the backend gets ONE listen stream naming every URI some tenant holds: one
connection however many URIs (not one per URI), apart from the list-change stream
(http/listen.py) so that re-opening it re-lists nothing. It runs under the catalogue's identity
(the configured headers, never a tenant's token), like the list-change stream.

A listen filter cannot be changed in place, so a new set is a new stream: it is opened first,
and the one it replaces is closed once the new one is acknowledged (no gap for the URIs held
throughout; an update in the overlap may come twice). A subscribe returns once a stream naming
its URI is acknowledged, so an update the backend sends after it is heard. Each
`notifications/resources/updated` goes to `on_resource_updated` once per tenant holding its URI,
the path a session's update takes; subscriptions.py then serves each tenant's clients under its
policy. After a break the stream listens again with the current set; there is no replay.
A 2026 stdio child's subscriptions are watched the same way, on listen requests over its pipes
(stdio/listen.py runs the streams).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Protocol

from multidict import CIMultiDict

from gateway.protocol import spec
from gateway.protocol.errors import FailureReason
from gateway.upstream.base import BackgroundTasks, JsonObject, ResourceUpdates, UpstreamError


class StreamRunner(Protocol):
    """What runs listen streams: ListenStream over HTTP, StdioListen over a child's pipes."""

    def run(self, wanted: Callable[[], JsonObject], headers: CIMultiDict[str], alive: Callable[[], bool],
            on_ack: Callable[[], None]) -> Coroutine[Any, Any, None]: ...


class ResourceWatch:
    """The URIs held on one 2026 backend, by tenant, and the listen stream that names them."""

    def __init__(self, stream: StreamRunner, updates: ResourceUpdates, tasks: BackgroundTasks) -> None:
        self._stream = stream
        self._updates = updates
        self._tasks = tasks
        self._holders: dict[str, set[str]] = {}  # original URI -> the session keys (tenants) holding it
        self._current: asyncio.Task[None] | None = None  # the acknowledged stream
        self._pending: tuple[int, asyncio.Task[None]] | None = None  # a newer one, until acknowledged
        self._opened = 0  # generation of the newest stream asked for
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def uris(self) -> list[str]:
        """The URIs the next stream names."""
        return sorted(self._holders)

    async def subscribe(self, key: str, uri: str, headers: CIMultiDict[str], alive: Callable[[], bool]) -> None:
        """`key` holds `uri`: returns once a stream naming it is acknowledged (a failure lets go of it)."""
        holders = self._holders.setdefault(uri, set())
        if not holders or self._pending is self._current is None:  # a new URI, or no stream left to name it
            self._reopen(headers, alive)
        holders.add(key)
        if self._pending is None:  # held already, and named by the acknowledged stream
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((self._opened, waiter))
        try:
            await waiter
        except BaseException:  # refused, or the caller's timeout: the URI is not held
            self.unsubscribe(key, uri, headers, alive)
            raise

    def unsubscribe(self, key: str, uri: str, headers: CIMultiDict[str], alive: Callable[[], bool]) -> None:
        """`key` lets go of `uri`; the last one out makes a stream that no longer names it."""
        holders = self._holders.get(uri)
        if holders is None or key not in holders:
            return
        holders.discard(key)
        if not holders:
            del self._holders[uri]
            self._reopen(headers, alive)

    def updated(self, message: JsonObject) -> None:
        """The backend's update: once for each tenant holding the URI, without our subscription's tag."""
        params = dict(message["params"])
        meta = {k: v for k, v in params.pop("_meta", {}).items() if k != spec.SUBSCRIPTION_ID_KEY}
        if meta:
            params["_meta"] = meta
        for key in list(self._holders.get(params.get("uri"), ())):
            self._updates.fire(key, {**message, "params": params})

    def _reopen(self, headers: CIMultiDict[str], alive: Callable[[], bool]) -> None:
        """A stream for the current set (none when it is empty); the pending one it supersedes goes."""
        if self._pending is not None:
            self._pending[1].cancel()
        self._opened += 1
        generation, self._pending = self._opened, None
        if not self._holders:
            self._close_current()
            self._acknowledged(generation)
            return
        task = self._tasks.spawn(
            self._stream.run(lambda: {"resourceSubscriptions": self.uris}, headers, alive,
                             partial(self._acknowledged, generation)), "subscriptions/listen resources")
        task.add_done_callback(partial(self._ended, generation))
        self._pending = generation, task

    def _acknowledged(self, generation: int) -> None:
        """Stream `generation` (or a reconnect of it) is acknowledged: it replaces the older one."""
        if self._pending is not None and self._pending[0] == generation:
            self._close_current()
            self._current, self._pending = self._pending[1], None
        self._settle(generation, None)

    def _ended(self, generation: int, task: asyncio.Task[None]) -> None:
        """A stream stopped listening for good (refused, or its backend left the era)."""
        if self._current is task:
            self._current = None
        if not task.cancelled():
            self._settle(generation, UpstreamError(FailureReason.UNAVAILABLE, "the backend refused to listen"))

    def _settle(self, generation: int, error: UpstreamError | None) -> None:
        """Answer the subscribes waiting for stream `generation` or an older one; the others wait on."""
        waiting = [(upto, waiter) for upto, waiter in self._waiters if not waiter.done()]
        self._waiters = [(upto, waiter) for upto, waiter in waiting if upto > generation]
        for upto, waiter in waiting:
            if upto <= generation and error is None:
                waiter.set_result(None)
            elif upto <= generation:
                waiter.set_exception(error)

    def _close_current(self) -> None:
        if self._current is not None:
            self._current.cancel()
            self._current = None
