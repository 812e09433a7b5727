"""The official SDK client gets the same prompts, resources, templates, reads and completions
direct and through the gateway, with namespaced names and gateway URIs (`{namespace}+{uri}`).

clock and notes run over HTTP, calc over stdio, all behind one gateway.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from backend_fixtures import REPO_ROOT, StartBackend, stdio_command
from conftest import StartGateway, http_backend_config, make_config, make_token, sdk_client, stdio_backend
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.timeout(120)

BACKENDS = ("clock", "notes", "calc")


@pytest.fixture
async def topology(http_backend: StartBackend, gateway: StartGateway) -> dict[str, Any]:
    clock = await http_backend("clock")
    notes = await http_backend("notes")
    config = make_config([http_backend_config("clock", clock.url), http_backend_config("notes", notes.url),
                          stdio_backend("calc")])
    running = await gateway(config)
    return {"gateway": running, "urls": {"clock": clock.url, "notes": notes.url}}


def direct(topology: dict[str, Any], backend: str) -> Any:
    if backend == "calc":
        command = stdio_command("calc")
        return Client(StdioServerParameters(command=command[0], args=command[1:], cwd=REPO_ROOT), mode="legacy")
    return sdk_client(topology["urls"][backend])


def through(topology: dict[str, Any]) -> Any:
    return sdk_client(topology["gateway"].url, make_token("acme"))


def dump(model: Any, *exclude: str) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, exclude=set(exclude))


async def test_prompts_are_every_backends_prompts_prefixed_and_otherwise_unchanged(topology: dict[str, Any]) -> None:
    expected = {}
    for backend in BACKENDS:
        async with direct(topology, backend) as client:
            for prompt in (await client.list_prompts()).prompts:
                expected[f"{backend}__{prompt.name}"] = dump(prompt, "name")
    async with through(topology) as client:
        listed = {p.name: dump(p, "name") for p in (await client.list_prompts()).prompts}
    assert listed == expected
    assert set(listed) == {"clock__plan_meeting", "notes__summarize_note", "calc__explain"}


async def test_resources_and_templates_carry_gateway_uris(topology: dict[str, Any]) -> None:
    resources, templates = {}, {}
    for backend in BACKENDS:
        async with direct(topology, backend) as client:
            for resource in (await client.list_resources()).resources:
                resources[f"{backend}+{resource.uri}"] = dump(resource, "uri")
            for template in (await client.list_resource_templates()).resource_templates:
                templates[f"{backend}+{template.uri_template}"] = dump(template, "uri_template")
    async with through(topology) as client:
        listed = {r.uri: dump(r, "uri") for r in (await client.list_resources()).resources}
        listed_templates = {t.uri_template: dump(t, "uri_template")
                            for t in (await client.list_resource_templates()).resource_templates}
    assert listed == resources
    assert listed_templates == templates
    assert set(listed) == {"clock+clock://zones", "notes+notes://index"}
    assert set(listed_templates) == {"notes+notes://note/{id}", "calc+calc://squares/{count}"}


@pytest.mark.parametrize(("backend", "uri"), [
    ("clock", "clock://zones"),  # text, listed
    ("calc", "calc://squares/7"),  # binary, from a template, over stdio
    ("notes", "notes://index"),
])
async def test_a_read_returns_what_the_backend_returns_under_the_gateway_uri(
        topology: dict[str, Any], backend: str, uri: str) -> None:
    async with direct(topology, backend) as client:
        expected = dump(await client.read_resource(uri))
    async with through(topology) as client:
        got = dump(await client.read_resource(f"{backend}+{uri}"))
    for content in expected["contents"]:
        content["uri"] = f"{backend}+{content['uri']}"
    assert got == expected
    assert got["contents"][0].get("text") or got["contents"][0].get("blob")


async def test_a_template_expands_to_a_uri_the_gateway_routes(topology: dict[str, Any]) -> None:
    async with through(topology) as client:
        created = await client.call_tool("notes__create_note", {"title": "parity", "body": "template body"})
        note_id = created.structured_content["id"]
        template = next(t.uri_template for t in (await client.list_resource_templates()).resource_templates
                        if t.uri_template.startswith("notes+"))
        read = await client.read_resource(template.replace("{id}", note_id))
    assert dump(read)["contents"] == [{"uri": f"notes+notes://note/{note_id}", "mimeType": "text/plain",
                                       "text": "template body"}]


async def test_a_resource_link_in_a_tool_result_names_a_gateway_uri_that_reads(topology: dict[str, Any]) -> None:
    async with through(topology) as client:
        created = await client.call_tool("notes__create_note", {"title": "linked", "body": "by a link"})
        note_id = created.structured_content["id"]
        linked = await client.call_tool("notes__link_note", {"id": note_id})
        link = linked.content[0]
        assert isinstance(link, types.ResourceLink)
        assert link.uri == f"notes+notes://note/{note_id}"
        read = await client.read_resource(link.uri)
    assert read.contents[0].text == "by a link"  # type: ignore[union-attr]
    async with direct(topology, "notes") as client:
        direct_link = (await client.call_tool("link_note", {"id": note_id})).content[0]
    assert dump(link, "uri") == dump(direct_link, "uri")


async def test_a_prompt_message_embeds_its_resource_under_the_gateway_uri(topology: dict[str, Any]) -> None:
    async with through(topology) as client:
        created = await client.call_tool("notes__create_note", {"title": "embedded", "body": "embedded body"})
        note_id = created.structured_content["id"]
        got = dump(await client.get_prompt("notes__summarize_note", {"id": note_id}))
    async with direct(topology, "notes") as client:
        expected = dump(await client.get_prompt("summarize_note", {"id": note_id}))
    expected["messages"][1]["content"]["resource"]["uri"] = f"notes+notes://note/{note_id}"
    assert got == expected


@pytest.mark.parametrize(("backend", "prompt", "arguments"), [
    ("clock", "plan_meeting", {"zones": "Europe/Paris, Asia/Tokyo", "duration_minutes": "45"}),
    ("calc", "explain", {"expression": "2 ** 10"}),
])
async def test_prompts_get_passes_arguments_through(
        topology: dict[str, Any], backend: str, prompt: str, arguments: dict[str, str]) -> None:
    async with direct(topology, backend) as client:
        expected = dump(await client.get_prompt(prompt, arguments))
    async with through(topology) as client:
        got = dump(await client.get_prompt(f"{backend}__{prompt}", arguments))
    assert got == expected


async def test_completions_route_by_prompt_name_and_by_template(topology: dict[str, Any]) -> None:
    async with through(topology) as client:
        created = await client.call_tool("notes__create_note", {"title": "complete me", "body": "x"})
        note_id = created.structured_content["id"]
        by_template = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="notes+notes://note/{id}"),
            {"name": "id", "value": note_id})
        by_prompt = await client.complete(types.PromptReference(type="ref/prompt", name="clock__plan_meeting"),
                                          {"name": "zones", "value": "Europe/Par"})
    async with direct(topology, "notes") as client:
        direct_template = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="notes://note/{id}"),
            {"name": "id", "value": note_id})
    async with direct(topology, "clock") as client:
        direct_prompt = await client.complete(types.PromptReference(type="ref/prompt", name="plan_meeting"),
                                              {"name": "zones", "value": "Europe/Par"})
    assert dump(by_template) == dump(direct_template)
    assert note_id in by_template.completion.values
    assert dump(by_prompt) == dump(direct_prompt) and by_prompt.completion.values == ["Europe/Paris"]


async def test_a_backend_without_completions_completes_nothing(topology: dict[str, Any]) -> None:
    async with through(topology) as client:
        done = await client.complete(types.PromptReference(type="ref/prompt", name="calc__explain"),
                                     {"name": "expression", "value": "1"})
    assert done.completion.values == []


async def test_unknown_names_and_uris_get_the_gateways_errors(topology: dict[str, Any]) -> None:
    async with through(topology) as client:
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("notes__nope", {})
        with pytest.raises(MCPError) as resource:
            await client.read_resource("nobody+file:///etc/passwd")
        with pytest.raises(MCPError) as ref:
            await client.complete(types.ResourceTemplateReference(type="ref/resource", uri="zzz+x://{y}"),
                                  {"name": "y", "value": ""})
    assert (prompt.value.code, prompt.value.message) == (-32602, "Unknown prompt: notes__nope")
    assert (resource.value.code, resource.value.data) == (-32002, {"uri": "nobody+file:///etc/passwd"})
    assert (ref.value.code, ref.value.message) == (-32602, "Unknown resource: zzz+x://{y}")


async def test_the_backends_own_errors_pass_through(topology: dict[str, Any]) -> None:
    async with direct(topology, "calc") as client:
        with pytest.raises(MCPError) as direct_error:
            await client.read_resource("calc://squares/999")
    async with through(topology) as client:
        with pytest.raises(MCPError) as gateway_error:
            await client.read_resource("calc+calc://squares/999")
    assert (gateway_error.value.code, gateway_error.value.message) == (
        direct_error.value.code, direct_error.value.message)


async def test_initialize_declares_what_the_gateway_serves(topology: dict[str, Any]) -> None:
    async with through(topology) as client:
        capabilities = client.server_capabilities
    assert capabilities.prompts is not None and capabilities.prompts.list_changed is True
    assert capabilities.resources is not None and capabilities.resources.list_changed is True
    assert capabilities.completions is not None


async def test_a_backends_not_found_error_names_the_gateway_uri(topology: dict[str, Any]) -> None:
    async with direct(topology, "notes") as client:
        with pytest.raises(MCPError) as direct_error:
            await client.read_resource("notes://nope")
    async with through(topology) as client:
        with pytest.raises(MCPError) as gateway_error:
            await client.read_resource("notes+notes://nope")
    assert direct_error.value.data == {"uri": "notes://nope"}  # the backend names the URI it was asked
    assert (gateway_error.value.code, gateway_error.value.message) == (
        direct_error.value.code, direct_error.value.message)
    assert gateway_error.value.data == {"uri": "notes+notes://nope"}  # ... and the client's comes back
