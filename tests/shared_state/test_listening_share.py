"""SharedListening on a real Redis: each replica's listening tenants reach the others, and go away."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import orjson
import pytest
import redis.asyncio as aioredis

from gateway.store.events import EventBus
from gateway.store.health import StoreHealth
from gateway.store.listening import LISTENING_EVENT, SharedListening
from shared_state.conftest import needs_shared_redis
from shared_state.helpers import SHARED_REDIS_URL, wait_until

pytestmark = [pytest.mark.timeout(30), needs_shared_redis]

HEARD_WITHIN = 1.0


class Node:
    """One replica's event bus and listening share, running on the shared Redis."""

    def __init__(self, prefix: str, heartbeat: float, expiry: float) -> None:
        self.redis = aioredis.Redis.from_url(SHARED_REDIS_URL)
        health = StoreHealth(name="test")
        health.recovered()
        self.events = EventBus(self.redis, channel=f"{prefix}events", health=health)
        self.share = SharedListening(self.events, heartbeat=heartbeat, expiry=expiry)
        self.changes: list[frozenset[str]] = []  # the union after each change heard
        self.share.on_change(self.changed)
        self.tasks: list[asyncio.Task[None]] = []

    def changed(self) -> None:
        self.changes.append(self.share.tenants())

    async def start(self) -> Node:
        self.tasks = [asyncio.create_task(self.events.run()), asyncio.create_task(self.share.run())]
        await asyncio.wait_for(self.events.subscribed.wait(), 2)
        return self

    async def stop(self) -> None:
        for task in reversed(self.tasks):  # the share first: it says goodbye over the bus's Redis
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.tasks = []

    def hears(self, tenants: set[str]) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return self.share.tenants() == tenants
        return check


@pytest.fixture
async def nodes(redis_prefix: str) -> AsyncIterator[Callable[..., Awaitable[Node]]]:
    made: list[Node] = []

    async def start(heartbeat: float = 60.0, expiry: float = 180.0) -> Node:
        node = Node(redis_prefix, heartbeat, expiry)
        made.append(node)
        return await node.start()

    yield start
    for node in made:
        await node.stop()
        await node.redis.aclose()


async def test_a_replicas_tenants_reach_the_others_as_they_change(nodes: Callable[..., Awaitable[Node]]) -> None:
    a, b, c = await nodes(), await nodes(), await nodes()
    a.share.tell(frozenset({"acme"}))
    b.share.tell(frozenset({"beta", "acme"}))
    assert await wait_until(c.hears({"acme", "beta"}), HEARD_WITHIN)
    assert await wait_until(a.hears({"acme", "beta"}), HEARD_WITHIN)  # never its own
    assert a.share.tenants() == {"acme", "beta"} and await b.hears({"acme"})()
    b.share.tell(frozenset())
    assert await wait_until(c.hears({"acme"}), HEARD_WITHIN)
    assert c.changes[-1] == {"acme"} and c.changes[-2] == {"acme", "beta"}
    late = await nodes()  # its ask makes a and b say theirs again: the same union, no change to tell
    assert await wait_until(late.hears({"acme"}), HEARD_WITHIN)
    await asyncio.sleep(0.2)
    assert all(x != y for x, y in zip(c.changes, c.changes[1:], strict=False)), c.changes


async def test_a_replica_that_joins_later_asks_and_learns_at_once(nodes: Callable[..., Awaitable[Node]]) -> None:
    """The heartbeat is a minute away: only the answers to its ask can tell the newcomer."""
    a = await nodes()
    a.share.tell(frozenset({"acme"}))
    await asyncio.sleep(0.2)
    late = await nodes()
    assert await wait_until(late.hears({"acme"}), HEARD_WITHIN)


async def test_a_replica_that_stops_says_it_has_nobody(nodes: Callable[..., Awaitable[Node]]) -> None:
    a, b = await nodes(), await nodes()
    a.share.tell(frozenset({"acme"}))
    assert await wait_until(b.hears({"acme"}), HEARD_WITHIN)
    await a.stop()
    assert await wait_until(b.hears(set()), HEARD_WITHIN)


async def test_a_replica_unheard_for_the_expiry_stops_counting(
        nodes: Callable[..., Awaitable[Node]], redis_prefix: str, shared_redis: aioredis.Redis) -> None:
    """A dead replica said so once and never again; a live one's heartbeat keeps it counted."""
    live, b = await nodes(heartbeat=0.1, expiry=0.6), await nodes(heartbeat=0.1, expiry=0.6)
    live.share.tell(frozenset({"acme"}))
    dead = orjson.dumps({"kind": LISTENING_EVENT, "from": "dead-replica", "tenants": ["beta"], "ask": False})
    await shared_redis.publish(f"{redis_prefix}events", dead)
    assert await wait_until(b.hears({"acme", "beta"}), HEARD_WITHIN)
    assert await wait_until(b.hears({"acme"}), 2.0)
    await asyncio.sleep(1.0)  # well past the expiry: the heartbeat keeps the live one
    assert b.share.tenants() == {"acme"}
