"""Issue 30, item 1: a tenant in search mode finds tools and calls them, through the gateway's two tools
and directly by name, with the official SDK client at both eras; a tenant in full mode sees no change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from conftest import StartGateway, make_config, make_token, sdk_client, stdio_backend
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

pytestmark = pytest.mark.timeout(120)

TENANTS = {
    "acme": {"backends": ["*"], "discovery": "search", "always_listed": ["clock__now"]},
    "globex": {"backends": ["calc"], "tools": {"deny": ["calc__multiply"]}, "discovery": "search"},
    "initech": {"backends": ["*"]},
}


@asynccontextmanager
async def _client(url: str, token: str, mode: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http), mode=mode,  # type: ignore[arg-type]
                   read_timeout_seconds=30) as client:
        yield client


def _structured(result: Any) -> Any:
    return result.structured_content


async def _gateway(gateway: StartGateway) -> Any:
    return await gateway(make_config([stdio_backend("clock"), stdio_backend("calc")], tenants=TENANTS))


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # a session (2025-11-25), and 2026-07-28
async def test_a_search_mode_tenant_finds_and_calls_tools(gateway: StartGateway, mode: str) -> None:
    running = await _gateway(gateway)
    async with _client(running.url, make_token("acme"), mode) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        assert listed == ["find_tools", "call_tool", "clock__now"]
        found = await client.call_tool("find_tools", {"query": "evaluate an arithmetic expression", "limit": 3})
        names = [tool["name"] for tool in _structured(found)["tools"]]
        assert not found.is_error and names[0] == "calc__evaluate" and len(names) <= 3
        first = _structured(found)["tools"][0]
        assert set(first) <= {"name", "title", "description", "inputSchema"} and "expression" in str(first)
        via = await client.call_tool("call_tool", {"name": "calc__evaluate", "arguments": {"expression": "6 * 7"}})
        direct = await client.call_tool("calc__evaluate", {"expression": "6 * 7"})
        assert via.content[0].text == direct.content[0].text == "42.0"  # type: ignore[union-attr]


async def test_the_search_tools_refuse_bad_arguments_as_tool_errors(gateway: StartGateway) -> None:
    running = await _gateway(gateway)
    async with sdk_client(running.url, make_token("acme")) as client:
        for name, arguments in (("find_tools", {}), ("find_tools", {"query": "x", "limit": 500}),
                                ("find_tools", {"query": "x", "extra": 1}), ("call_tool", {"arguments": {}}),
                                ("call_tool", {"name": "nope__nothing"})):
            result = await client.call_tool(name, arguments)
            assert result.is_error, (name, arguments)
        nothing = await client.call_tool("find_tools", {"query": "the of and"})  # only filler words
        assert not nothing.is_error and _structured(nothing)["tools"] == []


async def test_a_caller_never_finds_nor_calls_what_its_view_hides(gateway: StartGateway) -> None:
    running = await _gateway(gateway)
    async with sdk_client(running.url, make_token("globex")) as client:
        found = await client.call_tool("find_tools", {"query": "multiply numbers time clock now", "limit": 20})
        names = {tool["name"] for tool in _structured(found)["tools"]}
        assert names and all(name.startswith("calc__") for name in names) and "calc__multiply" not in names
        hidden = await client.call_tool("call_tool", {"name": "calc__multiply", "arguments": {"a": 2, "b": 3}})
        assert hidden.is_error and "Unknown tool" in hidden.content[0].text  # type: ignore[union-attr]


async def test_a_full_mode_tenant_lists_every_tool_and_has_no_search_tools(gateway: StartGateway) -> None:
    running = await _gateway(gateway)
    async with sdk_client(running.url, make_token("initech")) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert "calc__evaluate" in listed and "clock__now" in listed and "find_tools" not in listed
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("find_tools", {"query": "time"})
