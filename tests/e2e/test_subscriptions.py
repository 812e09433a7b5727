"""Resource subscriptions through the gateway, against a real SDK backend over stdio and over HTTP.

The backend (`watched_backend.py`) tells its subscribed sessions when a resource changes and keeps a
journal of the subscribe/unsubscribe requests it got, so reference counting is checked at the source.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import mcp_types as types
import pytest
from backend_fixtures import HOST, free_port, stop_process
from conftest import RawClient, StartGateway, make_config, make_token, sdk_client
from shared_state.helpers import GetStream

from gateway import keys
from gateway.config import HttpBackend

pytestmark = pytest.mark.timeout(90)

BACKEND = [sys.executable, str(Path(__file__).with_name("watched_backend.py"))]
TENANTS = {"acme": {"backends": ["*"]}, "other": {"backends": ["*"]},
           "narrow": {"backends": ["*"], "resources": {"deny": ["w+memo://b"]}}}
QUIET = 0.5
WAIT = 10.0


@contextlib.asynccontextmanager
async def serving_http(argv: list[str], port: int | None = None) -> AsyncIterator[str]:
    """A backend process run as `argv --port N`, once it accepts connections; yields its /mcp URL."""
    port = port or free_port()
    process = await asyncio.create_subprocess_exec(
        *argv, "--port", str(port),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection(HOST, port)
                writer.close()
                break
            assert time.monotonic() < deadline and process.returncode is None, "the backend did not start"
            await asyncio.sleep(0.1)
        yield f"http://{HOST}:{port}/mcp"
    finally:
        await stop_process(process)


def http_watched(port: int | None = None) -> contextlib.AbstractAsyncContextManager[str]:
    """The watched backend over Streamable HTTP, as a real process; yields its URL."""
    return serving_http([*BACKEND, "--transport", "http"], port)


@pytest.fixture(params=["stdio", "http"])
async def running(request: Any, gateway: StartGateway) -> AsyncIterator[Any]:
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "stdio":
            backend = {"name": "w", "transport": "stdio", "command": BACKEND}
        else:
            backend = {"name": "w", "transport": "http", "url": await stack.enter_async_context(http_watched())}
        yield await gateway(make_config([backend], tenants=TENANTS))


SessionOf = Callable[[str], Awaitable[tuple[RawClient, GetStream]]]


@contextlib.asynccontextmanager
async def sessions_at(url: str, raw_client: Any) -> AsyncIterator[SessionOf]:
    """`await session_of(tenant)`: an initialized raw session with its GET stream open (closed at the end)."""
    streams: list[GetStream] = []
    async with aiohttp.ClientSession() as http:
        async def open_session(tenant: str) -> tuple[RawClient, GetStream]:
            client: RawClient = raw_client(url, make_token(tenant))
            await client.initialize()
            stream = await GetStream(http, url, client.token or "", client.session_id or "").open()
            streams.append(stream)
            return client, stream

        yield open_session
        for stream in streams:
            await stream.close()


@pytest.fixture
async def session_of(running: Any, raw_client: Any) -> AsyncIterator[SessionOf]:
    async with sessions_at(running.url, raw_client) as open_session:
        yield open_session


async def _tool(client: RawClient, name: str, **arguments: str) -> str:
    body = await client.call("tools/call", {"name": f"w__{name}", "arguments": arguments})
    assert not body["result"].get("isError"), body
    return str(body["result"]["content"][0]["text"])


async def _journal(client: RawClient) -> list[list[str]]:
    return list(json.loads(await _tool(client, "journal"))["journal"])


async def _updates(stream: GetStream, seconds: float, first: bool = False) -> list[str]:
    """The URIs of the resources/updated notifications that arrive within `seconds` (or the `first` one)."""
    uris, deadline = [], time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0 and not (first and uris):
        try:
            event = await stream.next(left)
        except TimeoutError:
            break
        message = json.loads(event.data)
        if message["method"] == "notifications/resources/updated":
            uris.append(message["params"]["uri"])
    return uris


async def _until(check: Callable[[], Awaitable[bool]], within: float = WAIT) -> None:
    deadline = time.monotonic() + within
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def test_initialize_declares_subscribe(session_of: Any) -> None:
    client, _ = await session_of("acme")
    body = await client.initialize()
    assert body["result"]["capabilities"]["resources"]["subscribe"] is True


async def test_the_sdk_client_gets_the_update_under_the_gateway_uri_and_nobody_else_does(
        running: Any, session_of: Any) -> None:
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    _, bystander_stream = await session_of("other")  # the other tenant, subscribed to nothing
    _, same_tenant_stream = await session_of("acme")  # another session of acme, not subscribed
    async with sdk_client(running.url, make_token("acme"), message_handler=on_message) as client:
        await client.subscribe_resource("w+memo://a")
        await client.call_tool("w__touch", {"uri": "memo://a", "text": "a1"})
        await _until(lambda: asyncio.sleep(0, heard == ["w+memo://a"]))
        read = await client.read_resource("w+memo://a")
        assert read.contents[0].text == "a1"  # type: ignore[union-attr]
        await client.call_tool("w__touch", {"uri": "memo://b", "text": "b1"})  # not subscribed to b
        assert await _updates(bystander_stream, QUIET) == []
        assert await _updates(same_tenant_stream, 0.1) == []
    assert heard == ["w+memo://a"]


async def test_one_upstream_subscription_serves_every_session_until_the_last_leaves(session_of: Any) -> None:
    first, first_stream = await session_of("acme")
    second, second_stream = await session_of("acme")
    for client in (first, second):
        assert (await client.call("resources/subscribe", {"uri": "w+memo://a"}))["result"] == {}
    assert await _journal(first) == [["subscribe", "memo://a"]]
    await first.call("resources/unsubscribe", {"uri": "w+memo://a"})
    assert await _journal(first) == [["subscribe", "memo://a"]]  # the second still holds it
    await _tool(first, "touch", uri="memo://a", text="a2")
    assert await _updates(second_stream, WAIT, first=True) == ["w+memo://a"]
    assert await _updates(first_stream, QUIET) == []
    await second.call("resources/unsubscribe", {"uri": "w+memo://a"})
    assert await _journal(first) == [["subscribe", "memo://a"], ["unsubscribe", "memo://a"]]


async def test_an_ended_session_releases_its_subscriptions(session_of: Any) -> None:
    watcher, _ = await session_of("acme")
    observer, _ = await session_of("acme")
    await watcher.call("resources/subscribe", {"uri": "w+memo://b"})
    async with watcher.session.delete(watcher.url, headers=watcher.headers()) as response:
        assert response.status == 204

    async def released() -> bool:
        return await _journal(observer) == [["subscribe", "memo://b"], ["unsubscribe", "memo://b"]]

    await _until(released)


async def test_tenants_hold_their_own_subscriptions(running: Any, session_of: Any) -> None:
    acme, acme_stream = await session_of("acme")
    other, other_stream = await session_of("other")
    await acme.call("resources/subscribe", {"uri": "w+memo://a"})
    await other.call("resources/subscribe", {"uri": "w+memo://a"})
    # An HTTP backend has a session per tenant, each subscribed once; a stdio child is one session for all.
    per_tenant = isinstance(running.app[keys.CONFIG].backends[0], HttpBackend)
    assert await _journal(acme) == [["subscribe", "memo://a"]] * (2 if per_tenant else 1)
    await _tool(acme, "touch", uri="memo://a", text="a3")
    assert await _updates(acme_stream, WAIT, first=True) == ["w+memo://a"]
    assert await _updates(other_stream, WAIT, first=True) == ["w+memo://a"]
    await acme.call("resources/unsubscribe", {"uri": "w+memo://a"})
    await _tool(acme, "touch", uri="memo://a", text="a4")
    assert await _updates(other_stream, WAIT, first=True) == ["w+memo://a"]
    assert await _updates(acme_stream, QUIET) == []


async def test_an_invisible_uri_is_refused_like_an_unknown_one(session_of: Any) -> None:
    narrow, _ = await session_of("narrow")
    hidden = (await narrow.call("resources/subscribe", {"uri": "w+memo://b"}))["error"]
    unknown = (await narrow.call("resources/subscribe", {"uri": "nobody+memo://b"}))["error"]
    assert hidden == {**unknown, "data": {"uri": "w+memo://b"}}
    assert hidden["code"] == -32002
    assert (await narrow.call("resources/subscribe", {"uri": 7}))["error"]["code"] == -32602
    assert await _journal(narrow) == []


async def test_a_restarted_child_is_subscribed_again(running: Any, session_of: Any) -> None:
    upstream = running.app[keys.POOL].get("w")
    if upstream.pid is None:
        pytest.skip("an HTTP backend: the stdio child's restart is the case here")
    client, stream = await session_of("acme")
    await client.call("resources/subscribe", {"uri": "w+memo://a"})
    first = upstream.pid
    os.kill(first, signal.SIGKILL)

    async def restarted() -> bool:
        return upstream.pid not in (None, first)

    await _until(restarted)
    await _until(lambda: _renewed(client))  # the new child was told what the old one held
    await _tool(client, "touch", uri="memo://a", text="after the restart")
    assert await _updates(stream, WAIT, first=True) == ["w+memo://a"]


async def _renewed(client: RawClient) -> bool:
    return await _journal(client) == [["subscribe", "memo://a"]]


async def test_an_http_backend_that_forgot_its_session_is_subscribed_again(
        gateway: StartGateway, raw_client: Any) -> None:
    port = free_port()
    async with http_watched(port) as url:
        running = await gateway(make_config([{"name": "w", "transport": "http", "url": url}], tenants=TENANTS))
        client: RawClient = raw_client(running.url, make_token("acme"))
        await client.initialize()
        await client.call("resources/subscribe", {"uri": "w+memo://a"})
    async with http_watched(port), aiohttp.ClientSession() as http:  # the same backend, restarted: no sessions
        stream = await GetStream(http, running.url, client.token or "", client.session_id or "").open()
        try:
            await _until(lambda: _renewed(client))  # the first call meets a 404: a new session, subscribed again
            await _tool(client, "touch", uri="memo://a", text="after the restart")
            assert await _updates(stream, WAIT, first=True) == ["w+memo://a"]
        finally:
            await stream.close()
