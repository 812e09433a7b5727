"""Redis trouble: start without it, lose it under load, get it back; no request fails meanwhile.

Each test runs its own redis-server on a free port (the shared one is never stopped).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
import redis.asyncio as aioredis
import structlog
from conftest import SCRAPE_TOKEN, RawClient, RunningGateway, make_token, stdio_backend

from shared_state.conftest import StartReplicas, needs_redis_server
from shared_state.helpers import RedisServer, wait_until

pytestmark = [pytest.mark.timeout(90), needs_redis_server]

RESYNC_WITHIN = 5.0
TENANTS = {"acme": {"backends": ["*"], "rate_limit": {"requests_per_second": 10_000, "burst": 10_000}}}


async def ready_status(running: RunningGateway) -> tuple[int, list[str]]:
    async with aiohttp.ClientSession() as http, http.get(f"{running.base}readyz") as response:
        return response.status, (await response.json())["reasons"]


async def metric(running: RunningGateway, name: str) -> float:
    scrape = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}  # make_config's metrics.token
    async with aiohttp.ClientSession() as http, http.get(f"{running.base}metrics", headers=scrape) as response:
        text = await response.text()
    line = next(line for line in text.splitlines() if line.startswith(f"{name} "))
    return float(line.split()[1])


async def keys_under(url: str, prefix: str, kind: str) -> list[bytes]:
    client = aioredis.Redis.from_url(url)
    try:
        return [key async for key in client.scan_iter(match=f"{prefix}{kind}:*")]
    finally:
        await client.aclose()


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry.get("event") == name]


# ---------------------------------------------------------------- Redis down at start


@pytest.mark.parametrize("required", [True, False])
async def test_a_gateway_starts_without_redis_and_readiness_follows_the_policy_until_it_answers(
        replicas: StartReplicas, raw_client: Any, redis_prefix: str, required: bool) -> None:
    redis = RedisServer()  # its port is free: nothing answers there yet
    try:
        (running,) = await replicas(1, [stdio_backend("calc")], redis_url=redis.url, required=required)
        status, reasons = await ready_status(running)
        assert (status, bool(reasons)) == ((503, True) if required else (200, False))
        if required:
            assert reasons == ["store: redis unreachable (store.required is true)"]
        assert await metric(running, "mcpgw_store_up") == 0
        client: RawClient = raw_client(running.url, make_token("acme"))
        await client.initialize()  # served from local state
        assert any(t["name"] == "calc__add" for t in (await client.call("tools/list"))["result"]["tools"])

        await redis.start()

        async def connected() -> bool:
            return await metric(running, "mcpgw_store_up") == 1

        assert await wait_until(connected, RESYNC_WITHIN)
        assert await ready_status(running) == (200, [])

        async def written_back() -> bool:  # by the resync that follows the reconnection, not with it
            sessions = await keys_under(redis.url, redis_prefix, "session")
            return f"{redis_prefix}session:{client.session_id}".encode() in sessions and bool(
                await keys_under(redis.url, redis_prefix, "catalogue"))

        assert await wait_until(written_back, RESYNC_WITHIN)
    finally:
        await redis.stop()


# ---------------------------------------------------------------- Redis lost under load


class Load:
    """Clients calling calc__add with unique arguments on both replicas; every reply is checked."""

    def __init__(self, clients: list[tuple[RawClient, RawClient]]) -> None:
        self.clients = clients
        self.numbers = itertools.count(1)
        self.ok = 0
        self.failures: list[Any] = []
        self.stop = asyncio.Event()

    async def run(self) -> None:
        await asyncio.gather(*(self._worker(pair) for pair in self.clients))

    async def _worker(self, pair: tuple[RawClient, RawClient]) -> None:
        for turn in itertools.count():
            if self.stop.is_set():
                return
            client = pair[turn % 2]  # alternate replicas with one session
            await (self._list(client) if turn % 5 == 4 else self._call(client))

    async def _call(self, client: RawClient) -> None:
        a, b = next(self.numbers), next(self.numbers)
        request = client.request("tools/call", {"name": "calc__add", "arguments": {"a": a, "b": b}})
        status, body, _ = await client.post(request)
        result = body.get("result", {}) if isinstance(body, dict) else {}
        if status != 200 or body.get("id") != request["id"] or result.get("structuredContent") != {"result": a + b}:
            self.failures.append((status, body))
        else:
            self.ok += 1

    async def _list(self, client: RawClient) -> None:
        request = client.request("tools/list")
        status, body, _ = await client.post(request)
        tools = body.get("result", {}).get("tools", []) if isinstance(body, dict) else []
        if status != 200 or body.get("id") != request["id"] or "calc__add" not in {t["name"] for t in tools}:
            self.failures.append((status, body))
        else:
            self.ok += 1


async def open_pairs(raw_client: Any, a: RunningGateway, b: RunningGateway,
                     count: int) -> list[tuple[RawClient, RawClient]]:
    """`count` sessions, opened alternately on A and B, each with a client on both replicas."""
    pairs = []
    for i in range(count):
        leader_on, other_on = (a, b) if i % 2 == 0 else (b, a)
        leader: RawClient = raw_client(leader_on.url, make_token("acme", sub=f"user-{i}"))
        await leader.initialize()
        other: RawClient = raw_client(other_on.url, leader.token)
        other.session_id = leader.session_id
        pairs.append((leader, other))
    return pairs


async def phase(load: Load, seconds: float, check: Callable[[], Awaitable[None]] | None = None) -> int:
    """Let the load run for `seconds` (running `check` meanwhile); how many replies were right."""
    before = load.ok
    if check is not None:
        await check()
    await asyncio.sleep(max(0.0, seconds))
    return load.ok - before


async def test_redis_stopped_under_load_and_started_again_loses_or_mixes_up_nothing(
        replicas: StartReplicas, raw_client: Any, private_redis: Any, redis_prefix: str) -> None:
    redis: RedisServer = await private_redis()
    a, b = await replicas(2, [stdio_backend("calc")], redis_url=redis.url, required=True, tenants=TENANTS,
                          catalogue={"refresh_seconds": 0.5})
    load = Load(await open_pairs(raw_client, a, b, 6))
    with structlog.testing.capture_logs() as logs:
        running = asyncio.create_task(load.run())
        try:
            assert await phase(load, 1.0) > 0
            await redis.stop()
            outage_started = time.monotonic()
            assert await phase(load, 1.0) > 0

            async def not_ready_on_both() -> bool:
                return [(await ready_status(r))[0] for r in (a, b)] == [503, 503]

            assert await wait_until(not_ready_on_both, 3.0)  # store.required: true, and it stays down
            newcomer: RawClient = raw_client(a.url, make_token("acme", sub="newcomer"))
            await newcomer.initialize()  # a new session while Redis is down: local to A for now
            # the rest of a 3 s outage, and never less than half a second of load while Redis is down
            assert await phase(load, max(0.5, 3.0 - (time.monotonic() - outage_started))) > 0

            await redis.start()  # empty: it saved nothing

            async def ready_on_both() -> bool:
                return [(await ready_status(r))[0] for r in (a, b)] == [200, 200]

            assert await wait_until(ready_on_both, RESYNC_WITHIN)
            assert await phase(load, 1.5) > 0
        finally:
            load.stop.set()
            await running
    assert load.failures == [], load.failures[:3]
    outage_lines = [e["event"] for e in logs if "unavailable" in e["event"] or e.get("log_level") == "error"]
    assert outage_lines == ["store_unavailable"] * 2  # one line per replica, not one per request or part
    assert len(events(logs, "store_recovered")) == 2
    # Resynced: the sessions and snapshots came back, so the newcomer's session works on B now.
    on_b: RawClient = raw_client(b.url, newcomer.token)
    on_b.session_id = newcomer.session_id
    assert (await on_b.call("ping"))["result"] == {}
    assert len(await keys_under(redis.url, redis_prefix, "session")) >= 7
    assert await keys_under(redis.url, redis_prefix, "catalogue")
