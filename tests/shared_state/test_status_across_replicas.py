"""The status page's view of many replicas on one Redis: who is alive, on which config, and
every replica's reloads; and what is left when Redis does not answer."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
from conftest import API_KEY, stdio_backend

from gateway.store.health import StoreHealth
from gateway.store.reloads import ReloadLog
from gateway.store.replicas import Replicas
from shared_state.conftest import StartReplicas, needs_redis_server, needs_shared_redis
from shared_state.helpers import SHARED_REDIS_URL

pytestmark = [pytest.mark.timeout(90), needs_shared_redis]

ADMIN = {"Authorization": f"Bearer {API_KEY}"}


async def admin_get(base: str, path: str) -> Any:
    async with aiohttp.ClientSession() as http, http.get(base.rstrip("/") + path, headers=ADMIN) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def healthy(url: str) -> tuple[aioredis.Redis, StoreHealth]:
    client = aioredis.Redis.from_url(url)
    health = StoreHealth(name="test")
    await health.probe(client.ping)
    return client, health


async def test_each_replica_sees_the_others_and_their_reloads(replicas: StartReplicas) -> None:
    first, second = await replicas(2, [stdio_backend("clock")])
    seen = await admin_get(first.base, "/admin/replicas")
    assert (seen["store"], seen["store_answered"], seen["config_versions"]) == ("redis", True, 1)
    mine, theirs = seen["replicas"]
    assert mine["self"] is True and "self" not in theirs and mine["replica"] != theirs["replica"]
    assert mine["config_version"] == theirs["config_version"]
    other = await admin_get(second.base, "/admin/status")
    assert theirs["replica"] == other["gateway"]["replica"] and other["store"] == {"kind": "redis", "up": True}

    history = await admin_get(second.base, "/admin/reloads")
    starts = {(entry["replica"], entry["trigger"]) for entry in history["reloads"]}
    assert starts == {(mine["replica"], "start"), (theirs["replica"], "start")}

    await second.server.close()  # a clean stop takes its heartbeat out of the store
    await second.app.shutdown()
    await second.app.cleanup()
    seen = await admin_get(first.base, "/admin/replicas")
    assert [replica["replica"] for replica in seen["replicas"]] == [mine["replica"]]


async def test_a_replica_unheard_for_too_long_is_no_longer_shown_and_its_field_goes(redis_prefix: str) -> None:
    client, health = await healthy(SHARED_REDIS_URL)
    now = [1000.0]
    key = f"{redis_prefix}replicas"
    alive = Replicas(replica_id="alive", redis=client, key=key, health=health, clock=lambda: now[0])
    quiet = Replicas(replica_id="quiet", redis=client, key=key, health=health, clock=lambda: now[0])
    quiet.describe = lambda: {"config_version": "abc"}
    try:
        await quiet.tell()
        assert [r["replica"] for r in (await alive.seen())[0]] == ["alive", "quiet"]
        now[0] += quiet.expiry + 1
        assert [r["replica"] for r in (await alive.seen())[0]] == ["alive"]
        assert await client.hkeys(key) == []
        await client.hset(key, "garbage", b"not json")
        assert [r["replica"] for r in (await alive.seen())[0]] == ["alive"]
        assert await client.hkeys(key) == []
    finally:
        await client.aclose()


async def test_the_reload_log_is_shared_trimmed_and_merged_with_what_only_this_process_kept(
        redis_prefix: str) -> None:
    client, health = await healthy(SHARED_REDIS_URL)
    key = f"{redis_prefix}reloads"
    one = ReloadLog(replica="one", redis=client, key=key, health=health, max_entries=3)
    two = ReloadLog(replica="two", redis=client, key=key, health=health, max_entries=3)
    try:
        for at in (1.0, 2.0):
            one.record({"at": at, "trigger": "start"})
        two.record({"at": 3.0, "trigger": "SIGHUP"})
        await one.close()
        await two.close()
        assert [(e["replica"], e["at"]) for e in await two.recent()] == [("two", 3.0), ("one", 2.0), ("one", 1.0)]
        two.record({"at": 4.0, "trigger": "admin"})
        await two.close()
        assert await client.llen(key) == 3  # trimmed to the newest
        assert [e["at"] for e in await one.recent()] == [4.0, 3.0, 2.0]
    finally:
        await client.aclose()


@needs_redis_server
async def test_without_redis_a_replica_shows_itself_and_its_own_reloads(private_redis: Any) -> None:
    server = await private_redis()
    client, health = await healthy(server.url)
    log = ReloadLog(replica="me", redis=client, key="r", health=health)
    replicas = Replicas(replica_id="me", redis=client, key="h", health=health)
    try:
        log.record({"at": 1.0, "trigger": "start"})
        await log.close()
        await server.stop()
        await asyncio.sleep(0.1)
        log.record({"at": 2.0, "trigger": "SIGHUP"})  # Redis fails under it: kept here
        await log.close()
        assert [e["at"] for e in await log.recent()] == [2.0, 1.0]
        seen, answered = await replicas.seen()
        assert answered is False and [r["replica"] for r in seen] == ["me"]
    finally:
        await client.aclose()
