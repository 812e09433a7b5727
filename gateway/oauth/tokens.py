"""Tokens the gateway gets for itself or for a user: cached until shortly before they expire.

A key names what a token is for (the gateway's client at one backend; one user's exchanged token
at one backend). A token is served from this process while more than the refresh margin of its
life is left; else from the store, where another replica may have put it (sealed); else fetched,
once: concurrent callers of one key wait for the same fetch, and across replicas a short lease
in the store lets one replica fetch while the others wait for what it stores. If the store is
down, each replica fetches for itself. A fetch that fails fails every caller waiting on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson
import structlog

from gateway.oauth.client import TokenReply
from gateway.oauth.crypto import KeyRing, SealError
from gateway.oauth.store import SecretStore
from gateway.store.health import StoreUnavailable

log = structlog.get_logger("gateway.oauth")

UNKNOWN_LIFETIME_SECONDS = 60.0
"""How long a token whose server gave no `expires_in` is used."""
LEASE_SECONDS = 10.0
"""How long one replica may take to fetch a token before another tries."""
POLL_SECONDS = 0.05
MAX_CACHED = 10_000

Fetch = Callable[[], Awaitable[TokenReply]]


@dataclass(frozen=True, slots=True)
class CachedToken:
    value: str = field(repr=False)
    expires_at: float


class TokenCache:
    """See the module docstring. `store` and `keys` are None when tokens stay in this process."""

    def __init__(self, store: SecretStore | None, keys: KeyRing | None, *, margin: float,
                 clock: Callable[[], float] = time.time) -> None:
        self._shared_store = store
        self._clock = clock
        self.rebind(keys, margin=margin)
        self._local: OrderedDict[str, CachedToken] = OrderedDict()
        self._pending: dict[str, asyncio.Future[CachedToken]] = {}
        self.fetched = 0  # tokens this process asked an authorization server for

    def rebind(self, keys: KeyRing | None, *, margin: float) -> None:
        """New keys or margin (a reload); tokens are shared through the store only while there are keys."""
        self._keys = keys
        self._store = self._shared_store if keys is not None else None
        self._margin = margin

    async def get(self, key: str, fetch: Fetch, *, not_after: float | None = None) -> str:
        """The token for `key`; `not_after` caps how long it is used (a caller's own token's expiry)."""
        cached = self._local.get(key)
        if cached is not None and self._fresh(cached):
            return cached.value
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = asyncio.ensure_future(self._obtain(key, fetch, not_after))
            pending.add_done_callback(lambda done: self._forget_pending(key, done))
        return (await asyncio.shield(pending)).value

    async def drop(self, key: str) -> None:
        """The backend refused the token: the next call gets a new one."""
        self._local.pop(key, None)
        if self._store is not None:
            with contextlib.suppress(StoreUnavailable):
                await self._store.delete(f"token:{key}")

    def _fresh(self, token: CachedToken) -> bool:
        return token.expires_at - self._margin > self._clock()

    def _forget_pending(self, key: str, done: asyncio.Future[CachedToken]) -> None:
        if self._pending.get(key) is done:
            del self._pending[key]
        if not done.cancelled():
            done.exception()  # retrieved: a failed fetch is reported to its callers, not as "never retrieved"

    async def _obtain(self, key: str, fetch: Fetch, not_after: float | None) -> CachedToken:
        shared = await self._shared(key)
        if shared is not None:
            return self._remember(key, shared)
        lease = await self._lease(key)
        try:
            if lease is False:  # another replica is fetching: wait for what it stores
                shared = await self._wait_shared(key)
                if shared is not None:
                    return self._remember(key, shared)
            reply = await fetch()
            self.fetched += 1
            token = self._token(reply, not_after)
            await self._publish(key, token)
            return self._remember(key, token)
        finally:
            if isinstance(lease, str):
                await self._release(key, lease)

    def _token(self, reply: TokenReply, not_after: float | None) -> CachedToken:
        expires = reply.expires_at or self._clock() + UNKNOWN_LIFETIME_SECONDS
        return CachedToken(reply.access_token, min(expires, not_after) if not_after is not None else expires)

    def _remember(self, key: str, token: CachedToken) -> CachedToken:
        self._local[key] = token
        self._local.move_to_end(key)
        while len(self._local) > MAX_CACHED:
            self._local.popitem(last=False)
        return token

    async def _shared(self, key: str) -> CachedToken | None:
        if self._store is None or self._keys is None:
            return None
        try:
            sealed = await self._store.get(f"token:{key}")
            if sealed is None:
                return None
            plain, _ = self._keys.open(sealed, f"token:{key}")
            value = orjson.loads(plain)
            token = CachedToken(value["token"], float(value["expires_at"]))
        except (StoreUnavailable, SealError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            log.debug("oauth_cached_token_unusable", error=type(exc).__name__)
            return None
        return token if self._fresh(token) else None

    async def _publish(self, key: str, token: CachedToken) -> None:
        if self._store is None or self._keys is None:
            return
        ttl = token.expires_at - self._margin - self._clock()
        if ttl <= 0:
            return
        plain = orjson.dumps({"token": token.value, "expires_at": token.expires_at})
        with contextlib.suppress(StoreUnavailable):
            await self._store.set(f"token:{key}", self._keys.seal(plain, f"token:{key}"), ttl)

    async def _lease(self, key: str) -> str | bool:
        """A lease token (this replica fetches), False (another one does), True (no store: just fetch)."""
        if self._store is None:
            return True
        try:
            return await self._store.lock(f"lease:{key}", LEASE_SECONDS) or False
        except StoreUnavailable:
            return True

    async def _wait_shared(self, key: str) -> CachedToken | None:
        deadline = self._clock() + LEASE_SECONDS
        while self._clock() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            shared = await self._shared(key)
            if shared is not None:
                return shared
        return None

    async def _release(self, key: str, lease: str) -> None:
        assert self._store is not None
        with contextlib.suppress(StoreUnavailable):
            await self._store.unlock(f"lease:{key}", lease)
