"""Resource subscriptions through a virtual server, with the official SDK client against a real backend
(watched_backend.py, which tells its subscribers of changes): the server takes `memo://a` only, says
it offers subscriptions because its backend does, passes the updates of what it takes, and answers a
subscribe to a URI it leaves out as one nobody serves."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from conftest import RunningGateway, StartGateway, make_config, make_token, sdk_client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.timeout(90)

BACKEND = [sys.executable, str(Path(__file__).with_name("watched_backend.py"))]


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    memo = {"tenants": ["acme"], "resources": [{"backend": "w", "uri": "memo://a"}]}
    return await gateway(make_config([{"name": "w", "transport": "stdio", "command": BACKEND}],
                                     tenants={"acme": {"backends": ["*"]}}, servers={"memo": memo}))


async def test_a_server_passes_updates_of_its_resources_and_refuses_the_rest(running: RunningGateway) -> None:
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    url = running.base + "servers/memo/mcp"
    async with sdk_client(url, make_token("acme"), message_handler=on_message) as client, \
            sdk_client(running.url, make_token("acme")) as gateway_client:
        assert client.server_capabilities.resources is not None
        assert client.server_capabilities.resources.subscribe is True
        await client.subscribe_resource("w+memo://a")
        with pytest.raises(MCPError) as outside:
            await client.subscribe_resource("w+memo://b")
        with pytest.raises(MCPError) as nobody:
            await gateway_client.subscribe_resource("x+memo://b")
        assert (outside.value.error.code, outside.value.error.message) == (
            nobody.value.error.code, nobody.value.error.message)
        await gateway_client.call_tool("w__touch", {"uri": "memo://a", "text": "a1"})
        for _ in range(100):
            if heard:
                break
            await asyncio.sleep(0.1)
        assert heard == ["w+memo://a"]
        assert (await client.read_resource("w+memo://a")).contents[0].text == "a1"  # type: ignore[union-attr]


async def test_a_2026_listen_on_a_server_holds_only_its_uris_and_kinds(running: RunningGateway) -> None:
    from test_listen_2026 import modern_client

    url = running.base + "servers/memo/mcp"
    async with modern_client(url, make_token("acme")) as client, \
            sdk_client(running.url, make_token("acme")) as gateway_client:
        assert client.server_capabilities.prompts is None  # the server names no prompt
        wanted = ["w+memo://a", "w+memo://b", "nobody+memo://b"]
        async with client.listen(prompts_list_changed=True, resources_list_changed=True,
                                 resource_subscriptions=wanted) as subscription:
            assert subscription.honored.resource_subscriptions == ["w+memo://a"]
            assert subscription.honored.resources_list_changed is True
            assert not subscription.honored.prompts_list_changed
            await gateway_client.call_tool("w__touch", {"uri": "memo://a", "text": "a2"})
            update = await asyncio.wait_for(anext(subscription), 10)
            assert str(update.uri) == "w+memo://a"  # type: ignore[attr-defined]
