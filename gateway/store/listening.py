"""Which tenants have clients listening for list changes on the other replicas.

A backend that cannot announce its list changes is re-listed after a request it served, while a
client of a tenant that sees it listens (catalogue/relisting.py). With many replicas that client
may be on another replica than the one that served the request, so each replica tells the others,
over the event channel, the tenants that listen on it: at once when that set changes, again every
`heartbeat` seconds while it is not empty, and when asked (a replica that (re)subscribes asks, as
it missed what was said before). A replica not heard from for `expiry` seconds (it died, or lost
Redis) no longer counts; one that stops cleanly says it has nobody. Reading the others' tenants
is a look at memory: nothing on a request's path waits on Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from gateway.store.events import EventBus
from gateway.store.health import StoreUnavailable

LISTENING_EVENT = "listening"
"""Event kind: the tenants with listeners on the sending replica (fields: tenants, ask)."""

HEARTBEAT_SECONDS = 5.0
"""How often a replica with listeners says so again."""

EXPIRY_SECONDS = 3 * HEARTBEAT_SECONDS
"""A replica unheard for this long (three heartbeats missed) no longer counts."""


class SharedListening:
    """This replica's listening tenants, told to the others; theirs, heard and expired."""

    def __init__(self, events: EventBus, *, heartbeat: float = HEARTBEAT_SECONDS, expiry: float = EXPIRY_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.events = events
        self.heartbeat = heartbeat
        self.expiry = expiry
        self.clock = clock
        self._own: frozenset[str] = frozenset()
        self._told: frozenset[str] = frozenset()  # what the others last heard from this replica
        self._others: dict[str, tuple[frozenset[str], float]] = {}  # replica -> (tenants, heard at)
        self._union: frozenset[str] = frozenset()
        self._listeners: list[Callable[[], None]] = []
        self._telling: asyncio.Task[None] | None = None
        self._again = self._ask = False
        events.on(LISTENING_EVENT, self._heard)
        events.on_resync(self._rejoin)

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener()` whenever the others' tenants change."""
        self._listeners.append(listener)

    def tenants(self) -> frozenset[str]:
        """The tenants with a listener on some other live replica."""
        return self._union

    def tell(self, tenants: frozenset[str]) -> None:
        """This replica's listening tenants are now `tenants`: the others hear of it soon (no await)."""
        if tenants != self._own:
            self._own = tenants
            self._tell_soon()

    async def run(self) -> None:
        """The heartbeat (a task); when stopped, the others hear that this replica has nobody."""
        try:
            while True:
                await asyncio.sleep(self.heartbeat)
                if self._own or self._told:  # an empty set the others may not have heard yet, too
                    self._tell_soon()
                self._expire()
        finally:
            telling, self._telling = self._telling, None
            if telling is not None:
                telling.cancel()
            if self._told:
                await self._publish(frozenset(), ask=False)

    def _tell_soon(self, *, ask: bool = False) -> None:
        """One publisher at a time, always sending the newest set: the others never get an old one last."""
        self._again, self._ask = True, self._ask or ask
        if self._telling is None or self._telling.done():
            self._telling = asyncio.get_running_loop().create_task(self._tell(), name="listening-tell")

    async def _tell(self) -> None:
        while self._again:
            ask, self._again, self._ask = self._ask, False, False
            await self._publish(self._own, ask=ask)

    async def _publish(self, tenants: frozenset[str], *, ask: bool) -> None:
        with contextlib.suppress(StoreUnavailable):  # the next heartbeat or resync tells it again
            await self.events.publish(LISTENING_EVENT, tenants=sorted(tenants), ask=ask)
            self._told = tenants

    async def _rejoin(self) -> None:
        """(Re)subscribed: what the others said meanwhile was missed; ask them, and tell ours."""
        self._tell_soon(ask=True)

    async def _heard(self, event: dict[str, Any]) -> None:
        replica, tenants = event.get("from"), event.get("tenants")
        if not isinstance(replica, str) or not isinstance(tenants, list):
            return
        names = frozenset(t for t in tenants if isinstance(t, str))
        if names:
            self._others[replica] = (names, self.clock())
        else:
            self._others.pop(replica, None)
        self._recount()
        if event.get("ask") is True and self._own:
            self._tell_soon()

    def _expire(self) -> None:
        oldest = self.clock() - self.expiry
        for replica in [r for r, (_, heard) in self._others.items() if heard < oldest]:
            del self._others[replica]
        self._recount()

    def _recount(self) -> None:
        union = frozenset().union(*(tenants for tenants, _ in self._others.values()))
        if union != self._union:
            self._union = union
            for listener in self._listeners:
                listener()
