"""Every row of the DESIGN error table that the core covers, sent as raw HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def client(gateway: StartGateway, raw_client: Any) -> RawClient:
    running = await gateway(make_config([stdio_backend("calc")], server={"max_body_bytes": 4096}))
    return raw_client(running.url, make_token("acme"))


@pytest.fixture
async def session(client: RawClient) -> RawClient:
    await client.initialize()
    return client


async def test_a_body_that_is_not_json_is_a_parse_error(session: RawClient) -> None:
    status, body, _ = await session.post(b"{not json")
    assert status == 400
    assert body["error"]["code"] == -32700


async def test_invalid_utf8_is_a_parse_error(session: RawClient) -> None:
    status, body, _ = await session.post(b'{"jsonrpc":"2.0","id":1,"method":"\xff"}')
    assert (status, body["error"]["code"]) == (400, -32700)


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": None, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
    {"jsonrpc": "2.0", "id": True, "method": "ping"},
    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1, "method": 42},
    {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]},
    "just a string",
    42,
])
async def test_a_message_that_is_not_json_rpc_is_an_invalid_request(session: RawClient, message: Any) -> None:
    status, body, _ = await session.post(message)
    assert status == 400
    assert body["error"]["code"] == -32600


async def test_a_batch_on_a_2025_06_18_session_is_refused(client: RawClient) -> None:
    await client.initialize("2025-06-18")
    status, body, _ = await client.post([client.request("ping"), client.request("ping")])
    assert (status, body["error"]["code"]) == (400, -32600)


async def test_a_batch_on_a_2025_03_26_session_gets_one_reply_per_request(client: RawClient) -> None:
    await client.initialize("2025-03-26")
    ping, bad = client.request("ping"), {"jsonrpc": "2.0", "id": 99, "method": "no/such"}
    status, body, _ = await client.post([ping, {"jsonrpc": "2.0", "method": "notifications/x"}, bad])
    assert status == 200
    assert {r["id"]: r.get("error", {}).get("code") for r in body} == {ping["id"]: None, 99: -32601}


async def test_a_batch_of_notifications_only_gets_202(client: RawClient) -> None:
    await client.initialize("2025-03-26")
    status, _, _ = await client.post([{"jsonrpc": "2.0", "method": "notifications/x"}])
    assert status == 202


async def test_an_unknown_method_is_method_not_found_and_echoes_the_id(session: RawClient) -> None:
    body = await session.call("no/such-method")
    assert body["id"] == session.next_id
    assert body["error"] == {"code": -32601, "message": "Method not found: no/such-method"}


async def test_tools_call_without_a_name_is_invalid_params(session: RawClient) -> None:
    body = await session.call("tools/call", {"arguments": {}})
    assert body["error"]["code"] == -32602


async def test_an_unknown_tool_is_invalid_params(session: RawClient) -> None:
    body = await session.call("tools/call", {"name": "calc__nope", "arguments": {}})
    assert body["error"] == {"code": -32602, "message": "Unknown tool: calc__nope"}


async def test_arguments_that_fail_the_schema_come_back_as_a_tool_error(session: RawClient) -> None:
    body = await session.call("tools/call", {"name": "calc__add", "arguments": {"a": "one", "b": 2}})
    result = body["result"]
    assert result["isError"] is True
    assert "Invalid arguments for tool calc__add" in result["content"][0]["text"]


async def test_arguments_that_are_not_an_object_are_invalid_params(session: RawClient) -> None:
    body = await session.call("tools/call", {"name": "calc__add", "arguments": [1, 2]})
    assert body["error"]["code"] == -32602


async def test_a_forged_cursor_is_invalid_params(session: RawClient) -> None:
    body = await session.call("tools/list", {"cursor": "forged"})
    assert body["error"] == {"code": -32602, "message": "Invalid cursor"}


async def test_a_notification_gets_202_and_no_body(session: RawClient) -> None:
    status, body, _ = await session.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                          "params": {"requestId": 5}})
    assert (status, body) == (202, b"")


async def test_a_response_message_gets_202(session: RawClient) -> None:
    status, _, _ = await session.post({"jsonrpc": "2.0", "id": 7, "result": {}})
    assert status == 202


async def test_no_token_is_401_with_a_resource_metadata_challenge(client: RawClient) -> None:
    client.token = None
    status, _, headers = await client.post(client.request("ping"))
    assert status == 401
    assert headers["WWW-Authenticate"].startswith('Bearer resource_metadata="http://')
    assert "/.well-known/oauth-protected-resource/mcp" in headers["WWW-Authenticate"]


async def test_a_bad_token_is_401_invalid_token(client: RawClient) -> None:
    client.token = "not-a-token"
    status, _, headers = await client.post(client.request("ping"))
    assert status == 401
    assert 'error="invalid_token"' in headers["WWW-Authenticate"]


async def test_a_valid_token_for_an_unknown_tenant_is_403(client: RawClient) -> None:
    client.token = make_token("no-such-tenant")
    status, _, _ = await client.post(client.request("ping"))
    assert status == 403


async def test_a_body_over_the_limit_is_413(session: RawClient) -> None:
    huge = session.request("tools/call", {"name": "calc__evaluate", "arguments": {"expression": "1" * 10_000}})
    status, body, _ = await session.post(huge)
    assert (status, body["error"]["code"]) == (413, -32600)


async def test_a_foreign_origin_is_403(session: RawClient) -> None:
    status, _, _ = await session.post(session.request("ping"), Origin="https://evil.example")
    assert status == 403


async def test_a_loopback_origin_is_allowed(session: RawClient) -> None:
    status, _, _ = await session.post(session.request("ping"), Origin="http://localhost:3000")
    assert status == 200


async def test_a_foreign_host_header_is_refused_while_bound_to_loopback(session: RawClient) -> None:
    status, _, _ = await session.post(session.request("ping"), Host="evil.example")
    assert status == 403


async def test_a_missing_session_is_400(client: RawClient) -> None:
    status, _, _ = await client.post(client.request("tools/list"))
    assert status == 400


async def test_an_unknown_session_is_404(client: RawClient) -> None:
    client.session_id = "no-such-session"
    status, _, _ = await client.post(client.request("tools/list"))
    assert status == 404


async def test_delete_ends_the_session(session: RawClient) -> None:
    async with session.session.delete(session.url, headers=session.headers()) as response:
        assert response.status == 204
    status, _, _ = await session.post(session.request("ping"))
    assert status == 404


async def test_an_unsupported_protocol_version_header_is_400(session: RawClient) -> None:
    status, _, _ = await session.post(session.request("ping"), **{"MCP-Protocol-Version": "1999-01-01"})
    assert status == 400


async def test_initialize_answers_an_unsupported_version_with_the_latest(client: RawClient) -> None:
    body = await client.initialize("1999-01-01")
    assert body["result"]["protocolVersion"] == "2025-11-25"
    assert body["result"]["capabilities"]["tools"] == {"listChanged": True}


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
async def test_initialize_echoes_a_supported_version(client: RawClient, version: str) -> None:
    body = await client.initialize(version)
    assert body["result"]["protocolVersion"] == version


async def test_a_wrong_content_type_is_415(session: RawClient) -> None:
    status, _, _ = await session.post(session.request("ping"), **{"Content-Type": "text/plain"})
    assert status == 415


async def test_an_accept_without_event_stream_is_406(session: RawClient) -> None:
    status, _, _ = await session.post(session.request("ping"), Accept="application/json")
    assert status == 406


async def test_ping_answers_an_empty_result_with_the_same_id(session: RawClient) -> None:
    body = await session.call("ping")
    assert body == {"jsonrpc": "2.0", "id": session.next_id, "result": {}}


async def test_a_second_get_stream_for_one_session_is_409(session: RawClient) -> None:
    headers = session.headers(Accept="text/event-stream")
    async with session.session.get(session.url, headers=headers) as first:
        assert first.status == 200
        async with session.session.get(session.url, headers=headers) as second:
            assert second.status == 409
