"""Where outbound OAuth keeps its state: cached tokens, users' grants, pending sign-ins, and locks.

In process memory (one process, gone at restart), or in Redis, shared by every replica and kept
across restarts. Values are strings the callers have sealed already (gateway.oauth.crypto);
keys never name a user in the clear (callers hash them). `take` reads and deletes in one step
(one-time states); `lock` is a short lease so only one replica fetches a token at a time.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

from gateway.store.health import StoreHealth

UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
"""Release a lease only while it is still ours (it may have expired and been taken by another)."""


class SecretStore(Protocol):
    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str, ttl: float | None = None) -> None: ...

    async def take(self, key: str) -> str | None:
        """The value, deleted in the same step (None when absent or already taken)."""

    async def delete(self, key: str) -> None: ...

    async def add_member(self, key: str, member: str) -> None:
        """Add `member` to the set at `key` (an index: a user's connections)."""

    async def remove_member(self, key: str, member: str) -> None: ...

    async def members(self, key: str) -> set[str]: ...

    async def keys(self, prefix: str) -> list[str]:
        """Every key starting with `prefix` (admin listings: not for the request path)."""

    async def lock(self, key: str, ttl: float) -> str | None:
        """A lease on `key` for `ttl` seconds: its token, or None while someone else holds it."""

    async def unlock(self, key: str, token: str) -> None: ...


class MemoryStore:
    """One process's store; entries with a ttl expire when next looked at."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._values: dict[str, tuple[Any, float | None]] = {}

    def _live(self, key: str) -> Any:
        found = self._values.get(key)
        if found is None:
            return None
        if found[1] is not None and found[1] <= self._clock():
            del self._values[key]
            return None
        return found[0]

    async def get(self, key: str) -> str | None:
        value = self._live(key)
        return value if isinstance(value, str) else None

    async def set(self, key: str, value: str, ttl: float | None = None) -> None:
        self._values[key] = (value, self._clock() + ttl if ttl is not None else None)

    async def take(self, key: str) -> str | None:
        value = await self.get(key)
        self._values.pop(key, None)
        return value

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)

    async def add_member(self, key: str, member: str) -> None:
        members = self._live(key)
        self._values[key] = ((members if isinstance(members, set) else set()) | {member}, None)

    async def remove_member(self, key: str, member: str) -> None:
        members = self._live(key)
        if isinstance(members, set):
            members.discard(member)

    async def members(self, key: str) -> set[str]:
        members = self._live(key)
        return set(members) if isinstance(members, set) else set()

    async def keys(self, prefix: str) -> list[str]:
        return [key for key in list(self._values) if key.startswith(prefix) and self._live(key) is not None]

    async def lock(self, key: str, ttl: float) -> str | None:
        if self._live(key) is not None:
            return None
        token = secrets.token_hex(8)
        await self.set(key, token, ttl)
        return token

    async def unlock(self, key: str, token: str) -> None:
        if self._live(key) == token:
            del self._values[key]


class RedisStore:
    """The replicas' store; every operation bounded by `health` (StoreUnavailable while Redis is down)."""

    def __init__(self, redis: Any, *, key_prefix: str, health: StoreHealth) -> None:
        self._redis = redis
        self._prefix = f"{key_prefix}oauth:"
        self._health = health

    async def get(self, key: str) -> str | None:
        return _text(await self._health.call(lambda: self._redis.get(self._prefix + key)))

    async def set(self, key: str, value: str, ttl: float | None = None) -> None:
        expiry = {"px": max(1, int(ttl * 1000))} if ttl is not None else {}
        await self._health.call(lambda: self._redis.set(self._prefix + key, value, **expiry))

    async def take(self, key: str) -> str | None:
        return _text(await self._health.call(lambda: self._redis.getdel(self._prefix + key)))

    async def delete(self, key: str) -> None:
        await self._health.call(lambda: self._redis.delete(self._prefix + key))

    async def add_member(self, key: str, member: str) -> None:
        await self._health.call(lambda: self._redis.sadd(self._prefix + key, member))

    async def remove_member(self, key: str, member: str) -> None:
        await self._health.call(lambda: self._redis.srem(self._prefix + key, member))

    async def members(self, key: str) -> set[str]:
        found = await self._health.call(lambda: self._redis.smembers(self._prefix + key))
        return {text for text in map(_text, found) if text is not None}

    async def keys(self, prefix: str) -> list[str]:
        async def scan() -> list[str]:
            names = [_text(name) async for name in self._redis.scan_iter(match=f"{self._prefix}{prefix}*", count=500)]
            return [name[len(self._prefix):] for name in names if name is not None]

        return await self._health.call(scan)

    async def lock(self, key: str, ttl: float) -> str | None:
        token = secrets.token_hex(8)
        taken = await self._health.call(
            lambda: self._redis.set(self._prefix + key, token, nx=True, px=max(1, int(ttl * 1000))))
        return token if taken else None

    async def unlock(self, key: str, token: str) -> None:
        await self._health.call(lambda: self._redis.eval(UNLOCK, 1, self._prefix + key, token))


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        return value.decode()
    return value if isinstance(value, str) else None
