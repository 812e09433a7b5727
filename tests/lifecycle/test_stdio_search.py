"""Search mode over `mcp-gateway stdio` (a real subprocess) with the official SDK client in both eras:
tools/list gives the gateway's two tools and the always-listed one, find_tools finds, call_tool and a
direct call reach the backend alike, a hidden tool is neither found nor called; a backend's new tool is
announced (handshake era: on stdout; 2026: on the client's listen stream) and found."""

from __future__ import annotations

import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.subscriptions import ToolsListChanged

from lifecycle.processes import API_KEY, REPO_ROOT, calc_backend, gateway_config

pytestmark = pytest.mark.timeout(90)

GROWING = {"name": "grow", "transport": "stdio",
           "command": [sys.executable, str(REPO_ROOT / "tests" / "e2e" / "growing_backend.py")]}
TENANTS = {"acme": {"backends": ["*"], "discovery": "search", "always_listed": ["grow__ping"],
                    "tools": {"deny": ["calc__multiply"]}}}
HEARD_WITHIN = 15.0


def parameters(directory: Path) -> StdioServerParameters:
    config = gateway_config(directory, port=0, backends=[calc_backend(), GROWING], tenants=TENANTS)
    return StdioServerParameters(command=sys.executable, args=["-m", "gateway", "stdio", "--config", str(config)],
                                 env={"MCP_GATEWAY_TOKEN": API_KEY, "PATH": os.environ.get("PATH", "")},
                                 cwd=str(REPO_ROOT))


async def names(client: Client, query: str) -> list[str]:
    found = await client.call_tool("find_tools", {"query": query, "limit": 5})
    assert not found.is_error, found
    return [tool["name"] for tool in found.structured_content["tools"]]  # type: ignore[index]


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # 2025-11-25, and 2026-07-28
async def test_the_sdk_client_finds_and_calls_tools_over_stdio(tmp_path: Path, mode: Any) -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:  # the handshake era's notification
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(parameters(tmp_path), mode=mode, read_timeout_seconds=30, message_handler=on_message) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["find_tools", "call_tool", "grow__ping"]
        found = await client.call_tool("find_tools", {"query": "evaluate an arithmetic expression", "limit": 3})
        first = found.structured_content["tools"][0]  # type: ignore[index]
        assert first["name"] == "calc__evaluate" and "expression" in first["inputSchema"]["properties"]
        assert "calc__multiply" not in await names(client, "multiply two numbers")
        via = await client.call_tool("call_tool", {"name": "calc__evaluate", "arguments": {"expression": "6 * 7"}})
        direct = await client.call_tool("calc__evaluate", {"expression": "6 * 7"})
        assert via.content[0].text == direct.content[0].text == "42.0"  # type: ignore[union-attr]
        hidden = await client.call_tool("call_tool", {"name": "calc__multiply", "arguments": {"a": 2, "b": 3}})
        assert hidden.is_error and "Unknown tool" in hidden.content[0].text  # type: ignore[union-attr]
        assert (await client.call_tool("find_tools", {"query": ""})).is_error

        # a backend's new tool: announced on stdout (2026: on the listen stream), then found
        assert "grow__forecast" not in await names(client, "weather forecast for a city")
        async with AsyncExitStack() as stack:
            listening = await stack.enter_async_context(client.listen(tools_list_changed=True)) \
                if mode == "auto" else None
            added = await client.call_tool("grow__add_tool", {"name": "forecast",
                                                               "description": "Forecast the weather for a city."})
            assert not added.is_error
            with anyio.fail_after(HEARD_WITHIN):
                if listening is not None:
                    assert await anext(listening) == ToolsListChanged()
                else:
                    await changed.wait()
        assert (await names(client, "weather forecast for a city"))[0] == "grow__forecast"
