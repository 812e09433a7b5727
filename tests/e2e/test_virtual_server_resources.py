"""A virtual server's resources, resource templates and fixed prompt arguments, end to end with the official
SDK client in both eras against a real backend (library_backend.py).

Server `lib` (tenant acme) takes `books://all` (retitled), every `notes://*` resource (a glob), the template
`notes://{day}` (redescribed), `books://gone` (which the backend never had: withdrawn), and the prompt
`review` as `critique` with `tone` fixed. It leaves out `books://secret` and the template `books://{id}`.
Acme's interns may not see `lib+notes://*` (a rule): not on `/mcp`, not through the server.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import RunningGateway, StartGateway, make_config, make_token
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference
from test_policy import MODES, sdk

pytestmark = pytest.mark.timeout(120)

BACKEND = [sys.executable, str(Path(__file__).with_name("library_backend.py"))]
LIB = {"tenants": ["acme"],
       "resources": [{"backend": "lib", "uri": "books://all", "title": "All books"},
                     {"backend": "lib", "uri": "notes://*"},
                     {"backend": "lib", "uri": "books://gone"}],
       "templates": [{"backend": "lib", "template": "notes://{day}", "description": "Notes by date."}],
       "prompts": [{"backend": "lib", "prompt": "review", "name": "critique", "fixed": {"tone": "kindly"}}]}
TOOLS_ONLY = {"tenants": ["acme"], "tools": [{"backend": "lib", "tool": "drop"}]}
RULES = [{"name": "interns-no-notes", "effect": "deny", "callers": {"groups": ["interns"]},
          "resources": ["lib+notes://*"]}]


def config() -> Any:
    return make_config([{"name": "lib", "transport": "stdio", "command": BACKEND}],
                       tenants={"acme": {"backends": ["*"], "rules": RULES}, "ops": {"backends": ["*"]}},
                       servers={"lib": LIB, "tools": TOOLS_ONLY})


def member() -> str:
    return make_token("acme", sub="mia", groups=["staff"])


def intern() -> str:
    return make_token("acme", sub="ivo", groups=["interns"])


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    return await gateway(config())


def lib_url(running: RunningGateway, server: str = "lib") -> str:
    return running.base + f"servers/{server}/mcp"


async def uris(client: Any) -> list[str]:
    return [str(r.uri) for r in (await client.list_resources()).resources]


async def templates(client: Any) -> list[str]:
    return [t.uri_template for t in (await client.list_resource_templates()).resource_templates]


async def refused(client: Any, uri: str) -> tuple[int, str]:
    with pytest.raises(MCPError) as raised:
        await client.read_resource(uri)
    return raised.value.error.code, raised.value.error.message


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_lists_and_reads_exactly_its_resources_and_templates(running: RunningGateway, mode: str) -> None:
    async with sdk(lib_url(running), member(), mode) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert list(listed) == ["lib+books://all", "lib+notes://today"]  # books://gone is withdrawn
        assert listed["lib+books://all"].title == "All books"
        listed_templates = (await client.list_resource_templates()).resource_templates
        assert [(t.uri_template, t.description) for t in listed_templates] == [("lib+notes://{day}", "Notes by date.")]
        assert (await client.read_resource("lib+books://all")).contents[0].text == "Dune, Emma"  # type: ignore[union-attr]
        read = await client.read_resource("lib+notes://monday")  # through the server's template
        assert (str(read.contents[0].uri), read.contents[0].text) == ("lib+notes://monday", "notes of monday")  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_a_resource_outside_the_server_is_not_found_like_one_nobody_serves(
        running: RunningGateway, mode: str) -> None:
    async with sdk(running.url, member(), mode) as gateway_client:
        nobody = await refused(gateway_client, "nobody+x://1")
        assert (await gateway_client.read_resource("lib+books://secret")).contents  # there on /mcp
    async with sdk(lib_url(running), member(), mode) as client:
        # a listed resource left out, a URI of a template left out, the withdrawn item, and a foreign namespace
        for uri in ("lib+books://secret", "lib+books://7", "lib+books://gone", "nobody+x://1"):
            assert await refused(client, uri) == nobody
    assert nobody[1] == "Resource not found" and nobody[0] in (-32002, -32602)


@pytest.mark.parametrize("mode", MODES)
async def test_the_callers_rules_still_decide_each_resource(running: RunningGateway, mode: str) -> None:
    async with sdk(lib_url(running), intern(), mode) as client:
        assert await uris(client) == ["lib+books://all"]
        assert await templates(client) == []
        async with sdk(running.url, intern(), mode) as gateway_client:
            expected = await refused(gateway_client, "nobody+x://1")
        assert await refused(client, "lib+notes://today") == expected
        assert await refused(client, "lib+notes://monday") == expected


@pytest.mark.parametrize("mode", MODES)
async def test_a_fixed_prompt_argument_is_hidden_and_injected(running: RunningGateway, mode: str) -> None:
    async with sdk(lib_url(running), member(), mode) as client:
        prompts = (await client.list_prompts()).prompts
        assert [(p.name, [a.name for a in p.arguments or []]) for p in prompts] == [("critique", ["book"])]
        got = await client.get_prompt("critique", {"book": "Dune"})
        assert got.messages[0].content.text == "Review Dune, kindly."  # type: ignore[union-attr]
        with pytest.raises(MCPError) as given:
            await client.get_prompt("critique", {"book": "Dune", "tone": "harshly"})
        assert given.value.error.message == ("Invalid arguments for prompt critique: 'tone' is set by this server "
                                             "and may not be given")


@pytest.mark.parametrize("mode", MODES)
async def test_completion_and_capabilities_follow_what_the_server_has(running: RunningGateway, mode: str) -> None:
    async with sdk(lib_url(running), member(), mode) as client:
        capabilities = client.server_capabilities
        assert capabilities.resources is not None and capabilities.completions is not None
        done = await client.complete(ResourceTemplateReference(type="ref/resource", uri="lib+notes://{day}"),
                                     {"name": "day", "value": ""})
        assert done.completion.values == ["1", "2"]
        with pytest.raises(MCPError) as outside:
            await client.complete(ResourceTemplateReference(type="ref/resource", uri="lib+books://{id}"),
                                  {"name": "id", "value": ""})
        assert outside.value.error.message == "Unknown resource: lib+books://{id}"
        assert (await client.complete(PromptReference(type="ref/prompt", name="critique"),
                                      {"name": "book", "value": ""})).completion.values == ["1", "2"]
    async with sdk(lib_url(running, "tools"), member(), mode) as client:
        capabilities = client.server_capabilities
        assert capabilities.resources is None and capabilities.prompts is None and capabilities.completions is None
        with pytest.raises(MCPError) as unknown:
            await client.list_resources()
        assert unknown.value.error.code == -32601


async def until(check: Any, tries: int = 200) -> None:
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.1)
    pytest.fail("the server's lists did not change")


async def admin_items(running: RunningGateway) -> dict[str, tuple[str, str | None]]:
    admin = make_token("ops", sub="admin", scope="mcpgw:admin")
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {admin}"}) as http:
        report = (await http.get(running.base + "admin/servers")).json()
    lib = next(s for s in report["servers"] if s["name"] == "lib")
    return {item["name"]: (item["state"], item.get("reason")) for item in lib["items"]}


@pytest.mark.parametrize("mode", MODES)
async def test_a_source_that_goes_withdraws_its_items_and_its_return_restores_them(
        running: RunningGateway, mode: str) -> None:
    async with sdk(lib_url(running), member(), mode) as client, sdk(running.url, make_token("ops"), "legacy") as ops:
        await ops.call_tool("lib__drop", {})

        async def dropped() -> bool:
            return await uris(client) == ["lib+notes://today"] and not (await client.list_prompts()).prompts
        await until(dropped)
        assert await refused(client, "lib+books://all") == await refused(client, "nobody+x://1")
        with pytest.raises(MCPError) as gone:
            await client.get_prompt("critique", {"book": "Dune"})
        assert gone.value.error.message == "Unknown prompt: critique"
        items = await admin_items(running)
        assert items["lib books://all"] == ("withdrawn", "missing")
        assert items["critique"] == ("withdrawn", "argument_gone")
        assert items["lib notes://*"] == ("serving", None)

        await ops.call_tool("lib__restore", {})

        async def restored() -> bool:
            return await uris(client) == ["lib+books://all", "lib+notes://today"]
        await until(restored)
        assert (await client.read_resource("lib+books://all")).contents[0].text == "Dune, Emma"  # type: ignore[union-attr]
        got = await client.get_prompt("critique", {"book": "Emma"})
        assert got.messages[0].content.text == "Review Emma, kindly."  # type: ignore[union-attr]
    assert (await admin_items(running))["critique"] == ("serving", None)


async def test_a_2026_listen_on_a_server_is_honored_only_for_the_kinds_it_has(running: RunningGateway) -> None:
    from test_listen_2026 import modern_client

    async with modern_client(lib_url(running, "tools"), member()) as client, \
            client.listen(tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True) as tools:
        assert (tools.honored.tools_list_changed, tools.honored.prompts_list_changed,
                tools.honored.resources_list_changed) == (True, None, None)  # the backend has all three
    async with modern_client(lib_url(running), member()) as client, \
            client.listen(prompts_list_changed=True, resources_list_changed=True) as lib:
        assert (lib.honored.prompts_list_changed, lib.honored.resources_list_changed) == (True, True)
