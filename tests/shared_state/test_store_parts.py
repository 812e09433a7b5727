"""The store's parts one by one: URLs, the health tracker, sessions and snapshots against Redis."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
import structlog
from conftest import make_config
from redis.asyncio.cluster import RedisCluster

from gateway.catalogue.listings import PROMPTS, TEMPLATES, Listed
from gateway.catalogue.merge import BackendSnapshot, Tool, snapshot_version
from gateway.catalogue.store import (
    MemorySnapshotStore,
    RedisSnapshotStore,
    StoredSnapshot,
    decode_snapshot,
    encode_snapshot,
)
from gateway.config import ConfigError
from gateway.config.redis_urls import StoreUrlError, check_store_url, parse_multi_host
from gateway.protocol.request_state import StateSeal
from gateway.ratelimit import MemoryRateLimiter
from gateway.shared_state import NOT_READY_AFTER_SECONDS, NOT_READY_REASON, SharedState
from gateway.store.client import create_client, uses_hiredis
from gateway.store.events import EventBus
from gateway.store.health import StoreHealth, StoreUnavailable, redacted
from gateway.tenancy import Principal
from gateway.transport.sessions import MemorySessionStore, RedisSessionStore
from shared_state.conftest import needs_shared_redis
from shared_state.helpers import SHARED_REDIS_URL

ALICE = Principal("acme", "alice")


# ---------------------------------------------------------------- URLs


def test_a_sentinel_url_names_its_sentinels_service_database_and_credentials() -> None:
    parsed = parse_multi_host("rediss+sentinel://app:s%40cret@10.0.0.1,10.0.0.2:26380,[::1]/cache/2"
                              "?sentinel_password=sp", default_port=26379, sentinel=True)
    assert parsed.tls and parsed.service == "cache" and parsed.db == 2
    assert parsed.hosts == (("10.0.0.1", 26379), ("10.0.0.2", 26380), ("::1", 26379))
    assert (parsed.username, parsed.password) == ("app", "s@cret")
    assert parsed.options == {"sentinel_password": "sp"}


def test_a_cluster_url_lists_seed_nodes_and_has_no_database() -> None:
    parsed = parse_multi_host("redis+cluster://:pw@a:7000,b", default_port=6379, sentinel=False)
    assert parsed.hosts == (("a", 7000), ("b", 6379)) and parsed.password == "pw" and not parsed.tls


@pytest.mark.parametrize(("url", "reason"), [
    ("redis+sentinel://a:26379", "master's name"),
    ("redis+sentinel://a/m/x", "bad database"),
    ("redis+cluster://a/1", "database 0 only"),
    ("redis+cluster://a:99999", "bad port"),
    ("redis+cluster://a?timeout=1", "unknown option"),
    ("redis+cluster://", "no host"),
    ("memcached://a", "must be a"),
])
def test_unusable_urls_say_why(url: str, reason: str) -> None:
    with pytest.raises(StoreUrlError, match=reason):
        check_store_url(url)


def test_the_config_rejects_a_bad_sentinel_url_with_its_key_path() -> None:
    with pytest.raises(ConfigError, match=r"^store.redis_url: the Sentinel URL needs"):
        make_config([], store={"redis_url": "redis+sentinel://a:26379"})


async def test_clients_of_each_kind_are_made_without_connecting() -> None:
    plain = create_client("redis://127.0.0.1:1/0")
    sentinel = create_client("redis+sentinel://127.0.0.1:1/mymaster")
    cluster = create_client("redis+cluster://127.0.0.1:1")
    try:
        assert isinstance(plain, aioredis.Redis) and isinstance(sentinel, aioredis.Redis)
        assert isinstance(cluster, RedisCluster)
        assert plain.connection_pool.connection_kwargs["socket_timeout"] == 0.5
        assert uses_hiredis()
    finally:
        for client in (plain, sentinel, cluster):
            with contextlib.suppress(Exception):
                await client.aclose()


def test_passwords_are_not_logged() -> None:
    assert redacted("redis://user:secret@host:6379/0") == "redis://user:***@host:6379/0"
    assert redacted("redis+sentinel://:secret@a,b/m") == "redis+sentinel://***@a,b/m"
    assert redacted("redis://host") == "redis://host"


# ---------------------------------------------------------------- health


async def test_while_down_operations_fail_at_once_and_an_outage_is_logged_once() -> None:
    changes: list[bool] = []
    health = StoreHealth(name="redis://x", on_change=changes.append)
    health.recovered()
    started: list[int] = []

    async def failing() -> None:
        started.append(1)
        raise ConnectionError("refused")

    with structlog.testing.capture_logs() as logs:
        for _ in range(5):
            with pytest.raises(StoreUnavailable):
                await health.call(failing)
        health.recovered()
    assert started == [1]  # the four others never touched Redis
    assert [e["event"] for e in logs] == ["store_unavailable", "store_recovered"]
    assert changes == [True, False, True]


async def test_an_operation_that_hangs_counts_as_an_outage_after_the_timeout() -> None:
    health = StoreHealth(name="redis://x", timeout_seconds=0.1)
    health.recovered()
    with pytest.raises(StoreUnavailable):
        await health.call(lambda: asyncio.sleep(5))
    assert not health.up


# ---------------------------------------------------------------- the snapshot record


TOOLS = ({"name": "add", "description": "Sum", "inputSchema": {"type": "object", "required": ["a"]}},
         {"name": 'odd "name" é'})


def stored(tools: tuple[dict[str, Any], ...] = TOOLS) -> StoredSnapshot:
    snapshot = BackendSnapshot("calc", tuple(map(Tool.from_dict, tools)), snapshot_version(tools), 100.0,
                               status="stale", error="timeout")
    return StoredSnapshot(snapshot, 99.5)


def test_a_snapshot_record_comes_back_equal() -> None:
    assert decode_snapshot(encode_snapshot(stored())) == stored()


def test_a_snapshot_record_keeps_its_tools_as_plain_json_objects() -> None:
    """The format other replicas (and older versions of this one) read."""
    assert orjson.loads(encode_snapshot(stored())) == {
        "backend": "calc", "tools": list(TOOLS), "version": snapshot_version(TOOLS), "fetched_at": 100.0,
        "status": "stale", "error": "timeout", "checked_at": 99.5, "lists": {}, "offers": [],
        "versions": {}, "needs": {},  # needs: the client traits a tool is listed for, by its index in tools
    }


def test_a_record_keeps_prompts_resources_templates_and_offers() -> None:
    lists = {"prompts": (Listed.from_dict(PROMPTS, {"name": "p", "arguments": []}),),
             "templates": (Listed.from_dict(TEMPLATES, {"uriTemplate": "x://{y}", "name": "t"}),)}
    record = stored()
    snapshot = replace(record.snapshot, lists=lists, offers=frozenset({"prompts", "resources"}),
                       versions={"tools": "t1", "prompts": "p1", "templates": "x1"})
    encoded = encode_snapshot(StoredSnapshot(snapshot, 99.5))
    assert decode_snapshot(encoded) == StoredSnapshot(snapshot, 99.5)
    assert orjson.loads(encoded)["lists"] == {"prompts": [{"name": "p", "arguments": []}],
                                              "templates": [{"uriTemplate": "x://{y}", "name": "t"}]}


def test_a_record_written_before_prompts_and_resources_reads_as_having_none() -> None:
    record = orjson.loads(encode_snapshot(stored()))
    del record["lists"], record["offers"], record["versions"]
    assert decode_snapshot(orjson.dumps(record)) == stored()


@pytest.mark.parametrize("lists", [{"gadgets": []}, {"prompts": [{"no": "name"}]}, {"prompts": "p"}, []])
def test_a_record_with_unreadable_lists_is_unreadable(lists: Any) -> None:
    record = orjson.loads(encode_snapshot(stored()))
    assert decode_snapshot(orjson.dumps({**record, "lists": lists})) is None


@pytest.mark.parametrize("tools", [[{"description": "no name"}], [{"name": 5}], ["add"], "add", None])
def test_a_record_with_something_else_than_tools_is_unreadable(tools: Any) -> None:
    record = orjson.loads(encode_snapshot(stored()))
    assert decode_snapshot(orjson.dumps({**record, "tools": tools})) is None


# ---------------------------------------------------------------- sessions and snapshots in Redis


class Replica:
    """The Redis-backed stores of one replica, without an app; the test flips its health."""

    def __init__(self, prefix: str) -> None:
        self.redis = aioredis.Redis.from_url(SHARED_REDIS_URL)
        self.health = StoreHealth(name="test")
        self.health.recovered()
        self.events = EventBus(self.redis, channel=f"{prefix}events", health=self.health)
        self.sessions = RedisSessionStore(self.redis, key_prefix=prefix, health=self.health, events=self.events,
                                          idle_seconds=60)
        self.snapshots = RedisSnapshotStore(self.redis, key_prefix=prefix, backends=["calc"], health=self.health,
                                            events=self.events, ttl_seconds=60)
        self.ended: list[str] = []
        self.sessions.on_ended(self.ended.append)
        self.task: asyncio.Task[None] | None = None

    async def listen(self) -> None:
        self.task = asyncio.create_task(self.events.run())
        await asyncio.wait_for(self.events.subscribed.wait(), 2)

    def down(self) -> None:
        self.health.failed(ConnectionError("test"))

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.redis.aclose()


@pytest.fixture
async def two(redis_prefix: str) -> AsyncIterator[tuple[Replica, Replica]]:
    pair = (Replica(redis_prefix), Replica(redis_prefix))
    yield pair
    for replica in pair:
        await replica.close()


async def eventually(check: Any, within: float = 1.0) -> None:
    for _ in range(int(within / 0.02)):
        if await check():
            return
        await asyncio.sleep(0.02)
    assert await check()


@needs_shared_redis
async def test_a_session_made_while_redis_is_down_is_written_back_when_it_returns(
        two: tuple[Replica, Replica]) -> None:
    x, y = two
    x.down()
    session = await x.sessions.create(ALICE, "2025-11-25")
    assert await x.sessions.get(session.id) == session  # served locally
    assert await y.sessions.get(session.id) is None
    x.health.recovered()
    await x.sessions.resync()
    found = await y.sessions.get(session.id)
    assert found is not None and (found.tenant, found.subject) == ("acme", "alice")


@needs_shared_redis
async def test_a_delete_while_redis_is_down_ends_the_session_everywhere_when_it_returns(
        two: tuple[Replica, Replica]) -> None:
    x, y = two
    await y.listen()
    session = await x.sessions.create(ALICE, "2025-11-25")
    assert await y.sessions.get(session.id) is not None  # now cached on y
    x.down()
    assert await x.sessions.delete(session.id)
    assert await y.sessions.get(session.id) is not None  # y cannot know yet
    x.health.recovered()
    await x.sessions.resync()

    async def ended_on_y() -> bool:
        return await y.sessions.get(session.id) is None and y.ended == [session.id]

    await eventually(ended_on_y)


@needs_shared_redis
async def test_a_resync_never_brings_an_ended_session_back(two: tuple[Replica, Replica]) -> None:
    x, y = two
    session = await x.sessions.create(ALICE, "2025-11-25")
    assert await y.sessions.get(session.id) is not None
    await x.sessions.delete(session.id)  # y does not listen: it missed the event
    await y.sessions.resync()  # as after a reconnect: y checks what it holds
    assert await y.sessions.get(session.id) is None and y.ended == [session.id]
    assert await x.redis.get(x.sessions.key(session.id)) == b"ended"


@needs_shared_redis
async def test_the_refresh_lock_is_exclusive_and_only_its_owner_releases_it(two: tuple[Replica, Replica]) -> None:
    x, y = two
    lock = await x.snapshots.lock("calc", 0.2)
    assert lock is not None and await y.snapshots.lock("calc", 10) is None
    await asyncio.sleep(0.3)  # expired
    taken = await y.snapshots.lock("calc", 10)
    assert taken is not None
    await lock.release()  # too late: not x's any more
    assert await x.snapshots.lock("calc", 10) is None
    await taken.release()
    assert await x.snapshots.lock("calc", 10) is not None


@needs_shared_redis
async def test_a_snapshot_saved_while_down_goes_back_only_if_no_one_checked_more_recently(
        two: tuple[Replica, Replica]) -> None:
    x, y = two
    old = BackendSnapshot("calc", (Tool.from_dict({"name": "a"}),), "v1", 100.0)
    new = BackendSnapshot("calc", (Tool.from_dict({"name": "a"}), Tool.from_dict({"name": "b"})), "v2", 200.0)
    x.down()
    await x.snapshots.save(old, checked_at=100.0)
    assert (await x.snapshots.get("calc")).snapshot == old  # the local copy answers
    await y.snapshots.save(new, checked_at=200.0)
    x.health.recovered()
    await x.snapshots.resync()
    assert (await y.snapshots.get("calc")).snapshot == new  # the newer check wins
    await y.redis.delete(y.snapshots.key("calc"))  # e.g. Redis restarted empty
    x.down()
    await x.snapshots.save(old, checked_at=300.0)
    x.health.recovered()
    await x.snapshots.resync()
    assert (await y.snapshots.get("calc")).snapshot == old


async def test_a_required_store_is_not_ready_before_it_first_answers_and_once_it_stays_down() -> None:
    now = [0.0]
    health = StoreHealth(name="test", clock=lambda: now[0])
    seal = StateSeal([b"k" * 32], 60)
    state = SharedState(MemorySnapshotStore(), MemorySessionStore(), MemoryRateLimiter(), seal, health=health,
                        required=True)
    relaxed = SharedState(MemorySnapshotStore(), MemorySessionStore(), MemoryRateLimiter(), seal, health=health)
    assert await state.readiness() == NOT_READY_REASON  # never answered yet
    health.recovered()
    assert await state.readiness() is None
    health.failed(ConnectionError("lost"))
    now[0] = NOT_READY_AFTER_SECONDS - 0.1
    assert await state.readiness() is None  # a blink: still ready
    now[0] = NOT_READY_AFTER_SECONDS
    assert await state.readiness() == NOT_READY_REASON
    assert await relaxed.readiness() is None  # store.required: false keeps serving, ready


@needs_shared_redis
async def test_a_session_in_use_on_one_replica_keeps_its_shared_key_alive(redis_prefix: str) -> None:
    replica = Replica(redis_prefix)
    replica.sessions = RedisSessionStore(replica.redis, key_prefix=redis_prefix, health=replica.health,
                                         events=replica.events, idle_seconds=1.5, touch_seconds=0.2)
    flusher = asyncio.create_task(replica.sessions.run())
    try:
        used = await replica.sessions.create(ALICE, "2025-11-25")
        idle = await replica.sessions.create(ALICE, "2025-11-25")
        for _ in range(12):  # 3 s: twice the idle time
            assert await replica.sessions.get(used.id) is not None  # from the local cache
            await asyncio.sleep(0.25)
        assert await replica.redis.exists(replica.sessions.key(used.id)) == 1
        assert await replica.redis.exists(replica.sessions.key(idle.id)) == 0  # expired in Redis
    finally:
        flusher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flusher
        await replica.close()


@needs_shared_redis
async def test_a_sessions_capabilities_and_log_level_reach_every_replica(two: tuple[Replica, Replica]) -> None:
    x, y = two
    await y.listen()
    session = await x.sessions.create(ALICE, "2025-11-25", frozenset({"sampling", "roots"}))
    seen = await y.sessions.get(session.id)
    assert seen is not None and seen.capabilities == {"sampling", "roots"} and seen.log_level is None
    await x.sessions.set_log_level(session.id, "warning")

    async def level_on_y() -> bool:
        current = await y.sessions.get(session.id)
        return current is not None and current.log_level == "warning" and current.capabilities == seen.capabilities

    await eventually(level_on_y)
