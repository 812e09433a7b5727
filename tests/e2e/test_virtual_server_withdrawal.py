"""A virtual server's item is withdrawn when its source changes under it, never re-pointed: the backend
drops the fixed argument (`argument_gone`), then the tool itself (`missing`); each time the item's
session hears `list_changed`, the item is no longer listed, a call gets the unknown-tool error, and
the withdrawal is logged, counted and shown to admins. When the source comes back, so does the item."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import SCRAPE_TOKEN, RunningGateway, StartGateway, make_config, make_token
from mcp.shared.exceptions import MCPError
from test_policy import sdk

pytestmark = pytest.mark.timeout(120)

BACKEND = [sys.executable, str(Path(__file__).with_name("shrinking_backend.py"))]
SERVER = {"tenants": ["acme"], "tools": [{"backend": "src", "tool": "lookup", "name": "search",
                                          "fixed": {"repo": "acme/warehouse"}}]}


async def listed(client: Any) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


async def until(check: Any, tries: int = 200) -> None:
    """Poll `check` every 0.1 s until it holds (the gateway relists a backend that said its list changed)."""
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.1)
    pytest.fail("the server's list did not change")


async def state(running: RunningGateway) -> dict[str, Any]:
    admin = make_token("ops", sub="admin", scope="mcpgw:admin")  # minted now: one made at import expires in a long run
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {admin}"}) as http:
        report = (await http.get(running.base + "admin/servers")).json()
    return report["servers"][0]["items"][0]


async def test_a_source_that_changes_withdraws_the_item_and_its_return_restores_it(gateway: StartGateway) -> None:
    running = await gateway(make_config([{"name": "src", "transport": "stdio", "command": BACKEND}],
                                        tenants={"acme": {"backends": ["*"]}, "ops": {"backends": ["*"]}},
                                        servers={"data": SERVER}))
    async with sdk(running.base + "servers/data/mcp", make_token("acme", sub="a"), "legacy") as client, \
            sdk(running.url, make_token("ops", sub="o"), "legacy") as ops:
        assert await listed(client) == ["search"]
        assert (await client.call_tool("search", {"query": "q"})).content[0].text == "acme/warehouse: q"  # type: ignore[union-attr]

        for change, reason in (("drop_repo", "argument_gone"), ("remove", "missing")):
            if change == "remove":
                await ops.call_tool("src__restore", {})
                await until(lambda: _listed_is(client, ["search"]))
            await ops.call_tool(f"src__{change}", {})
            await until(lambda: _listed_is(client, []))
            with pytest.raises(MCPError) as refused:
                await client.call_tool("search", {"query": "q"})
            assert refused.value.error.message == "Unknown tool: search"  # as for a name the server never had
            item = await state(running)
            assert (item["state"], item["reason"]) == ("withdrawn", reason)

        await ops.call_tool("src__restore", {})
        await until(lambda: _listed_is(client, ["search"]))
        assert (await client.call_tool("search", {"query": "r"})).content[0].text == "acme/warehouse: r"  # type: ignore[union-attr]
    item = await state(running)
    assert item["state"] == "serving"
    async with httpx2.AsyncClient() as http:
        text = (await http.get(running.base + "metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})).text
    assert 'mcpgw_server_items_withdrawn_total{reason="argument_gone",server="data"} 1.0' in text
    assert 'mcpgw_server_items_withdrawn_total{reason="missing",server="data"} 1.0' in text


async def _listed_is(client: Any, names: list[str]) -> bool:
    return await listed(client) == names
