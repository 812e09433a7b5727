"""Search mode hears `notifications/tools/list_changed` whenever what a search finds could change, though
its listed tools (find_tools, call_tool) stay the same: a backend adds a tool or changes one. Only the
tenants whose view holds the changed tool hear it, and find_tools follows the change at once.
(A reload changing a caller's view: tests/lifecycle/test_reload_search.py.)"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import StartGateway, make_config, make_token, sdk_client
from mcp import Client

pytestmark = pytest.mark.timeout(90)

BACKEND = [sys.executable, str(Path(__file__).with_name("growing_backend.py"))]
TENANTS = {"acme": {"backends": ["*"], "discovery": "search"},
           "narrow": {"backends": ["*"], "tools": {"deny": ["grow__secret_*"]}, "discovery": "search"}}
HEARD_WITHIN = 15.0
QUIET = 1.0
"""How long a client that should hear nothing is watched after the other one heard."""


class Listener:
    """An SDK client in search mode, and the tools/list_changed notifications it heard."""

    def __init__(self) -> None:
        self.heard = 0
        self.client: Client | None = None
        self._arrived = anyio.Event()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.heard += 1
            self._arrived.set()

    async def notified(self) -> None:
        with anyio.fail_after(HEARD_WITHIN):
            await self._arrived.wait()
        self._arrived = anyio.Event()

    async def quiet(self) -> bool:
        await anyio.sleep(QUIET)
        return not self._arrived.is_set()

    async def find(self, query: str) -> list[str]:
        assert self.client is not None
        found = await self.client.call_tool("find_tools", {"query": query, "limit": 10})
        assert not found.is_error, found
        return [tool["name"] for tool in found.structured_content["tools"]]  # type: ignore[index]

    async def call(self, tool: str, **arguments: str) -> None:
        assert self.client is not None
        result = await self.client.call_tool("call_tool", {"name": tool, "arguments": arguments})
        assert not result.is_error, result


@asynccontextmanager
async def listeners(gateway: StartGateway) -> AsyncIterator[dict[str, Listener]]:
    running = await gateway(make_config([{"name": "grow", "transport": "stdio", "command": BACKEND}],
                                        tenants=TENANTS))
    async with AsyncExitStack() as stack:
        out = {}
        for tenant in TENANTS:
            listener = out[tenant] = Listener()
            listener.client = await stack.enter_async_context(
                sdk_client(running.url, make_token(tenant), message_handler=listener.on_message))
            assert [t.name for t in (await listener.client.list_tools()).tools] == ["find_tools", "call_tool"]
        yield out


async def test_a_tool_a_backend_adds_is_announced_and_found(gateway: StartGateway) -> None:
    async with listeners(gateway) as clients:
        acme, narrow = clients["acme"], clients["narrow"]
        assert "grow__forecast" not in await acme.find("weather forecast for a city")
        await acme.call("grow__add_tool", name="forecast", description="Forecast the weather for a city.")
        await acme.notified()
        await narrow.notified()
        for listener in (acme, narrow):
            assert (await listener.find("weather forecast for a city"))[0] == "grow__forecast"
            assert [t.name for t in (await listener.client.list_tools()).tools] == ["find_tools", "call_tool"]  # type: ignore[union-attr]


async def test_a_tool_hidden_from_a_tenant_is_announced_only_to_those_who_can_find_it(gateway: StartGateway) -> None:
    async with listeners(gateway) as clients:
        acme, narrow = clients["acme"], clients["narrow"]
        await acme.call("grow__add_tool", name="secret_vault", description="Open the vault of secrets.")
        await acme.notified()
        assert await narrow.quiet()
        assert (await acme.find("open the vault"))[0] == "grow__secret_vault"
        assert "grow__secret_vault" not in await narrow.find("open the vault")


async def test_a_tool_a_backend_describes_anew_is_announced_and_found_by_its_new_words(
        gateway: StartGateway) -> None:
    async with listeners(gateway) as clients:
        acme, narrow = clients["acme"], clients["narrow"]
        assert (await narrow.find("answer pong"))[0] == "grow__ping"
        await acme.call("grow__describe", name="ping", description="Translate a text into another language.")
        await acme.notified()
        await narrow.notified()
        assert (await narrow.find("translate this text"))[0] == "grow__ping"
        assert "grow__ping" not in await narrow.find("answer pong")
