"""A virtual server through MCP Inspector's CLI, as a developer would try it over HTTP: its tools listed
under the server's names, with its description and without the fixed argument; calls reach the source
tools with the fixed argument set."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import StartGateway
from inspector_cli import inspector, over_http, run
from test_virtual_servers import lead, servers_config

pytestmark = pytest.mark.timeout(600)  # the first run installs Inspector and Node
__all__ = ["inspector"]  # the fixture, used by name


async def test_inspector_lists_and_calls_a_virtual_server(inspector: Path, gateway: StartGateway,
                                                          tmp_path: Path) -> None:
    running = await gateway(servers_config())
    target = over_http(running.base + "servers/data/mcp", lead())
    status, listed = await run(inspector, tmp_path, target, "--method", "tools/list")
    assert status == 0, listed
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert sorted(tools) == ["order", "push_main", "small_refund"]
    assert tools["push_main"]["description"] == "Push the main branch."
    assert "branch" not in tools["push_main"]["inputSchema"].get("properties", {})

    status, pushed = await run(inspector, tmp_path, target, "--method", "tools/call", "--tool-name", "push_main")
    assert status == 0 and pushed["content"][0]["text"] == "pushed main"
    status, refunded = await run(inspector, tmp_path, target, "--method", "tools/call", "--tool-name",
                                 "small_refund", "--tool-arg", "amount=5")
    assert status == 0 and refunded["content"][0]["text"] == "refunded 5"
