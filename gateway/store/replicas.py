"""The replicas the store knows of, for the status page.

With Redis every replica (each worker of `--workers N` is one) writes a short description of
itself into one hash, `{prefix}replicas`, every HEARTBEAT_SECONDS: its id, host and pid, when
it started, its package, config and catalogue versions, its sessions. One that stops cleanly
removes its field; one not heard from for EXPIRY_SECONDS (it died, or lost Redis) is left out
when the hash is read, and its field removed then. A replica whose config version differs from
the others' missed a reload. With the memory store this process is the only replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import orjson

from gateway.store.health import StoreHealth, StoreUnavailable

HEARTBEAT_SECONDS = 5.0
"""How often a replica says it is alive."""
EXPIRY_SECONDS = 3 * HEARTBEAT_SECONDS
"""A replica unheard for this long (three heartbeats missed) is no longer shown."""

Description = dict[str, Any]


def _nobody() -> Description:
    return {}


class Replicas:
    """This replica's heartbeat into the store, and the replicas heard from lately."""

    def __init__(self, *, replica_id: str, redis: Any = None, key: str = "", health: StoreHealth | None = None,
                 heartbeat: float = HEARTBEAT_SECONDS, expiry: float = EXPIRY_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self.replica_id = replica_id
        self.redis = redis
        self.key = key
        self.health = health
        self.heartbeat = heartbeat
        self.expiry = expiry
        self.clock = clock
        self.describe: Callable[[], Description] = _nobody
        """This replica's fields; set by whoever knows them (the app), read at each heartbeat."""

    def own(self) -> Description:
        return {**self.describe(), "replica": self.replica_id, "seen_at": self.clock()}

    async def run(self) -> None:
        """The heartbeat (a task); when stopped, this replica's field is removed."""
        try:
            while True:
                await self.tell()
                await asyncio.sleep(self.heartbeat)
        finally:
            if self.redis is not None and self.health is not None:
                with contextlib.suppress(StoreUnavailable):
                    await self.health.call(lambda: self.redis.hdel(self.key, self.replica_id))

    async def seen(self) -> tuple[list[Description], bool]:
        """Every replica heard from within the expiry, this one first (described now), and whether the
        store answered (False: only this replica is known)."""
        own = {**self.own(), "self": True}
        if self.redis is None or self.health is None:
            return [own], True
        try:
            raw = await self.health.call(lambda: self.redis.hgetall(self.key))
        except StoreUnavailable:
            return [own], False
        others, stale = self._read(raw)
        if stale:
            with contextlib.suppress(StoreUnavailable):
                await self.health.call(lambda: self.redis.hdel(self.key, *stale))
        return [own, *sorted(others, key=lambda r: str(r.get("started_at")))], True

    def _read(self, raw: dict[Any, Any]) -> tuple[list[Description], list[Any]]:
        """The live replicas other than this one, and the fields of those gone quiet."""
        oldest, others, stale = self.clock() - self.expiry, [], []
        for field, value in raw.items():
            replica = _decoded(value)
            if replica is None or replica["seen_at"] < oldest:
                stale.append(field)
            elif replica.get("replica") != self.replica_id:
                others.append(replica)
        return others, stale

    async def tell(self) -> None:
        """Say now that this replica is alive (the heartbeat does so every `heartbeat` seconds)."""
        if self.redis is None or self.health is None:
            return
        data = orjson.dumps(self.own())
        with contextlib.suppress(StoreUnavailable):  # the next heartbeat tries again
            await self.health.call(lambda: self.redis.hset(self.key, self.replica_id, data))


def _decoded(value: Any) -> Description | None:
    """A replica's description, or None for what no replica of this version wrote."""
    try:
        replica = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(replica, dict) or not isinstance(replica.get("seen_at"), int | float):
        return None
    return replica
