"""subscriptions/listen for 2026-07-28 clients: the official SDK client (mode="auto") and raw frames."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import orjson
import pytest
import yaml
from announcing_backend import AnnouncingBackend, serving
from backend_fixtures import REPO_ROOT
from conftest import JWT_SECRET, StartGateway, make_config, make_token
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated, Subscription, ToolsListChanged
from stateless_client import StatelessClient
from test_subscriptions import BACKEND, TENANTS, http_watched

from gateway import keys
from gateway.protocol.sse import SseDecoder

pytestmark = pytest.mark.timeout(90)

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
WAIT = 10.0


@contextlib.asynccontextmanager
async def modern_client(url: str, token: str) -> AsyncIterator[Client]:
    """The SDK client as a 2026 client finds the gateway: it probes server/discover (mode="auto")."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(30, read=60)) as http, \
            Client(streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=30) as client:
        assert client.session.protocol_version == "2026-07-28"
        yield client


@pytest.fixture(params=["stdio", "http"])
async def running(request: Any, gateway: StartGateway) -> AsyncIterator[Any]:
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "stdio":
            backend = {"name": "w", "transport": "stdio", "command": BACKEND}
        else:
            # pinned: the SDK serves this low-level server at 2026 too, where it does not listen for resources;
            # in a session it takes resources/subscribe, which the gateway bridges to 2026 listen streams
            backend = {"name": "w", "transport": "http", "url": await stack.enter_async_context(http_watched()),
                       "protocol": "handshake"}
        yield await gateway(make_config([backend], tenants=TENANTS))


async def _next(subscription: Subscription) -> Any:
    return await asyncio.wait_for(anext(subscription), WAIT)


async def _journal(client: Client) -> list[list[str]]:
    result = await client.call_tool("w__journal", {})
    return list(json.loads(result.content[0].text)["journal"])  # type: ignore[union-attr]


async def test_discover_promises_change_notifications_and_subscriptions(running: Any) -> None:
    async with modern_client(running.url, make_token("acme")) as client:
        capabilities = client.server_capabilities  # what its discover probe found
        assert capabilities.tools is not None and capabilities.tools.list_changed is True
        assert capabilities.resources is not None and capabilities.resources.subscribe is True


async def test_the_sdk_client_listens_for_updates_and_list_changes(running: Any) -> None:
    async with modern_client(running.url, make_token("acme")) as client:
        async with client.listen(tools_list_changed=True, resource_subscriptions=["w+memo://a"]) as subscription:
            assert subscription.honored.tools_list_changed is True
            assert subscription.honored.resource_subscriptions == ["w+memo://a"]
            assert await _journal(client) == [["subscribe", "memo://a"]]
            await client.call_tool("w__touch", {"uri": "memo://a", "text": "new"})
            assert await _next(subscription) == ResourceUpdated(uri="w+memo://a")
            await client.call_tool("w__add_tool", {"name": "extra"})  # told on the calling session's stream
            assert await _next(subscription) == ToolsListChanged()
        deadline = time.monotonic() + WAIT  # closing the stream released the subscription upstream
        while await _journal(client) != [["subscribe", "memo://a"], ["unsubscribe", "memo://a"]]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)



async def test_a_2026_client_of_mcp_gateway_stdio_listens_too(tmp_path: Path) -> None:
    """Over the gateway's own stdio (a local client): the listen request's frames on stdout, and
    cancelling it (stdio's way to end one) releases its subscription upstream."""
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({"auth": {"jwt": {"secret": JWT_SECRET}}, "tenants": TENANTS,
                                      "backends": [{"name": "w", "transport": "stdio", "command": BACKEND}],
                                      "logging": {"level": "warning"}}))
    params = StdioServerParameters(command=sys.executable, args=["-m", "gateway", "stdio", "--config", str(config)],
                                   env={"MCP_GATEWAY_TOKEN": make_token("acme"), "PATH": os.environ["PATH"]},
                                   cwd=REPO_ROOT)
    async with Client(params, mode="auto", read_timeout_seconds=30) as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(tools_list_changed=True, resource_subscriptions=["w+memo://a"]) as subscription:
            assert subscription.honored.resource_subscriptions == ["w+memo://a"]
            await client.call_tool("w__touch", {"uri": "memo://a", "text": "new"})
            assert await _next(subscription) == ResourceUpdated(uri="w+memo://a")
            await client.call_tool("w__add_tool", {"name": "extra"})
            assert await _next(subscription) == ToolsListChanged()
        deadline = time.monotonic() + WAIT
        while await _journal(client) != [["subscribe", "memo://a"], ["unsubscribe", "memo://a"]]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)

async def test_unknown_and_invisible_uris_are_left_out_alike(running: Any) -> None:
    async with modern_client(running.url, make_token("narrow")) as client:
        wanted = ["w+memo://a", "w+memo://b", "nobody+memo://b"]
        async with client.listen(resource_subscriptions=wanted) as subscription:
            assert subscription.honored.resource_subscriptions == ["w+memo://a"]
            assert not subscription.honored.tools_list_changed


async def test_the_gateway_ends_a_listen_stream_gracefully(running: Any) -> None:
    async with modern_client(running.url, make_token("acme")) as client, \
            client.listen(resources_list_changed=True) as subscription:
        running.app[keys.EXCHANGE].dispatcher.listeners.close_all()
        events = [event async for event in subscription]  # ends without SubscriptionLost
        assert events == []


async def test_raw_frames_ack_keepalive_and_result(running: Any) -> None:
    running.app[keys.EXCHANGE].dispatcher.listeners.keepalive = 0.2
    async with aiohttp.ClientSession() as http:
        raw = StatelessClient(http, running.url, make_token("acme"))
        message = raw.request("subscriptions/listen", {"notifications": {"toolsListChanged": True,
                                                                          "promptsListChanged": True}})
        async with http.post(running.url, data=orjson.dumps(message), headers=raw.headers(message)) as response:
            assert response.status == 200 and response.content_type == "text/event-stream"
            chunks = b""
            while b": keepalive" not in chunks:
                chunks += await asyncio.wait_for(response.content.readany(), WAIT)
            running.app[keys.EXCHANGE].dispatcher.listeners.close_all()
            chunks += await asyncio.wait_for(response.content.read(), WAIT)
    frames = [orjson.loads(event.data) for event in SseDecoder().feed(chunks) if event.data]
    ack, result = frames[0], frames[-1]
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {"notifications": {"toolsListChanged": True},  # the tenant has no prompts
                             "_meta": {SUBSCRIPTION_ID: message["id"]}}
    assert result["id"] == message["id"] and result["result"]["resultType"] == "complete"
    assert result["result"]["_meta"][SUBSCRIPTION_ID] == message["id"]
    assert len(frames) == 2


async def test_a_handshake_session_has_no_listen_and_2026_has_no_subscribe(running: Any, raw_client: Any) -> None:
    legacy = raw_client(running.url, make_token("acme"))
    await legacy.initialize()
    assert (await legacy.call("subscriptions/listen", {"notifications": {}}))["error"]["code"] == -32601
    async with aiohttp.ClientSession() as http:
        raw = StatelessClient(http, running.url, make_token("acme"))
        status, body, _ = await raw.post(raw.request("resources/subscribe", {"uri": "w+memo://a"}))
        assert status == 404 and body["error"]["code"] == -32601



async def test_a_listen_without_a_filter_object_is_invalid_params(running: Any) -> None:
    async with aiohttp.ClientSession() as http:
        raw = StatelessClient(http, running.url, make_token("acme"))
        for params in ({}, {"notifications": []}, {"notifications": {"resourceSubscriptions": "w+memo://a"}}):
            status, body, _ = await raw.post(raw.request("subscriptions/listen", params))
            assert status == 400 and body["error"]["code"] == -32602, body


async def test_a_listen_stream_hears_nothing_of_another_tenants_uri(running: Any) -> None:
    async with modern_client(running.url, make_token("acme")) as acme, \
            modern_client(running.url, make_token("other")) as other, \
            acme.listen(resource_subscriptions=["w+memo://a"]) as acme_sub, \
            other.listen(resource_subscriptions=["w+memo://b"]) as other_sub:
        await acme.call_tool("w__touch", {"uri": "memo://a", "text": "only acme"})
        assert await _next(acme_sub) == ResourceUpdated(uri="w+memo://a")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(anext(other_sub), 0.5)


# --- list changes of 2026 backends: heard on their listen stream, or re-listed after calls ---------

SEEN = {"acme": {"backends": ["a"], "backend_headers": {"a": {"X-Key": "acme-secret"}}},
        "other": {"backends": []}}
"""acme sees backend `a` (with credentials of its own there); other sees nothing of it."""
QUIET = 0.5


@contextlib.asynccontextmanager
async def announcing_world(gateway: StartGateway, backend: AnnouncingBackend) -> AsyncIterator[str]:
    async with serving(backend) as url:
        config = make_config([{"name": "a", "transport": "http", "url": url, "headers": {"X-Key": "catalogue"}}],
                             tenants=SEEN)
        yield (await gateway(config)).url


async def _eventually(check: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def _tools(client: Client) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


async def test_an_announcing_2026_backend_is_heard_with_no_call_through_the_gateway(gateway: StartGateway) -> None:
    backend = AnnouncingBackend()
    async with announcing_world(gateway, backend) as url, modern_client(url, make_token("acme")) as client, \
            client.listen(tools_list_changed=True) as subscription:
        await _eventually(lambda: backend.listening == 1)
        backend.change_tools("extra")
        assert await asyncio.wait_for(anext(subscription), 1.5) == ToolsListChanged()
        assert "a__extra" in await _tools(client)
        relisted = backend.requests["tools/list"]
        await client.call_tool("a__echo", {})  # it announces: a call brings no re-list
        await asyncio.sleep(QUIET)
        assert backend.requests["tools/list"] == relisted
    listen = backend.listen_headers[0]  # the catalogue's identity, never a tenant's or a client's
    assert listen["X-Key"] == "catalogue" and "Authorization" not in listen
    assert listen["Mcp-Method"] == "subscriptions/listen" and backend.requests["subscriptions/listen"] == 1


async def test_a_broken_listen_stream_is_opened_again_and_the_lists_fetched(gateway: StartGateway) -> None:
    backend = AnnouncingBackend()
    async with announcing_world(gateway, backend) as url, modern_client(url, make_token("acme")) as client, \
            client.listen(tools_list_changed=True) as subscription:
        await _eventually(lambda: backend.listening == 1)
        listed = backend.requests["tools/list"]
        backend.end_streams()
        await _eventually(lambda: backend.requests["subscriptions/listen"] == 2 and backend.listening == 1)
        await _eventually(lambda: backend.requests["tools/list"] > listed)  # no replay: what changed meanwhile?
        backend.change_tools("later")
        assert await asyncio.wait_for(anext(subscription), 1.5) == ToolsListChanged()


@pytest.mark.parametrize("mode", ["promises nothing", "refuses to listen"])
async def test_a_backend_that_cannot_announce_is_relisted_only_while_someone_listens(
        gateway: StartGateway, mode: str) -> None:
    backend = AnnouncingBackend(silent=mode == "promises nothing", refuse_listen=True)
    async with announcing_world(gateway, backend) as url, modern_client(url, make_token("acme")) as client:
        await client.call_tool("a__echo", {})
        listed = backend.requests["tools/list"]
        await client.call_tool("a__add_tool", {"name": "unheard"})
        await asyncio.sleep(QUIET)
        assert backend.requests["tools/list"] == listed  # nobody listens: no re-list
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("a__add_tool", {"name": "heard"})
            assert await asyncio.wait_for(anext(subscription), 1.5) == ToolsListChanged()
            assert {"a__unheard", "a__heard"} <= set(await _tools(client))
            relisted = backend.requests["tools/list"]
            await client.call_tool("a__echo", {})  # re-listed, but unchanged: nothing to tell
            await _eventually(lambda: backend.requests["tools/list"] > relisted)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(anext(subscription), QUIET)
    assert backend.requests["subscriptions/listen"] == (0 if mode == "promises nothing" else 1)


async def test_a_tenant_that_does_not_see_the_backend_hears_nothing_and_brings_no_relist(
        gateway: StartGateway) -> None:
    backend = AnnouncingBackend(silent=True)
    async with announcing_world(gateway, backend) as url, modern_client(url, make_token("acme")) as acme, \
            modern_client(url, make_token("other")) as other, \
            other.listen(tools_list_changed=True) as other_sub:
        await acme.call_tool("a__echo", {})
        listed = backend.requests["tools/list"]
        await acme.call_tool("a__add_tool", {"name": "first"})
        await asyncio.sleep(QUIET)
        assert backend.requests["tools/list"] == listed  # only a tenant that cannot see it listens
        async with acme.listen(tools_list_changed=True) as acme_sub:
            await acme.call_tool("a__add_tool", {"name": "second"})
            assert await asyncio.wait_for(anext(acme_sub), 1.5) == ToolsListChanged()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(anext(other_sub), QUIET)
        assert await _tools(other) == []
