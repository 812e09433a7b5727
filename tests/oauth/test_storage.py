"""What outbound OAuth stores, and how: sealed with rotating keys, in memory or in Redis, fetched once.

The sealing (AES-256-GCM) refuses a blob moved under another name, tampered with, or sealed
with a key no longer configured, and reports one sealed with an older key so it is sealed again.
The token cache asks an authorization server once for any number of concurrent callers, in one
process and across two (two caches on one Redis stand for two replicas).
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.config.outbound import parse_key
from gateway.oauth.client import OAuthError, TokenReply
from gateway.oauth.crypto import KeyRing, SealError
from gateway.oauth.grants import Grant, Grants, user_key
from gateway.oauth.store import MemoryStore, RedisStore, SecretStore
from gateway.oauth.tokens import TokenCache
from gateway.store.health import StoreHealth

OLD, NEW = os.urandom(32), os.urandom(32)


@pytest.fixture
async def redis_store() -> AsyncIterator[RedisStore]:
    prefix = f"mcpgw-test-{os.urandom(8).hex()}:"
    client = aioredis.Redis.from_url("redis://127.0.0.1:6379")
    health = StoreHealth(name="test")
    await health.probe(client.ping)
    yield RedisStore(client, key_prefix=prefix, health=health)
    async for key in client.scan_iter(match=f"{prefix}*"):
        await client.delete(key)
    await client.aclose()


# ---------------------------------------------------------------- sealing


def test_a_sealed_value_opens_under_its_own_name_only() -> None:
    ring = KeyRing([NEW])
    sealed = ring.seal(b"secret", "grant:alice:github")
    assert ring.open(sealed, "grant:alice:github") == (b"secret", False)
    assert b"secret" not in base64.urlsafe_b64decode(sealed)
    with pytest.raises(SealError, match="another name"):
        ring.open(sealed, "grant:mallory:github")


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_a_damaged_value_does_not_open(damage: str) -> None:
    ring = KeyRing([NEW])
    raw = bytearray(base64.urlsafe_b64decode(ring.seal(b"secret", "k")))
    if damage == "flip":
        raw[-1] ^= 1
    encode = base64.urlsafe_b64encode
    sealed = {"flip": encode(bytes(raw)).decode(), "truncate": encode(raw[:20]).decode(),
              "garbage": "not base64 at all!", "empty": ""}[damage]
    with pytest.raises(SealError):
        ring.open(sealed, "k")


def test_keys_rotate_a_new_key_seals_and_old_values_still_open_and_are_reported_stale() -> None:
    old_sealed = KeyRing([OLD]).seal(b"secret", "k")
    rotated = KeyRing([NEW, OLD])
    assert rotated.open(old_sealed, "k") == (b"secret", True)
    assert rotated.open(rotated.seal(b"secret", "k"), "k") == (b"secret", False)
    with pytest.raises(SealError, match="no longer configured"):
        KeyRing([NEW]).open(old_sealed, "k")


def test_configured_keys_are_base64_or_base64url_of_32_bytes() -> None:
    key = os.urandom(32)
    assert parse_key(base64.b64encode(key).decode()) == key
    assert parse_key(base64.urlsafe_b64encode(key).decode().rstrip("=")) == key
    with pytest.raises(ValueError, match="32 bytes"):
        parse_key(base64.b64encode(os.urandom(16)).decode())


async def test_a_grant_sealed_with_an_old_key_is_sealed_again_with_the_current_one() -> None:
    store = MemoryStore()
    grant = Grant("acme", "alice", "github", "at-1", "rt-1", time.time() + 60, "repo", connected_at=1.0)
    await Grants(store, KeyRing([OLD])).save(grant)
    where = f"grant:{user_key('acme', 'alice')}:github"
    assert await Grants(store, KeyRing([NEW, OLD])).load("acme", "alice", "github") == grant
    assert KeyRing([NEW]).open(await store.get(where) or "", where)[1] is False  # now under the new key
    assert "at-1" not in (await store.get(where) or "") and "alice" not in where


# ---------------------------------------------------------------- stores


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_both_stores_keep_take_index_and_lease(kind: str, redis_store: RedisStore) -> None:
    store: SecretStore = MemoryStore() if kind == "memory" else redis_store
    await store.set("a", "1")
    await store.set("brief", "2", ttl=0.05)
    assert (await store.get("a"), await store.take("a"), await store.take("a")) == ("1", "1", None)
    await asyncio.sleep(0.1)
    assert await store.get("brief") is None
    await store.add_member("idx", "x")
    await store.add_member("idx", "y")
    await store.remove_member("idx", "x")
    assert await store.members("idx") == {"y"}
    await store.set("grant:1", "g")
    assert await store.keys("grant:") == ["grant:1"]
    lease = await store.lock("lease", 5.0)
    assert lease is not None and await store.lock("lease", 5.0) is None
    await store.unlock("lease", "someone else's")
    assert await store.lock("lease", 5.0) is None
    await store.unlock("lease", lease)
    assert await store.lock("lease", 5.0) is not None


# ---------------------------------------------------------------- the token cache


class Server:
    """Counts fetches; each answers after `delay` with a token valid `lifetime` seconds (or fails)."""

    def __init__(self, *, delay: float = 0.05, lifetime: float = 60.0, fail: bool = False) -> None:
        self.delay, self.lifetime, self.fail, self.count = delay, lifetime, fail, 0

    async def fetch(self) -> TokenReply:
        self.count += 1
        await asyncio.sleep(self.delay)
        if self.fail:
            raise OAuthError("invalid_grant")
        return TokenReply(f"token-{self.count}", time.time() + self.lifetime)


async def test_concurrent_callers_share_one_fetch_and_a_failure_reaches_them_all() -> None:
    cache, server = TokenCache(None, None, margin=1.0), Server()
    assert set(await asyncio.gather(*(cache.get("k", server.fetch) for _ in range(200)))) == {"token-1"}
    assert server.count == 1
    failing, broken = TokenCache(None, None, margin=1.0), Server(fail=True)
    results = await asyncio.gather(*(failing.get("k", broken.fetch) for _ in range(50)), return_exceptions=True)
    assert all(isinstance(r, OAuthError) for r in results) and broken.count == 1
    broken.fail = False
    assert await failing.get("k", broken.fetch) == "token-2"  # a failure is not cached


async def test_a_token_is_renewed_within_the_margin_and_capped_by_not_after() -> None:
    cache, server = TokenCache(None, None, margin=10.0), Server(lifetime=10.5)
    assert await cache.get("k", server.fetch) == "token-1"
    await asyncio.sleep(0.6)
    assert await cache.get("k", server.fetch) == "token-2"
    capped = TokenCache(None, None, margin=1.0)
    assert await capped.get("c", server.fetch, not_after=time.time() + 1.2) == "token-3"
    await asyncio.sleep(0.3)
    assert await capped.get("c", server.fetch) == "token-4"  # the caller's own token ended first


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_two_replicas_fetch_once_and_share_the_token_sealed(kind: str, redis_store: RedisStore) -> None:
    store: SecretStore = MemoryStore() if kind == "memory" else redis_store
    keys = KeyRing([NEW])
    one, two, server = TokenCache(store, keys, margin=1.0), TokenCache(store, keys, margin=1.0), Server(delay=0.2)
    tokens = await asyncio.gather(*(cache.get("k", server.fetch) for cache in (one, two) for _ in range(20)))
    assert set(tokens) == {"token-1"} and server.count == 1
    stored: Any = await store.get("token:k")
    assert stored is not None and "token-1" not in stored
    await one.drop("k")
    assert await store.get("token:k") is None
