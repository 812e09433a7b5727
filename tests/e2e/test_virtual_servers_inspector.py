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


async def test_inspector_lists_and_reads_a_servers_resources_and_gets_its_prompt(
        inspector: Path, gateway: StartGateway, tmp_path: Path) -> None:
    from test_virtual_server_resources import config, member

    running = await gateway(config())
    target = over_http(running.base + "servers/lib/mcp", member())
    status, listed = await run(inspector, tmp_path, target, "--method", "resources/list")
    assert status == 0, listed
    assert [r["uri"] for r in listed["resources"]] == ["lib+books://all", "lib+notes://today"]
    status, read = await run(inspector, tmp_path, target, "--method", "resources/read", "--uri", "lib+notes://friday")
    assert status == 0 and read["contents"][0]["text"] == "notes of friday"
    with pytest.raises(AssertionError, match='"message":"Resource not found"'):  # Inspector: on stderr, no output
        await run(inspector, tmp_path, target, "--method", "resources/read", "--uri", "lib+books://secret")
    status, got = await run(inspector, tmp_path, target, "--method", "prompts/get", "--prompt-name", "critique",
                            "--prompt-args", "book=Emma")
    assert status == 0 and got["messages"][0]["content"]["text"] == "Review Emma, kindly."
