"""Refreshes a backend's own lists ask for: a 2026 backend says how long they stay fresh (`ttlMs`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

MIN_HINT_SECONDS = 1.0
"""The soonest a backend's cache hint brings its next refresh (a hint of 1 ms must not mean a busy loop)."""


class HintedRefreshes:
    """At most one refresh due per backend, when its lists go stale before the periodic refresh."""

    def __init__(self, refresh: Callable[[str], Awaitable[None]], refresh_seconds: Callable[[], float]) -> None:
        self._refresh = refresh
        self._refresh_seconds = refresh_seconds
        self.due: dict[str, asyncio.Task[None]] = {}

    def follow(self, backend: str, ttl_ms: float | None) -> None:
        """Refresh `backend` when its lists' `ttl_ms` runs out, if that comes before the periodic refresh
        (its hint, 0 included, is the most clients may be told)."""
        if not ttl_ms or ttl_ms / 1000 >= self._refresh_seconds():
            return
        pending = self.due.get(backend)
        if pending is not None and not pending.done():
            return  # a refresh is due already
        delay = max(ttl_ms / 1000, MIN_HINT_SECONDS)
        self.due[backend] = asyncio.create_task(self._after(backend, delay), name=f"hint-{backend}")

    async def _after(self, backend: str, delay: float) -> None:
        await asyncio.sleep(delay)
        self.due.pop(backend, None)  # the refresh may set the next one
        with contextlib.suppress(Exception):
            await self._refresh(backend)
