"""A backend's prompts/resources list_changed reaches exactly the clients whose view of that kind changed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from conftest import RawClient, StartGateway, make_config, make_token
from shared_state.helpers import listening_sessions

pytestmark = pytest.mark.timeout(60)

BACKEND = [sys.executable, str(Path(__file__).with_name("changing_backend.py"))]
TENANTS = {"acme": {"backends": ["*"]},
           "narrow": {"backends": ["*"], "prompts": {"deny": ["*"]}, "resources": {"allow": ["chg+memo://keep/*"]}}}
QUIET = 1.0


@pytest.fixture
async def world(gateway: StartGateway, raw_client: Any) -> Any:
    config = make_config([{"name": "chg", "transport": "stdio", "command": BACKEND}], tenants=TENANTS)
    running = await gateway(config)
    async with aiohttp.ClientSession() as http:
        clients, streams = await listening_sessions(
            http, running.url, lambda tenant: raw_client(running.url, make_token(tenant)), TENANTS)
        yield clients, streams
        for stream in streams.values():
            await stream.close()


async def _call(client: RawClient, tool: str, **arguments: str) -> None:
    body = await client.call("tools/call", {"name": f"chg__{tool}", "arguments": arguments})
    assert not body["result"].get("isError"), body


async def test_a_new_prompt_notifies_only_tenants_who_see_prompts(world: Any) -> None:
    clients, streams = world
    await _call(clients["acme"], "add_prompt", name="second")
    assert await streams["acme"].methods_within(QUIET) == ["notifications/prompts/list_changed"]
    assert await streams["narrow"].methods_within(0.2) == []
    prompts = (await clients["acme"].call("prompts/list"))["result"]["prompts"]
    assert [p["name"] for p in prompts] == ["chg__first", "chg__second"]


async def test_a_new_resource_notifies_the_tenants_whose_globs_let_it_in(world: Any) -> None:
    clients, streams = world
    await _call(clients["acme"], "add_resource", uri="memo://other")
    assert await streams["acme"].methods_within(QUIET) == ["notifications/resources/list_changed"]
    assert await streams["narrow"].methods_within(0.2) == []
    await _call(clients["acme"], "add_resource", uri="memo://keep/1")
    assert await streams["narrow"].methods_within(QUIET) == ["notifications/resources/list_changed"]
    listed = (await clients["narrow"].call("resources/list"))["result"]["resources"]
    assert [r["uri"] for r in listed] == ["chg+memo://keep/1"]
