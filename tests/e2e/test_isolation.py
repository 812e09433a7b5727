"""Tenant isolation over HTTP: one tenant can neither list, call, nor detect another's tools.

alpha sees the calc backend minus a denied tool; beta sees notes, two of clock's unprefixed
tools and one calc tool. Pages hold two tools, so cursors exist for both tenants.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

pytestmark = pytest.mark.timeout(90)

ALPHA = {"backends": ["calc"], "tools": {"deny": ["calc__slow"]}}
BETA = {"backends": ["*"], "tools": {"allow": ["notes__*", "now", "convert", "calc__add"]}}
ALPHA_TOOLS = {"calc__add", "calc__multiply", "calc__evaluate", "calc__convert_units"}
BETA_TOOLS = {"notes__create_note", "notes__list_notes", "notes__get_note", "notes__delete_note", "notes__link_note",
              "notes__search_notes", "now", "convert", "calc__add"}


def world_config(backends: list[dict[str, Any]]) -> Any:
    return make_config(backends, tenants={"alpha": ALPHA, "beta": BETA, "acme": {"backends": ["*"]}},
                       catalogue={"page_size": 2})


@pytest.fixture
async def gateway_url(gateway: StartGateway) -> str:
    running = await gateway(world_config([stdio_backend("calc"), stdio_backend("notes"),
                                          stdio_backend("clock", namespace="")]))
    return running.url


async def _client(raw_client: Any, url: str, tenant: str, sub: str = "user") -> RawClient:
    client: RawClient = raw_client(url, make_token(tenant, sub=sub))
    await client.initialize()
    return client


@pytest.fixture
async def alpha(raw_client: Any, gateway_url: str) -> RawClient:
    return await _client(raw_client, gateway_url, "alpha")


@pytest.fixture
async def beta(raw_client: Any, gateway_url: str) -> RawClient:
    return await _client(raw_client, gateway_url, "beta")


async def _all_tools(client: RawClient) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    for _ in range(20):
        result = (await client.call("tools/list", {"cursor": cursor} if cursor else {}))["result"]
        names += [t["name"] for t in result["tools"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            return names
    raise AssertionError("pagination did not end")


async def _raw_call(client: RawClient, name: str, arguments: dict[str, Any]) -> tuple[int, bytes, str]:
    message = {"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    async with client.session.post(client.url, data=orjson.dumps(message), headers=client.headers()) as resp:
        return resp.status, await resp.read(), resp.content_type


async def test_each_tenant_lists_exactly_its_own_tools(alpha: RawClient, beta: RawClient) -> None:
    alpha_tools, beta_tools = await _all_tools(alpha), await _all_tools(beta)
    assert sorted(alpha_tools) == sorted(ALPHA_TOOLS)
    assert sorted(beta_tools) == sorted(BETA_TOOLS)


@pytest.mark.parametrize("name", [
    "notes__list_notes",  # beta's, by its exposed name
    "list_notes",  # guessing the backend's own, unprefixed name
    "now",  # beta's unprefixed clock tool
    "list_timezones",  # exists in the catalogue, visible to nobody
    "clock__now",  # guessing a prefix
    "calc__slow",  # on alpha's own backend, but denied by a glob
])
async def test_alpha_cannot_call_what_it_cannot_see(alpha: RawClient, name: str) -> None:
    body = await alpha.call("tools/call", {"name": name, "arguments": {}})
    assert body["error"] == {"code": -32602, "message": f"Unknown tool: {name}"}


async def test_an_allowed_backend_still_hides_tools_outside_the_allow_list(beta: RawClient) -> None:
    assert (await beta.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}}))["result"]
    body = await beta.call("tools/call", {"name": "calc__multiply", "arguments": {"a": 1, "b": 2}})
    assert body["error"] == {"code": -32602, "message": "Unknown tool: calc__multiply"}


async def test_an_invisible_tool_gets_byte_for_byte_the_error_of_a_nonexistent_one(
        gateway: StartGateway, raw_client: Any, alpha: RawClient) -> None:
    """The same request in a world where beta's backends do not exist at all gets the same bytes."""
    arguments = {"query": "x"}  # valid for notes__search_notes: schema checks must not run first
    hidden = await _raw_call(alpha, "notes__search_notes", arguments)
    calc_only = await gateway(world_config([stdio_backend("calc")]))
    alone = await _client(raw_client, calc_only.url, "alpha")
    missing = await _raw_call(alone, "notes__search_notes", arguments)
    assert hidden == missing
    assert hidden[0] == 200 and b"Unknown tool" in hidden[1]


async def test_an_invisible_name_and_a_made_up_name_differ_only_by_the_name(alpha: RawClient) -> None:
    _, hidden, _ = await _raw_call(alpha, "notes__list_notes", {})
    _, made_up, _ = await _raw_call(alpha, "zzzzz__yyyy_xxxxx", {})
    assert hidden.replace(b"notes__list_notes", b"zzzzz__yyyy_xxxxx") == made_up


async def test_another_tenants_session_id_is_404(alpha: RawClient, beta: RawClient) -> None:
    alpha.session_id = beta.session_id
    for message in (alpha.request("ping"), alpha.request("tools/list")):
        status, _, _ = await alpha.post(message)
        assert status == 404
    async with alpha.session.get(alpha.url, headers=alpha.headers(Accept="text/event-stream")) as resp:
        assert resp.status == 404
    async with alpha.session.delete(alpha.url, headers=alpha.headers()) as resp:
        assert resp.status == 404
    assert "result" in await beta.call("ping")  # beta's session survived every attempt


async def test_another_subjects_session_id_is_404_even_in_the_same_tenant(
        raw_client: Any, gateway_url: str, beta: RawClient) -> None:
    other = await _client(raw_client, gateway_url, "beta", sub="someone-else")
    other.session_id = beta.session_id
    status, _, _ = await other.post(other.request("ping"))
    assert status == 404


async def test_a_cursor_issued_to_another_tenant_is_invalid(alpha: RawClient, beta: RawClient) -> None:
    beta_cursor = (await beta.call("tools/list"))["result"]["nextCursor"]
    alpha_cursor = (await alpha.call("tools/list"))["result"]["nextCursor"]
    assert beta_cursor != alpha_cursor
    body = await alpha.call("tools/list", {"cursor": beta_cursor})
    assert body["error"] == {"code": -32602, "message": "Invalid cursor"}
    assert "result" in await alpha.call("tools/list", {"cursor": alpha_cursor})  # its own still works
    body = await beta.call("tools/list", {"cursor": alpha_cursor})
    assert body["error"] == {"code": -32602, "message": "Invalid cursor"}
