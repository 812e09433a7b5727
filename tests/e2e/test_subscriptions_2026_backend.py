"""Resource subscriptions on a 2026-07-28 backend (official SDK, `watched_2026_backend.py`) through the gateway.

The backend has no `resources/subscribe`: the gateway names the subscribed URIs in the
`resourceSubscriptions` of its listen stream to it, and relays the backend's
`notifications/resources/updated` to the subscribed clients, handshake-era and 2026 alike, with
their gateway URIs; the backend's journal shows the URIs each open listen stream names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from conftest import RawClient, StartGateway, make_config, make_token, sdk_client
from mcp.client.subscriptions import ResourceUpdated
from test_listen_2026 import modern_client
from test_subscriptions import QUIET, TENANTS, WAIT, SessionOf, _updates, serving_http, sessions_at

pytestmark = pytest.mark.timeout(90)

SCRIPT = str(Path(__file__).with_name("watched_2026_backend.py"))


def backend_2026() -> contextlib.AbstractAsyncContextManager[str]:
    return serving_http([sys.executable, SCRIPT])


@pytest.fixture
async def running(gateway: StartGateway) -> AsyncIterator[Any]:
    async with backend_2026() as url:
        yield await gateway(make_config([{"name": "w", "transport": "http", "url": url, "protocol": "2026"}],
                                        tenants=TENANTS))


@pytest.fixture
async def session_of(running: Any, raw_client: Any) -> AsyncIterator[SessionOf]:
    """`await session_of(tenant)`: an initialized raw handshake-era session with its GET stream open."""
    async with sessions_at(running.url, raw_client) as open_session:
        yield open_session


async def _touch(client: RawClient, uri: str, text: str) -> None:
    body = await client.call("tools/call", {"name": "w__touch", "arguments": {"uri": uri, "text": text}})
    assert not body["result"].get("isError"), body


async def _upstream(client: RawClient) -> list[list[str]]:
    """The resourceSubscriptions of the gateway's open listen streams to the backend."""
    body = await client.call("tools/call", {"name": "w__journal", "arguments": {}})
    return list(json.loads(body["result"]["content"][0]["text"])["open"])


async def _until_upstream(client: RawClient, wanted: list[list[str]]) -> None:
    deadline = time.monotonic() + WAIT
    while (seen := await _upstream(client)) != wanted:
        assert time.monotonic() < deadline, seen
        await asyncio.sleep(0.1)


async def test_a_handshake_client_hears_the_update_and_other_tenants_do_not(running: Any, session_of: Any) -> None:
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    observer, _ = await session_of("acme")
    other, other_stream = await session_of("other")
    assert (await other.call("resources/subscribe", {"uri": "w+memo://b"}))["result"] == {}
    async with sdk_client(running.url, make_token("acme"), message_handler=on_message) as client:
        await client.subscribe_resource("w+memo://a")
        assert await _upstream(observer) == [["memo://a", "memo://b"]]  # one stream, every URI held
        await _touch(observer, "memo://a", "a1")
        deadline = time.monotonic() + WAIT
        while heard != ["w+memo://a"]:
            assert time.monotonic() < deadline, heard
            await asyncio.sleep(0.05)
        read = await client.read_resource("w+memo://a")
        assert read.contents[0].text == "a1"  # type: ignore[union-attr]
        assert await _updates(other_stream, QUIET) == []  # the other tenant holds b, not a
        await _touch(observer, "memo://b", "b1")
        assert await _updates(other_stream, WAIT, first=True) == ["w+memo://b"]
    assert heard == ["w+memo://a"]  # acme holds a, not b


async def test_the_last_unsubscribe_drops_the_uri_upstream(session_of: Any) -> None:
    first, first_stream = await session_of("acme")
    second, second_stream = await session_of("other")
    for client in (first, second):
        assert (await client.call("resources/subscribe", {"uri": "w+memo://a"}))["result"] == {}
    assert await _upstream(first) == [["memo://a"]]
    await first.call("resources/unsubscribe", {"uri": "w+memo://a"})
    await _touch(first, "memo://a", "a2")
    assert await _updates(second_stream, WAIT, first=True) == ["w+memo://a"]  # the other tenant still holds it
    assert await _updates(first_stream, QUIET) == []
    assert await _upstream(first) == [["memo://a"]]
    await second.call("resources/unsubscribe", {"uri": "w+memo://a"})
    await _until_upstream(first, [])
    await _touch(first, "memo://a", "a3")
    assert await _updates(second_stream, QUIET) == []


async def test_a_2026_client_listens_for_the_update(running: Any, session_of: Any) -> None:
    observer, _ = await session_of("acme")
    async with modern_client(running.url, make_token("acme")) as client, \
            client.listen(resource_subscriptions=["w+memo://a"]) as subscription:
        assert subscription.honored.resource_subscriptions == ["w+memo://a"]
        assert await _upstream(observer) == [["memo://a"]]
        await _touch(observer, "memo://a", "a4")
        assert await asyncio.wait_for(anext(subscription), WAIT) == ResourceUpdated(uri="w+memo://a")
    await _until_upstream(observer, [])  # closing the client's stream released the URI upstream


async def test_a_tenant_that_may_not_see_the_uri_neither_subscribes_nor_hears(session_of: Any) -> None:
    acme, _ = await session_of("acme")
    narrow, narrow_stream = await session_of("narrow")
    assert (await narrow.call("resources/subscribe", {"uri": "w+memo://b"}))["error"]["code"] == -32002
    assert (await acme.call("resources/subscribe", {"uri": "w+memo://b"}))["result"] == {}
    await _touch(acme, "memo://b", "b2")
    assert await _updates(narrow_stream, QUIET) == []
