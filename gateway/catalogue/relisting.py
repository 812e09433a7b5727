"""Re-listing a backend that cannot announce its list changes, after a request it served.

A handshake-era backend tells the gateway of a changed list on its streams, and a 2026 one that
serves `subscriptions/listen` on its listen stream; one that does neither (the official SDK's
2026 server) typically changes its lists in a call (a tool that adds tools). So when a request
forwarded to such a backend is done, and a client of a tenant that sees the backend listens for
list changes, the backend's lists are fetched again; the catalogue tells the clients only if
they changed (the snapshot's version). `served` is on every call's path: it only looks and
starts a task, never awaits. One re-list runs per backend at a time; requests done while it
runs ask for exactly one more after it (their change may have come after it listed), no sooner
than RELIST_GAP after it, so a backend under constant calls is listed a few times a second at most. Nobody
listening, nothing is fetched: a client that lists later gets the lists the periodic refresh
and the backend's cache hints keep fresh.

With many replicas, listeners on the others count too (`Replicas`, store/listening.py): the
replica that served the request re-lists, and the shared catalogue tells the other replicas'
clients. The tenants counted are kept in one tuple, made again only when some listener comes
or goes, here or elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Collection
from typing import Protocol

from gateway.config import Config

RELIST_GAP = 0.25  # seconds between the end of one re-list of a backend and the next

Listening = Callable[[], Collection[str]]
"""The tenants of which some client listens for list changes now (a GET stream, a listen stream)."""


class Replicas(Protocol):
    """The other replicas' listening tenants, and the way to tell them this one's."""

    def tell(self, tenants: frozenset[str]) -> None: ...

    def tenants(self) -> frozenset[str]: ...

    def on_change(self, listener: Callable[[], None]) -> None: ...


class _Alone:
    """One process: nobody else to tell, nobody else listening."""

    def tell(self, tenants: frozenset[str]) -> None:
        return None

    def tenants(self) -> frozenset[str]:
        return frozenset()

    def on_change(self, listener: Callable[[], None]) -> None:
        return None


class Relisting:
    """Re-lists backends that cannot announce, after requests, while someone listens."""

    def __init__(self, *, refresh: Callable[[str], Awaitable[None]], announces: Callable[[str], bool],
                 config: Callable[[], Config], gap: float = RELIST_GAP) -> None:
        self._refresh = refresh
        self._gap = gap
        self._announces = announces
        self._config = config
        self._listening: Listening = tuple
        self._replicas: Replicas = _Alone()
        self._local: frozenset[str] = frozenset()  # what `_listening` last said
        self._tenants: Collection[str] = ()  # and the other replicas': read on every call, so kept
        self._running: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()

    def watch(self, listening: Listening, replicas: Replicas | None = None) -> None:
        """Re-list for the listeners `listening()` names (the transport's streams); `changed()` whenever
        they may have changed. With `replicas`, for the other replicas' listeners too."""
        self._listening = listening
        if replicas is not None:
            self._replicas = replicas
            replicas.on_change(self._count)
        self.changed()

    def changed(self) -> None:
        """This replica's listeners may have changed: count them, and tell the other replicas."""
        local = frozenset(self._listening())
        if local != self._local:
            self._local = local
            self._replicas.tell(local)
        self._count()

    def tenants(self) -> Collection[str]:
        """The tenants re-listed for: listening here or on another replica."""
        return self._tenants

    def _count(self) -> None:
        self._tenants = tuple(self._local | self._replicas.tenants())

    def served(self, backend: str) -> None:
        """A request forwarded to `backend` is done: its lists may have changed."""
        tenants = self._tenants
        if not tenants or self._announces(backend):
            return
        if backend in self._running:
            self._again.add(backend)
        elif any(self._sees(tenant, backend) for tenant in tenants):
            self._running[backend] = asyncio.get_running_loop().create_task(self._relist(backend),
                                                                            name=f"relist-{backend}")

    async def stop(self) -> None:
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _relist(self, backend: str) -> None:
        try:
            while True:
                self._again.discard(backend)
                with contextlib.suppress(Exception):  # a failed refresh is logged by the catalogue
                    await self._refresh(backend)
                if backend not in self._again:
                    return
                await asyncio.sleep(self._gap)
        finally:
            del self._running[backend]
            self._again.discard(backend)

    def _sees(self, tenant: str, backend: str) -> bool:
        config = self._config().tenants.get(tenant)
        return config is not None and ("*" in config.backends or backend in config.backends)
