"""Tenant isolation for prompts, resources, templates and completions, as test_isolation does for tools.

alpha uses calc only, minus its squares template (a resources deny glob); beta sees notes'
prompts and clock's unprefixed one, clock's unprefixed zones resource and the templates of
notes and calc, but not notes' index (denied). gamma uses only catalog, which has tools alone.
Pages hold one item, so every list has cursors.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import pytest
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend
from stateless_client import StatelessClient

pytestmark = pytest.mark.timeout(120)

ALPHA = {"backends": ["calc"], "resources": {"deny": ["calc+calc://squares/*"]}}
BETA = {"backends": ["*"], "prompts": {"allow": ["notes__*", "plan_meeting"]},
        "resources": {"allow": ["notes+*", "calc+*", "clock://*"], "deny": ["notes+notes://index"]}}
GAMMA = {"backends": ["catalog"]}
DELTA = {"backends": ["*"], "prompts": {"deny": ["*"]}, "resources": {"allow": ["nowhere+*"]}}
"""Every backend, but globs that leave no prompt, resource or template visible."""


def world_config(backends: list[dict[str, Any]]) -> Any:
    tenants = {"alpha": ALPHA, "beta": BETA, "delta": DELTA, "acme": {"backends": ["*"]}}
    if any(b["name"] == "catalog" for b in backends):
        tenants["gamma"] = GAMMA
    return make_config(backends, tenants=tenants, catalogue={"page_size": 1})


def full_world() -> list[dict[str, Any]]:
    return [stdio_backend("calc"), stdio_backend("notes"), stdio_backend("clock", namespace=""),
            stdio_backend("catalog", "--tools", "2")]


@pytest.fixture
async def gateway_url(gateway: StartGateway) -> str:
    return (await gateway(world_config(full_world()))).url


async def _client(raw_client: Any, url: str, tenant: str) -> RawClient:
    client: RawClient = raw_client(url, make_token(tenant))
    client.initialized = await client.initialize()  # type: ignore[attr-defined]
    return client


@pytest.fixture
async def alpha(raw_client: Any, gateway_url: str) -> RawClient:
    return await _client(raw_client, gateway_url, "alpha")


@pytest.fixture
async def beta(raw_client: Any, gateway_url: str) -> RawClient:
    return await _client(raw_client, gateway_url, "beta")


async def _all(client: RawClient, method: str, key: str, field: str) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    for _ in range(20):
        result = (await client.call(method, {"cursor": cursor} if cursor else {}))["result"]
        names += [item[field] for item in result[key]]
        cursor = result.get("nextCursor")
        if cursor is None:
            return names
    raise AssertionError("pagination did not end")


async def _raw(client: RawClient, method: str, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": 42, "method": method, "params": params}
    async with client.session.post(client.url, data=orjson.dumps(message), headers=client.headers()) as resp:
        assert resp.status == 200
        return await resp.read()


async def test_each_tenant_lists_exactly_its_own_prompts_resources_and_templates(
        alpha: RawClient, beta: RawClient) -> None:
    lists = [("prompts/list", "prompts", "name"), ("resources/list", "resources", "uri"),
             ("resources/templates/list", "resourceTemplates", "uriTemplate")]
    seen = {tenant: [sorted(await _all(client, *args)) for args in lists]
            for tenant, client in (("alpha", alpha), ("beta", beta))}
    assert seen["alpha"] == [["calc__explain"], [], []]
    assert seen["beta"] == [["notes__summarize_note", "plan_meeting"], ["clock://zones"],
                            ["calc+calc://squares/{count}", "notes+notes://note/{id}"]]


@pytest.mark.parametrize("name", [
    "notes__summarize_note",  # beta's, by its exposed name
    "summarize_note",  # the backend's own name
    "plan_meeting",  # beta's unprefixed clock prompt
    "clock__plan_meeting",  # guessing a prefix
])
async def test_alpha_cannot_get_a_prompt_it_cannot_see(alpha: RawClient, name: str) -> None:
    body = await alpha.call("prompts/get", {"name": name, "arguments": {"id": "note-1"}})
    assert body["error"] == {"code": -32602, "message": f"Unknown prompt: {name}"}


@pytest.mark.parametrize("uri", [
    "notes+notes://note/note-1",  # beta's template, expanded
    "clock://zones",  # beta's unprefixed resource
    "notes+notes://index",  # exists, denied to everyone but acme
    "notes://index",  # the backend's own URI
    "calc+calc://squares/3",  # alpha's own backend, denied by a glob
])
async def test_alpha_cannot_read_a_resource_it_cannot_see(alpha: RawClient, uri: str) -> None:
    body = await alpha.call("resources/read", {"uri": uri})
    assert body["error"] == {"code": -32002, "message": "Resource not found", "data": {"uri": uri}}


async def test_a_denied_uri_stays_unreadable_for_a_tenant_who_sees_its_backend(beta: RawClient) -> None:
    body = await beta.call("resources/read", {"uri": "notes+notes://index"})
    assert body["error"]["code"] == -32002
    zones = (await beta.call("resources/read", {"uri": "clock://zones"}))["result"]["contents"][0]
    assert zones["uri"] == "clock://zones" and "Europe/Paris" in zones["text"]


@pytest.mark.parametrize("ref", [
    {"type": "ref/prompt", "name": "plan_meeting"},
    {"type": "ref/prompt", "name": "notes__summarize_note"},
    {"type": "ref/resource", "uri": "notes+notes://note/{id}"},
    {"type": "ref/resource", "uri": "calc+calc://squares/{count}"},  # own backend, denied
])
async def test_alpha_cannot_complete_a_reference_it_cannot_see(alpha: RawClient, ref: dict[str, str]) -> None:
    body = await alpha.call("completion/complete", {"ref": ref, "argument": {"name": "id", "value": ""}})
    key = "name" if ref["type"] == "ref/prompt" else "uri"
    unknown = "Unknown prompt" if key == "name" else "Unknown resource"
    assert body["error"] == {"code": -32602, "message": f"{unknown}: {ref[key]}"}


@pytest.mark.parametrize(("method", "params"), [
    ("prompts/get", {"name": "notes__summarize_note", "arguments": {"id": "note-1"}}),
    ("resources/read", {"uri": "notes+notes://index"}),
    ("completion/complete", {"ref": {"type": "ref/resource", "uri": "notes+notes://note/{id}"},
                             "argument": {"name": "id", "value": ""}}),
])
async def test_an_invisible_item_gets_byte_for_byte_the_error_of_a_nonexistent_one(
        gateway: StartGateway, raw_client: Any, alpha: RawClient, method: str, params: dict[str, Any]) -> None:
    """The same request in a world where beta's backends do not exist at all gets the same bytes."""
    hidden = await _raw(alpha, method, params)
    calc_only = await gateway(world_config([stdio_backend("calc")]))
    alone = await _client(raw_client, calc_only.url, "alpha")
    assert hidden == await _raw(alone, method, params)


async def test_a_prompt_cursor_issued_to_another_tenant_is_invalid(alpha: RawClient, beta: RawClient) -> None:
    beta_cursor = (await beta.call("prompts/list"))["result"]["nextCursor"]
    body = await alpha.call("prompts/list", {"cursor": beta_cursor})
    assert body["error"] == {"code": -32602, "message": "Invalid cursor"}
    body = await beta.call("resources/templates/list", {"cursor": beta_cursor})  # another kind's cursor
    assert body["error"] == {"code": -32602, "message": "Invalid cursor"}


async def test_capabilities_name_only_what_each_tenant_is_served(
        raw_client: Any, gateway_url: str, alpha: RawClient, beta: RawClient) -> None:
    gamma = await _client(raw_client, gateway_url, "gamma")
    capabilities = {name: client.initialized["result"]["capabilities"]  # type: ignore[attr-defined]
                    for name, client in (("alpha", alpha), ("beta", beta), ("gamma", gamma))}
    changed = {"listChanged": True}
    # no logging: none of the demo servers declares it (a capability is offered only where a backend serves it)
    assert capabilities["gamma"] == {"tools": changed}
    # calc's one resource template is denied to alpha: no resources left to advertise
    assert capabilities["alpha"] == {"tools": changed, "prompts": changed}
    assert capabilities["beta"] == {"tools": changed, "prompts": changed, "resources": changed, "completions": {}}


async def test_globs_that_hide_every_prompt_and_resource_take_those_capabilities_away(
        raw_client: Any, gateway_url: str) -> None:
    delta = await _client(raw_client, gateway_url, "delta")
    changed = {"listChanged": True}
    assert delta.initialized["result"]["capabilities"] == {"tools": changed}  # type: ignore[attr-defined]
    async with aiohttp.ClientSession() as session:
        stateless = StatelessClient(session, gateway_url, make_token("delta"))
        status, body, _ = await stateless.post(stateless.request("server/discover"))
    assert status == 200
    assert set(body["result"]["capabilities"]) == {"tools"}
    assert await _all(delta, "prompts/list", "prompts", "name") == []
