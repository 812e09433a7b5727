"""Virtual servers reload live: a server's new tool list reaches a live session on its endpoint with
`list_changed`, and a server taken away from a tenant answers its sessions 404."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from lifecycle.processes import HOST, REPO_ROOT
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


def write_library(path: Path, templates: list[dict[str, Any]]) -> Path:
    """Server `library` takes the demo notes backend's index, and the given templates."""
    notes = {"name": "notes", "transport": "stdio", "command": [sys.executable, "-m", "gateway.demo.notes"],
             "cwd": str(REPO_ROOT)}
    raw = {"server": {"host": HOST},
           "auth": {"api_keys": [key(USER_KEY, "acme", ()), key(ADMIN_KEY, "ops", ("mcpgw:admin",))]},
           "backends": [notes], "tenants": {"acme": {"backends": ["*"]}, "ops": {"backends": []}},
           "servers": {"library": {"tenants": ["acme"], "templates": templates,
                                   "resources": [{"backend": "notes", "uri": "notes://index"}]}},
           "metrics": {"token": METRICS_TOKEN}, "logging": {"level": "info", "format": "json"}}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


async def test_a_servers_new_template_reaches_its_live_sessions(start_gateway: Any, tmp_path: Path,
                                                               http: aiohttp.ClientSession) -> None:
    config = write_library(tmp_path / "gateway.yaml", [])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url("/servers/library/mcp"), USER_KEY).open()
    assert [r["uri"] for r in (await client.rpc("resources/list"))["result"]["resources"]] == ["notes+notes://index"]
    assert (await client.rpc("resources/templates/list"))["result"]["resourceTemplates"] == []
    outside = await client.rpc("resources/read", {"uri": "notes+notes://note/1"})
    assert outside["error"] == {"code": -32002, "message": "Resource not found",  # no template of the server takes it
                                "data": {"uri": "notes+notes://note/1"}}

    write_library(config, [{"backend": "notes", "template": "notes://note/{id}"}])
    status, outcome = await admin_reload(http, gateway)
    assert status == 200, outcome
    await client.notified("notifications/resources/list_changed")
    templates = (await client.rpc("resources/templates/list"))["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["notes+notes://note/{id}"]
    read = await client.rpc("resources/read", {"uri": "notes+notes://note/1"})
    assert "Unknown note id" in str(read)  # now the backend's own answer: there is no note 1 yet
    await client.close()


def write_memo(path: Path, uris: list[str]) -> Path:
    """Server `memo` takes the watched backend's resources `uris` (it tells subscribers of changes)."""
    watched = {"name": "w", "transport": "stdio",
               "command": [sys.executable, str(REPO_ROOT / "tests" / "e2e" / "watched_backend.py")]}
    raw = {"server": {"host": HOST},
           "auth": {"api_keys": [key(USER_KEY, "acme", ()), key(ADMIN_KEY, "ops", ("mcpgw:admin",))]},
           "backends": [watched], "tenants": {"acme": {"backends": ["*"]}, "ops": {"backends": []}},
           "servers": {"memo": {"tenants": ["acme"], "resources": [{"backend": "w", "uri": u} for u in uris]}},
           "metrics": {"token": METRICS_TOKEN}, "logging": {"level": "info", "format": "json"}}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


async def test_a_resource_a_reload_takes_off_a_server_sends_its_subscribers_no_more_updates(
        start_gateway: Any, tmp_path: Path, http: aiohttp.ClientSession) -> None:
    config = write_memo(tmp_path / "gateway.yaml", ["memo://a", "memo://b"])
    gateway = await serve(start_gateway, config)
    client = await Client(http, gateway.url("/servers/memo/mcp"), USER_KEY).open()
    toucher = await Client(http, gateway.url("/mcp"), USER_KEY).open()
    assert (await client.rpc("resources/subscribe", {"uri": "w+memo://a"}))["result"] == {}
    await toucher.call("w__touch", uri="memo://a", text="a1")
    await client.notified("notifications/resources/updated")

    write_memo(config, ["memo://b"])
    status, outcome = await admin_reload(http, gateway)
    assert status == 200, outcome
    await client.notified("notifications/resources/list_changed")
    await toucher.call("w__touch", uri="memo://a", text="a2")
    await toucher.call("w__touch", uri="memo://b", text="b2")  # not subscribed: a marker that updates were sent
    await asyncio.sleep(1.0)
    heard = []
    while not client.notifications.empty():
        heard.append(client.notifications.get_nowait().get("method"))
    assert "notifications/resources/updated" not in heard
    await client.close()
    await toucher.close()
