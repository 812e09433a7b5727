"""What each config load and reload did, for the status page: kept here, and with Redis for every replica.

An entry says when, on which replica, what triggered it (`start`, `SIGHUP`, `admin`) and who
(the admin's tenant and subject), whether it was applied or rejected (with the one-line reason),
what changed (backends added, removed or replaced, tenants changed, and the other key paths that
differ: never their values, which may be secrets), and the config version before and after.

The last MAX_ENTRIES stay in this process. With Redis each entry is also pushed to one list all
replicas share (`{prefix}reloads`, trimmed to MAX_ENTRIES), in the background: recording never
waits on Redis. Reading merges that list with this process's own entries (those made while
Redis was down are only here), newest first.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import deque
from typing import Any

import orjson
import structlog

from gateway.store.health import StoreHealth, StoreUnavailable

log = structlog.get_logger("gateway.store")

MAX_ENTRIES = 50
"""Entries kept (per process, and in the shared list)."""

Entry = dict[str, Any]


class ReloadLog:
    """The recent config loads of this process, and with Redis those of every replica."""

    def __init__(self, *, replica: str = "", redis: Any = None, key: str = "", health: StoreHealth | None = None,
                 max_entries: int = MAX_ENTRIES) -> None:
        self.replica = replica  # stamped on each entry: whose reload it was
        self.redis = redis
        self.key = key
        self.health = health
        self.max_entries = max_entries
        self._local: deque[Entry] = deque(maxlen=max_entries)
        self._pushing: set[asyncio.Task[None]] = set()

    def record(self, entry: Entry) -> Entry:
        """Keep `entry` (given an id and this replica's); with Redis, share it soon."""
        entry = {"id": secrets.token_hex(6), "replica": self.replica, **entry}
        self._local.appendleft(entry)
        if self.redis is not None:
            task = asyncio.get_running_loop().create_task(self._push(entry), name="reload-log-push")
            self._pushing.add(task)
            task.add_done_callback(self._pushing.discard)
        return entry

    async def recent(self) -> list[Entry]:
        """The newest entries first: the shared list's and this process's own, each once."""
        shared = await self._shared()
        merged = {entry["id"]: entry for entry in [*shared, *self._local] if isinstance(entry.get("id"), str)}
        ordered = sorted(merged.values(), key=lambda entry: entry.get("at", 0), reverse=True)
        return ordered[:self.max_entries]

    async def close(self) -> None:
        """Let the pushes under way finish (each is bounded by the store's operation timeout)."""
        await asyncio.gather(*self._pushing, return_exceptions=True)

    async def _push(self, entry: Entry) -> None:
        assert self.health is not None
        data = orjson.dumps(entry)

        async def push() -> None:
            await self.redis.lpush(self.key, data)
            await self.redis.ltrim(self.key, 0, self.max_entries - 1)

        with contextlib.suppress(StoreUnavailable):  # then it is only here
            await self.health.call(push)

    async def _shared(self) -> list[Entry]:
        if self.redis is None or self.health is None:
            return []
        try:
            raw = await self.health.call(lambda: self.redis.lrange(self.key, 0, self.max_entries - 1))
        except StoreUnavailable:
            return []
        entries = []
        for item in raw:
            try:
                entry = orjson.loads(item)
            except orjson.JSONDecodeError:
                log.warning("reload_entry_unreadable")
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        return entries
