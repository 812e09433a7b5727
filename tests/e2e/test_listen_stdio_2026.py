"""A 2026-07-28 stdio child is listened to: `subscriptions/listen` requests over its pipes.

The child (listened_stdio_backend.py, the official SDK's `MCPServer`) changes its tools on a
signal, with no call through the gateway before or after, and caches its lists for ten minutes;
the catalogue's refresh is ten minutes too. So a listening client hears of the change only if
the gateway keeps a listen request open to the child, and after the child is killed and started
again, only if it listens to the new one (whose tools have new names). Its resource subscriptions go the same way: a
(un)subscribe to it changes the URIs the gateway's listen request names (`listening()` counts
the listen requests open on the child).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from conftest import RawClient, RunningGateway, StartGateway, make_config, make_token
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated, Subscription, ToolsListChanged
from shared_state.helpers import GetStream
from test_listen_2026 import modern_client
from test_subscriptions import _updates

from gateway import keys

pytestmark = pytest.mark.timeout(90)

SCRIPT = str(Path(__file__).with_name("listened_stdio_backend.py"))
HEARD = 2.0
"""Seconds a change made in the child may take to reach a listening client."""
WAIT = 10.0
LONG = 600.0
"""The catalogue's refresh interval: far beyond any test, so a refresh can make none pass."""
SETTLE = 0.5
"""After a restart, time for the re-list of the new child's kinds to end: a change announced while
the catalogue fetches that kind shares the fetch under way (refresher.py) and may be missed."""


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    backend = {"name": "s", "transport": "stdio", "command": [sys.executable, SCRIPT], "protocol": "2026"}
    return await gateway(make_config([backend], catalogue={"refresh_seconds": LONG}))


@pytest.fixture
async def child(running: RunningGateway) -> Any:
    """The gateway's upstream of the child, once its list-change listen request is acknowledged."""
    upstream = running.app[keys.POOL].get("s")
    await _eventually(lambda: upstream.announces)
    return upstream


async def _eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def _tools(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools}


async def _grown(subscription: Subscription, client: Client, child: Any) -> None:
    """Signal the child to grow a tool: change events arrive, within HEARD, until it is listed."""
    tool = f"s__late_{child.pid}_1"
    assert tool not in await _tools(client)
    os.kill(child.pid, signal.SIGUSR1)
    deadline = time.monotonic() + HEARD
    while tool not in await _tools(client):
        assert await asyncio.wait_for(anext(subscription), deadline - time.monotonic()) == ToolsListChanged()


async def _restart(child: Any) -> None:
    """Kill the child; return once the new one's listen request is acknowledged."""
    old = child.pid
    os.kill(old, signal.SIGKILL)
    await _eventually(lambda: child.pid not in (None, old) and child.announces)


async def test_a_tool_change_is_heard_with_no_call_through_the_gateway_and_after_a_restart(
        running: RunningGateway, child: Any) -> None:
    async with modern_client(running.url, make_token("acme")) as client, \
            client.listen(tools_list_changed=True) as subscription:
        await _grown(subscription, client, child)
        await _restart(child)
        await asyncio.sleep(SETTLE)
        await _grown(subscription, client, child)


async def test_a_get_stream_hears_the_change_too(running: RunningGateway, child: Any, raw_client: Any) -> None:
    legacy: RawClient = raw_client(running.url, make_token("acme"))
    await legacy.initialize()
    async with aiohttp.ClientSession() as http:
        stream = await GetStream(http, running.url, legacy.token or "", legacy.session_id or "").open()
        try:
            os.kill(child.pid, signal.SIGUSR1)
            assert await stream.methods_within(HEARD) == ["notifications/tools/list_changed"]
        finally:
            await stream.close()
    listed = (await legacy.call("tools/list"))["result"]["tools"]
    assert f"s__late_{child.pid}_1" in {tool["name"] for tool in listed}


async def _listening(client: Client) -> int:
    """How many listen requests are open on the child."""
    result = await client.call_tool("s__listening", {})
    return int(result.content[0].text)  # type: ignore[union-attr]


async def _until_listening(client: Client, count: int) -> None:
    deadline = time.monotonic() + WAIT
    while (seen := await _listening(client)) != count:
        assert time.monotonic() < deadline, seen
        await asyncio.sleep(0.1)


async def test_a_2026_client_hears_the_update_of_the_uri_it_names(running: RunningGateway, child: Any) -> None:
    async with modern_client(running.url, make_token("acme")) as client:
        assert await _listening(client) == 1  # the list changes'
        async with client.listen(resource_subscriptions=["s+memo://a"]) as subscription:
            assert subscription.honored.resource_subscriptions == ["s+memo://a"]
            assert await _listening(client) == 2  # and one naming memo://a
            await client.call_tool("s__touch", {"uri": "memo://b", "text": "b1"})
            await client.call_tool("s__touch", {"uri": "memo://a", "text": "a1"})
            assert await asyncio.wait_for(anext(subscription), WAIT) == ResourceUpdated(uri="s+memo://a")
        await _until_listening(client, 1)  # the client let go: the child is no longer asked


async def test_a_handshake_client_subscribes_hears_and_unsubscribes_across_a_restart(
        running: RunningGateway, child: Any, raw_client: Any) -> None:
    legacy: RawClient = raw_client(running.url, make_token("acme"))
    await legacy.initialize()
    async with aiohttp.ClientSession() as http, modern_client(running.url, make_token("acme")) as client:
        stream = await GetStream(http, running.url, legacy.token or "", legacy.session_id or "").open()
        try:
            assert (await legacy.call("resources/subscribe", {"uri": "s+memo://a"}))["result"] == {}
            await client.call_tool("s__touch", {"uri": "memo://a", "text": "a1"})
            assert await _updates(stream, WAIT, first=True) == ["s+memo://a"]
            await _restart(child)
            await _until_listening(client, 2)  # the new child is asked for memo://a again
            await client.call_tool("s__touch", {"uri": "memo://a", "text": "a2"})
            assert await _updates(stream, WAIT, first=True) == ["s+memo://a"]
            assert (await legacy.call("resources/unsubscribe", {"uri": "s+memo://a"}))["result"] == {}
            await _until_listening(client, 1)
        finally:
            await stream.close()
