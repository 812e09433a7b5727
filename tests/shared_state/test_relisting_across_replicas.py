"""Re-listing across replicas: a listener on any replica makes every replica re-list a backend that
cannot announce (the official SDK's 2026 server without listen) after a call it served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from conftest import RawClient, RunningGateway, http_backend_config, make_token
from e2e.test_upstream_eras import EraBackend, client
from mcp.client.subscriptions import ToolsListChanged

from gateway import keys
from shared_state.conftest import StartReplicas, needs_shared_redis
from shared_state.helpers import GetStream, wait_until

pytestmark = [pytest.mark.timeout(90), needs_shared_redis]

HEARD_WITHIN = 2.0
"""Seconds a list change may take to reach a client on the other replica."""
LONG_REFRESH = {"refresh_seconds": 600}
"""No periodic refresh within a test: only a re-list can tell the client."""
LIST_CHANGED = "notifications/tools/list_changed"


@pytest.fixture
async def quiet() -> AsyncIterator[str]:
    """The URL of an SDK 2026 backend that cannot announce; its `grow` tool adds a tool."""
    backend = EraBackend("2026", silent=True)
    try:
        await backend.start()
        yield backend.url
    finally:
        await backend.stop()


async def session(replica: RunningGateway, raw_client: Any) -> RawClient:
    client: RawClient = raw_client(replica.url, make_token("acme"))
    await client.initialize()
    return client


async def grow(client: RawClient, name: str) -> None:
    called = await client.call("tools/call", {"name": "quiet__grow", "arguments": {"name": name}})
    assert called["result"]["content"][0]["text"] == name, called


async def listening_elsewhere(replica: RunningGateway, tenants: set[str]) -> bool:
    return set(replica.app[keys.CATALOGUE].relisting.tenants()) == tenants


async def test_a_relist_on_one_replica_reaches_a_listener_on_the_other(
        replicas: StartReplicas, quiet: str, raw_client: Any) -> None:
    """The shared catalogue path: A re-lists for its own listener, B's listener hears it too."""
    a, b = await replicas(2, [http_backend_config("quiet", quiet)], catalogue=LONG_REFRESH)
    caller, listener_a, listener_b = [await session(r, raw_client) for r in (a, a, b)]
    async with aiohttp.ClientSession() as http:
        streams = [await GetStream(http, r.url, c.token or "", c.session_id or "").open()
                   for r, c in ((a, listener_a), (b, listener_b))]
        try:
            await grow(caller, "extra")
            heard = await asyncio.gather(*(s.methods_within(HEARD_WITHIN) for s in streams))
            assert heard == [[LIST_CHANGED], [LIST_CHANGED]]
        finally:
            for stream in streams:
                await stream.close()
    listed = (await listener_b.call("tools/list"))["result"]["tools"]
    assert "quiet__extra" in {tool["name"] for tool in listed}


async def test_a_listener_on_one_replica_makes_the_other_relist_after_its_calls(
        replicas: StartReplicas, quiet: str, raw_client: Any) -> None:
    a, b = await replicas(2, [http_backend_config("quiet", quiet)], catalogue=LONG_REFRESH)
    caller, listener = await session(a, raw_client), await session(b, raw_client)
    async with aiohttp.ClientSession() as http:
        stream = await GetStream(http, b.url, listener.token or "", listener.session_id or "").open()
        try:
            assert await wait_until(lambda: listening_elsewhere(a, {"acme"}), HEARD_WITHIN)
            await grow(caller, "extra")
            assert await stream.methods_within(HEARD_WITHIN) == [LIST_CHANGED]
        finally:
            await stream.close()
    listed = (await listener.call("tools/list"))["result"]["tools"]
    assert "quiet__extra" in {tool["name"] for tool in listed}


async def test_a_2026_listen_stream_on_one_replica_hears_a_call_served_by_the_other(
        replicas: StartReplicas, quiet: str, raw_client: Any) -> None:
    a, b = await replicas(2, [http_backend_config("quiet", quiet)], catalogue=LONG_REFRESH)
    caller = await session(a, raw_client)
    async with client(b.url, "auto") as sdk, sdk.listen(tools_list_changed=True) as subscription:
        assert await wait_until(lambda: listening_elsewhere(a, {"acme"}), HEARD_WITHIN)
        await grow(caller, "extra")
        assert await asyncio.wait_for(anext(subscription), HEARD_WITHIN) == ToolsListChanged()
        assert "quiet__extra" in {tool.name for tool in (await sdk.list_tools()).tools}


async def test_a_replica_whose_listeners_left_stops_counting(
        replicas: StartReplicas, quiet: str, raw_client: Any) -> None:
    a, b = await replicas(2, [http_backend_config("quiet", quiet)], catalogue=LONG_REFRESH)
    listener = await session(b, raw_client)
    async with aiohttp.ClientSession() as http:
        stream = await GetStream(http, b.url, listener.token or "", listener.session_id or "").open()
        try:
            assert await wait_until(lambda: listening_elsewhere(a, {"acme"}), HEARD_WITHIN)
        finally:
            await stream.close()
    assert await wait_until(lambda: listening_elsewhere(a, set()), HEARD_WITHIN)
