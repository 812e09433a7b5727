"""Search mode through MCP Inspector's CLI, as a developer would try it: over HTTP, tools/list gives the
gateway's two tools and the always-listed one, find_tools finds, call_tool reaches the backend, the
always-listed tool is called directly; over `mcp-gateway stdio` started by Inspector itself, the same find.

Inspector's CLI calls only tools it was listed (it looks the tool up in tools/list first and says
"Tool '...' not found on server" otherwise): with it, a found tool is called through call_tool."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import yaml
from conftest import StartGateway, make_token
from inspector_cli import inspector, over_http, run
from test_search_mode import _gateway

pytestmark = pytest.mark.timeout(600)  # the first run installs Inspector and Node
__all__ = ["inspector"]  # the fixture, used by name

ROOT = Path(__file__).resolve().parents[2]
STDIO_KEY = "inspector-search-key"


async def test_inspector_lists_finds_and_calls_over_http(inspector: Path, gateway: StartGateway,
                                                         tmp_path: Path) -> None:
    target = over_http((await _gateway(gateway)).url, make_token("acme"))
    status, listed = await run(inspector, tmp_path, target, "--method", "tools/list")
    assert status == 0 and [tool["name"] for tool in listed["tools"]] == ["find_tools", "call_tool", "clock__now"]
    assert listed["tools"][0]["inputSchema"]["required"] == ["query"]

    status, found = await run(inspector, tmp_path, target, "--method", "tools/call", "--tool-name", "find_tools",
                              "--tool-arg", "query=evaluate an arithmetic expression", "limit=3")
    assert status == 0 and not found.get("isError")
    tools = found["structuredContent"]["tools"]
    assert tools[0]["name"] == "calc__evaluate" and len(tools) <= 3 and "expression" in str(tools[0]["inputSchema"])

    status, via = await run(inspector, tmp_path, target, "--method", "tools/call", "--tool-name", "call_tool",
                            "--tool-arg", "name=calc__evaluate", 'arguments={"expression": "6 * 7"}')
    assert status == 0 and via["content"][0]["text"] == "42.0"
    # Inspector calls only tools it was listed (it reads their schema first): here, the always-listed one
    status, direct = await run(inspector, tmp_path, target, "--method", "tools/call", "--tool-name", "clock__now",
                               "--tool-arg", "timezone=Europe/Paris")
    assert status == 0 and direct["structuredContent"]["timezone"] == "Europe/Paris"


async def test_inspector_finds_through_mcp_gateway_stdio(inspector: Path, tmp_path: Path) -> None:
    backend = {"name": "calc", "transport": "stdio", "command": [sys.executable, "-m", "gateway.demo.calc"]}
    key = {"sha256": hashlib.sha256(STDIO_KEY.encode()).hexdigest(), "tenant": "acme", "subject": "inspector"}
    raw = {"auth": {"api_keys": [key]},
           "backends": [backend], "tenants": {"acme": {"backends": ["*"], "discovery": "search"}},
           "logging": {"level": "warning", "format": "json"}}
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    target = ["-e", f"MCP_GATEWAY_TOKEN={STDIO_KEY}", "--cwd", str(ROOT),
              "--", sys.executable, "-m", "gateway", "stdio", "--config", str(config)]
    status, found = await run(inspector, tmp_path, target, "--method", "tools/call", "--tool-name", "find_tools",
                              "--tool-arg", "query=convert a temperature between units")
    assert status == 0, found
    assert found["structuredContent"]["tools"][0]["name"] == "calc__convert_units"
    assert json.loads(found["content"][0]["text"]) == found["structuredContent"]
