"""The catalogue in Redis: one replica asks a backend, every replica serves and announces the change."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import redis.asyncio as aioredis
from backend_fixtures import StartBackend
from conftest import RawClient, http_backend_config, make_token

from gateway import keys
from shared_state.conftest import StartReplicas, needs_shared_redis
from shared_state.helpers import CountingBackend, GetStream

pytestmark = [pytest.mark.timeout(60), needs_shared_redis]

NOTIFY_WITHIN = 2.0
TENANTS = {"acme": {"backends": ["*"]}, "narrow": {"backends": ["*"], "tools": {"allow": ["cat__tool_000"]}}}


async def tool_names(client: RawClient) -> set[str]:
    return {t["name"] for t in (await client.call("tools/list"))["result"]["tools"]}


async def counting_backend(aiohttp_server: Any, tools: int = 3) -> tuple[CountingBackend, str]:
    backend = CountingBackend(tools)
    server = await aiohttp_server(backend.app)
    return backend, str(server.make_url("/mcp"))


async def test_a_changed_tool_list_notifies_clients_on_every_replica_whose_view_changed(
        replicas: StartReplicas, http_backend: StartBackend, raw_client: Any, tmp_path: Path) -> None:
    count_file = tmp_path / "tools"
    count_file.write_text("3")
    catalog = await http_backend("catalog", env={"CATALOG_TOOLS_FILE": str(count_file)})
    a, b = await replicas(2, [http_backend_config("cat", catalog.url)], tenants=TENANTS,
                          catalogue={"refresh_seconds": 0.5})
    async with aiohttp.ClientSession() as http:
        clients, streams = {}, {}
        for tenant in TENANTS:
            for name, running in (("a", a), ("b", b)):
                client: RawClient = raw_client(running.url, make_token(tenant))
                await client.initialize()
                clients[tenant, name] = client
                streams[tenant, name] = await GetStream(http, running.url, client.token or "",
                                                        client.session_id or "").open()
        try:
            assert len(await tool_names(clients["acme", "b"])) == 3
            count_file.write_text("5")
            heard = await asyncio.gather(*(s.methods_within(NOTIFY_WITHIN + 0.5) for s in streams.values()))
            by_client = dict(zip(streams, heard, strict=True))
            for name in ("a", "b"):
                assert by_client["acme", name][:1] == ["notifications/tools/list_changed"], by_client
                assert by_client["narrow", name] == [], by_client  # its view did not change
                assert len(await tool_names(clients["acme", name])) == 5
                assert await tool_names(clients["narrow", name]) == {"cat__tool_000"}
        finally:
            for stream in streams.values():
                await stream.close()


async def test_the_notification_arrives_within_two_seconds_on_both_replicas(
        replicas: StartReplicas, http_backend: StartBackend, raw_client: Any, tmp_path: Path) -> None:
    count_file = tmp_path / "tools"
    count_file.write_text("2")
    catalog = await http_backend("catalog", env={"CATALOG_TOOLS_FILE": str(count_file)})
    a, b = await replicas(2, [http_backend_config("cat", catalog.url)], catalogue={"refresh_seconds": 0.5})
    async with aiohttp.ClientSession() as http:
        streams = []
        for running in (a, b):
            client: RawClient = raw_client(running.url, make_token("acme"))
            await client.initialize()
            streams.append(await GetStream(http, running.url, client.token or "", client.session_id or "").open())
        try:
            count_file.write_text("4")
            events = await asyncio.gather(*(s.next(NOTIFY_WITHIN) for s in streams))
            assert all(orjson.loads(e.data)["method"] == "notifications/tools/list_changed" for e in events)
        finally:
            for stream in streams:
                await stream.close()


async def test_three_replicas_ask_the_backend_about_once_per_refresh_interval_in_total(
        replicas: StartReplicas, aiohttp_server: Any) -> None:
    backend, url = await counting_backend(aiohttp_server)
    interval, window = 0.5, 3.0
    await replicas(3, [http_backend_config("count", url)], catalogue={"refresh_seconds": interval})
    before = backend.lists
    await asyncio.sleep(window)
    calls = backend.lists - before
    # Uncoordinated, three replicas would make 3 * window / interval = 18 calls.
    assert window / interval - 2 <= calls <= window / interval + 2, calls


async def test_replicas_starting_after_the_first_use_its_fresh_snapshot_without_asking_the_backend(
        replicas: StartReplicas, aiohttp_server: Any, raw_client: Any) -> None:
    backend, url = await counting_backend(aiohttp_server, tools=4)
    running = await replicas(3, [http_backend_config("count", url)], catalogue={"refresh_seconds": 60})
    assert backend.lists == 1
    for replica in running:
        client: RawClient = raw_client(replica.url, make_token("acme"))
        await client.initialize()
        assert len(await tool_names(client)) == 4


async def test_snapshots_are_stored_under_the_prefix_and_the_lock_is_released(
        replicas: StartReplicas, aiohttp_server: Any, shared_redis: aioredis.Redis, redis_prefix: str) -> None:
    _, url = await counting_backend(aiohttp_server, tools=2)
    await replicas(1, [http_backend_config("count", url)], catalogue={"refresh_seconds": 60})
    stored = orjson.loads(await shared_redis.get(f"{redis_prefix}catalogue:count"))
    assert [t["name"] for t in stored["tools"]] == ["t0", "t1"]
    assert stored["status"] == "ok" and stored["version"] and stored["checked_at"] <= stored["fetched_at"]
    assert await shared_redis.exists(f"{redis_prefix}catalogue-lock:count") == 0
    assert 0 < await shared_redis.pttl(f"{redis_prefix}catalogue:count") <= 600 * 1000


async def test_an_admin_refresh_on_one_replica_reaches_the_other_without_a_second_backend_call(
        replicas: StartReplicas, aiohttp_server: Any) -> None:
    backend, url = await counting_backend(aiohttp_server, tools=2)
    a, b = await replicas(2, [http_backend_config("count", url)], catalogue={"refresh_seconds": 60})
    backend.tools = 3
    before = backend.lists
    await a.app[keys.CATALOGUE].refresh_all()

    async def b_sees_three() -> bool:
        return len(b.app[keys.CATALOGUE].current.entries) == 3

    for _ in range(40):
        if await b_sees_three():
            break
        await asyncio.sleep(0.05)
    assert await b_sees_three()
    assert backend.lists == before + 1
