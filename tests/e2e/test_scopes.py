"""Scopes gate tenants, backends and tools: a token without them gets 403 `insufficient_scope`.

An HTTP request is refused with the challenge a client steps up from (RFC 6750 §3.1, MCP
authorization §Scope Challenge Handling); a 2025-03-26 batch member, which cannot have an HTTP
status of its own, gets a JSON-RPC error naming the scopes. Lists are not filtered by scope.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

pytestmark = pytest.mark.timeout(60)

CALL_ADD = {"name": "calc__add", "arguments": {"a": 1, "b": 2}}


def scoped_config(**auth: Any) -> Any:
    tenants = {"acme": {"backends": ["*"], "required_scopes": ["mcp:use"]}}
    backends = [stdio_backend("calc", required_scopes=["calc:run"]), stdio_backend("clock")]
    return make_config(backends, tenants=tenants, auth={
        "tool_scopes": {"clock__*": ["clock:read"]}, "resource_metadata": {"scopes_supported": ["mcp:use"]}, **auth})


def challenge_of(headers: Any) -> dict[str, str]:
    value = headers["WWW-Authenticate"]
    assert value.startswith("Bearer ")
    return {key.strip(): val.strip('"') for key, val in (part.split("=", 1) for part in value[7:].split(", "))}


async def test_a_tenants_required_scope_gates_every_request(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(scoped_config())
    client: RawClient = raw_client(running.url, make_token("acme", scope="other"))
    status, body, headers = await client.post(client.request("initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
    assert status == 403
    assert challenge_of(headers)["error"] == "insufficient_scope"
    assert challenge_of(headers)["scope"] == "mcp:use"
    assert body["error"]["message"] == "Forbidden: insufficient scope"


async def test_a_backends_and_a_tool_globs_scopes_gate_calls_not_lists(gateway: StartGateway,
                                                                       raw_client: Any) -> None:
    running = await gateway(scoped_config())
    client: RawClient = raw_client(running.url, make_token("acme", scope="mcp:use"))
    await client.initialize()
    listed = await client.call("tools/list")
    assert {"calc__add", "clock__now"} <= {tool["name"] for tool in listed["result"]["tools"]}
    for params, missing in ((CALL_ADD, "calc:run"), ({"name": "clock__now", "arguments": {}}, "clock:read")):
        status, _, headers = await client.post(client.request("tools/call", params))
        assert status == 403
        assert challenge_of(headers)["scope"] == f"{missing} mcp:use"  # what it needs, and what it holds
        assert missing in challenge_of(headers)["error_description"]
    stepped_up: RawClient = raw_client(running.url, make_token("acme", scope="mcp:use calc:run"))
    await stepped_up.initialize()
    assert (await stepped_up.call("tools/call", CALL_ADD))["result"]["structuredContent"] == {"result": 3}


async def test_a_batch_member_lacking_a_scope_gets_a_json_rpc_error(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(scoped_config())
    client: RawClient = raw_client(running.url, make_token("acme", scope="mcp:use"))
    await client.initialize("2025-03-26")
    call, ping = client.request("tools/call", CALL_ADD), client.request("ping")
    status, replies, _ = await client.post([call, ping])
    assert status == 200
    by_id = {reply["id"]: reply for reply in replies}
    assert by_id[call["id"]]["error"]["data"] == {"scope": "calc:run mcp:use"}
    assert by_id[ping["id"]]["result"] == {}


async def test_the_get_stream_needs_the_tenants_scope(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(scoped_config())
    client: RawClient = raw_client(running.url, make_token("acme", scope="mcp:use"))
    await client.initialize()
    client.token = make_token("acme", scope="calc:run")
    async with client.session.get(running.url, headers=client.headers(Accept="text/event-stream")) as response:
        assert response.status == 403
        assert challenge_of(response.headers)["scope"] == "mcp:use"
