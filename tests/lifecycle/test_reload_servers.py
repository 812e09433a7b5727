"""Virtual servers reload live: a server's new tool list reaches a live session on its endpoint with
`list_changed`, and a server taken away from a tenant answers its sessions 404."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from lifecycle.processes import HOST
from lifecycle.test_reload import ADMIN_KEY, METRICS_TOKEN, USER_KEY, Client, admin_reload, calc, http, key, serve

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")]
__all__ = ["http"]  # the fixture, used by name


def write(path: Path, tools: list[dict[str, Any]], tenants: list[str] = ("acme",)) -> Path:  # type: ignore[assignment]
    raw = {"server": {"host": HOST},
           "auth": {"api_keys": [key(USER_KEY, "acme", ()), key(ADMIN_KEY, "ops", ("mcpgw:admin",))]},
           "backends": [calc("calc")],
           "tenants": {"acme": {"backends": ["*"]}, "ops": {"backends": []}},
           "servers": {"maths": {"tenants": list(tenants), "tools": tools}},
           "metrics": {"token": METRICS_TOKEN}, "logging": {"level": "info", "format": "json"}}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


ADD = {"backend": "calc", "tool": "add", "name": "plus"}
MULTIPLY = {"backend": "calc", "tool": "multiply", "name": "times"}


@pytest.mark.parametrize("trigger", ["sighup", "admin"])
async def test_a_server_change_reaches_its_live_sessions(start_gateway: Any, tmp_path: Path,
                                                         http: aiohttp.ClientSession, trigger: str) -> None:
    config = write(tmp_path / "gateway.yaml", [ADD])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url("/servers/maths/mcp"), USER_KEY).open()
    assert await client.tools() == {"plus"}

    write(config, [ADD, MULTIPLY])
    if trigger == "sighup":
        gateway.signal(signal.SIGHUP)
    else:
        status, outcome = await admin_reload(http, gateway)
        assert status == 200, outcome
    await client.notified("notifications/tools/list_changed")
    assert await client.tools() == {"plus", "times"}
    assert (await client.call("times", a=2, b=3))["result"]["content"][0]["text"] == "6.0"

    write(config, [ADD, MULTIPLY], tenants=["ops"])  # acme may no longer use it
    status, _ = await admin_reload(http, gateway)
    assert status == 200
    assert (await client.post({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))[0] == 404
    await client.close()
