"""Search mode across reloads, on the real process: what a caller can find follows its rules, and a reload
that changes what find_tools would give a caller (a rule, an argument limit shown in a found tool's
schema, find_tools' own definition) tells exactly those callers, though tools/list's names stay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from lifecycle.processes import HOST
from lifecycle.test_reload import ADMIN_KEY, METRICS_TOKEN, Client, admin_reload, calc, http, key, serve
from lifecycle.test_reload_policy import ALICE, BOB, member, quiet

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")]
__all__ = ["http"]  # the fixture, used by name

LISTED = {"find_tools", "call_tool"}


def write(path: Path, support: dict[str, Any], max_results: int = 20) -> Path:
    rules = [{"name": "leads", "effect": "allow", "callers": {"groups": ["leads"]}, "tools": ["calc__*"]},
             {"name": "support", "effect": "allow", "callers": {"groups": ["support"]}, **support}]
    raw = {"server": {"host": HOST},
           "auth": {"api_keys": [member(ALICE, "support"), member(BOB, "leads"),
                                 key(ADMIN_KEY, "ops", ("mcpgw:admin",))]},
           "backends": [calc("calc")],
           "tenants": {"acme": {"backends": ["*"], "default": "deny", "rules": rules, "discovery": "search"},
                       "ops": {"backends": []}},
           "catalogue": {"search": {"max_results": max_results}},
           "metrics": {"token": METRICS_TOKEN}, "logging": {"level": "info", "format": "json"}}
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


async def found(client: Client, query: str) -> dict[str, dict[str, Any]]:
    """The tools find_tools gives `client` for `query`, by name."""
    reply = await client.call("find_tools", query=query, limit=10)
    tools = json.loads(reply["result"]["content"][0]["text"])["tools"]
    return {tool["name"]: tool for tool in tools}


async def limit_maximum(client: Client) -> int:
    listed = (await client.rpc("tools/list"))["result"]["tools"]
    find_tools = next(tool for tool in listed if tool["name"] == "find_tools")
    return find_tools["inputSchema"]["properties"]["limit"]["maximum"]


async def call_tool(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    """call_tool's result for `name` (Client.call's own first parameter is `name`)."""
    reply = await client.rpc("tools/call", {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}})
    return reply["result"]


async def reloaded(http: aiohttp.ClientSession, gateway: Any) -> None:
    status, outcome = await admin_reload(http, gateway)
    assert status == 200 and outcome["status"] == "applied", outcome


async def test_what_a_caller_finds_follows_reloads_and_it_hears_when_that_changes(
        start_gateway: Any, tmp_path: Path, http: aiohttp.ClientSession) -> None:
    config = write(tmp_path / "gateway.yaml", {"tools": ["calc__add"]})
    gateway = await serve(start_gateway, config)
    alice = await Client(http, gateway.url(), ALICE).open()
    bob = await Client(http, gateway.url(), BOB).open()
    assert await alice.tools() == await bob.tools() == LISTED
    assert "calc__add" in await found(alice, "add two numbers")
    assert "calc__multiply" not in await found(alice, "multiply two numbers")
    assert "calc__multiply" in await found(bob, "multiply two numbers")

    # a rule gives Alice another tool: she hears it, though her tools/list is the same
    write(config, {"tools": ["calc__multiply"]})
    await reloaded(http, gateway)
    await alice.notified("notifications/tools/list_changed")
    assert await alice.tools() == LISTED
    assert "calc__multiply" in await found(alice, "multiply two numbers")
    assert "calc__add" not in await found(alice, "add two numbers")
    assert "Unknown tool" in (await call_tool(alice, "calc__add", a=1, b=2))["content"][0]["text"]
    assert await quiet(bob) == []

    # only an argument limit changes: the schema find_tools shows her changes with it
    write(config, {"tools": ["calc__multiply"], "arguments": {"a": {"maximum": 10}}})
    await reloaded(http, gateway)
    await alice.notified("notifications/tools/list_changed")
    schema = (await found(alice, "multiply two numbers"))["calc__multiply"]["inputSchema"]
    assert "10" in json.dumps(schema) and "maximum" in json.dumps(schema)
    assert (await call_tool(alice, "calc__multiply", a=11, b=2))["isError"] is True
    assert await quiet(bob) == []

    # find_tools' own definition changes (its limit's maximum): every caller in search mode hears it
    assert await limit_maximum(alice) == 20
    write(config, {"tools": ["calc__multiply"], "arguments": {"a": {"maximum": 10}}}, max_results=8)
    await reloaded(http, gateway)
    await alice.notified("notifications/tools/list_changed")
    await bob.notified("notifications/tools/list_changed")
    assert await limit_maximum(alice) == await limit_maximum(bob) == 8
    await alice.close()
    await bob.close()
