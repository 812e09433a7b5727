"""`mcp-gateway stdio --server NAME`: a virtual server served to one local client, in both eras."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from lifecycle.processes import API_KEY, REPO_ROOT, gateway_config, gateway_env

pytestmark = pytest.mark.timeout(90)

ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}
SERVERS = {"adder": {"tenants": ["acme"], "instructions": "Adds two to a number.",
                     "tools": [{"backend": "calc", "tool": "add", "name": "plus_two", "fixed": {"b": 2},
                                "description": "Add two."}]},
           "elsewhere": {"tenants": ["other"], "tools": []}}


def command(config: Path, server: str) -> list[str]:
    return [sys.executable, "-m", "gateway", "stdio", "--config", str(config), "--server", server]


@pytest.mark.parametrize("mode", list(ERAS))
async def test_a_virtual_server_over_stdio(tmp_path: Path, mode: str) -> None:
    config = gateway_config(tmp_path, port=0, servers=SERVERS,
                            tenants={"acme": {"backends": ["*"]}, "other": {"backends": ["*"]}})
    params = StdioServerParameters(command=sys.executable, args=command(config, "adder")[1:],
                                   env={"MCP_GATEWAY_TOKEN": API_KEY, "PATH": os.environ.get("PATH", "")},
                                   cwd=str(REPO_ROOT))
    async with Client(params, mode=mode, read_timeout_seconds=30) as client:
        assert client.protocol_version == ERAS[mode]
        assert client.instructions == "Adds two to a number."
        tools = (await client.list_tools()).tools
        assert [(t.name, t.description, list(t.input_schema["properties"])) for t in tools] == [
            ("plus_two", "Add two.", ["a"])]
        added = await client.call_tool("plus_two", {"a": 40})
        assert added.structured_content == {"result": 42.0}
        refused = await client.call_tool("plus_two", {"a": 1, "b": 5})
        assert refused.is_error


@pytest.mark.parametrize("server", ["elsewhere", "nope"])
def test_a_server_the_caller_may_not_use_refuses_to_start(tmp_path: Path, server: str) -> None:
    config = gateway_config(tmp_path, port=0, servers=SERVERS,
                            tenants={"acme": {"backends": ["*"]}, "other": {"backends": ["*"]}})
    done = subprocess.run(command(config, server), cwd=REPO_ROOT, env=gateway_env(MCP_GATEWAY_TOKEN=API_KEY),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)
    assert done.returncode != 0 and done.stdout == b""
    assert f"no virtual server {server!r} under `servers:` admits tenant 'acme'" in done.stderr.decode()
