"""2026-07-28 requests on the one endpoint: no session, the SDK's validation ladder, each code with its status."""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from conftest import API_KEY, RawClient, RunningGateway, StartGateway, make_config, make_token, stdio_backend
from stateless_client import MODERN, StatelessClient, envelope

from gateway import keys
from gateway.protocol.sse import SseDecoder

pytestmark = pytest.mark.timeout(60)

ROUTED = [sys.executable, str(Path(__file__).with_name("routed_tool_server.py"))]
HANDSHAKE_VERSIONS = ["2025-03-26", "2025-06-18", "2025-11-25"]
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"


@pytest.fixture
async def running(gateway: StartGateway) -> RunningGateway:
    backends = [stdio_backend("calc"), {"name": "routed", "transport": "stdio", "command": ROUTED}]
    return await gateway(make_config(backends, tenants={"acme": {"backends": ["*"]}, "slow": {
        "backends": ["*"], "rate_limit": {"requests_per_second": 0.001, "burst": 1}}}, server={"max_body_bytes": 4096}))


@pytest.fixture
async def client(running: RunningGateway) -> AsyncIterator[StatelessClient]:
    async with aiohttp.ClientSession() as session:
        yield StatelessClient(session, running.url, make_token("acme"))


def _error(body: Any) -> dict[str, Any]:
    assert isinstance(body, dict) and "error" in body, body
    return body["error"]


async def _refused(client: StatelessClient, message: Any, status: int, code: int, **headers: str) -> dict[str, Any]:
    got, body, _ = await client.post(message, **headers)
    assert got == status, body
    error = _error(body)
    assert error["code"] == code, error
    return error


# ---------------------------------------------------------------- served without a session


async def test_discover_states_the_versions_and_what_this_tenant_is_served(
        client: StatelessClient, running: RunningGateway, raw_client: Any) -> None:
    status, body, headers = await client.post(client.request("server/discover"))
    assert status == 200 and "Mcp-Session-Id" not in headers
    result = body["result"]
    assert result["supportedVersions"] == [*HANDSHAKE_VERSIONS, MODERN]
    legacy: RawClient = raw_client(running.url, make_token("acme"))
    session_capabilities = (await legacy.initialize())["result"]["capabilities"]
    assert session_capabilities["tools"] == {"listChanged": True}  # the session has its GET stream
    assert result["capabilities"] == session_capabilities  # the same: change notifications via subscriptions/listen
    assert result["instructions"]
    assert (result["resultType"], result["cacheScope"]) == ("complete", "private")
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] > 0
    assert result["_meta"][SERVER_INFO_KEY]["name"] == "mcp-gateway"
    assert "serverInfo" not in result


async def test_tools_list_is_the_sessions_list_with_cache_hints_and_server_info(
        client: StatelessClient, running: RunningGateway, raw_client: Any) -> None:
    result = (await client.call("tools/list"))["result"]
    legacy: RawClient = raw_client(running.url, make_token("acme"))
    await legacy.initialize()
    session_result = (await legacy.call("tools/list"))["result"]
    assert result["tools"] == session_result["tools"]
    assert (result["resultType"], result["cacheScope"]) == ("complete", "private")
    assert result["_meta"] == {SERVER_INFO_KEY: {"name": "mcp-gateway", "title": "MCP Gateway", "version": "0.1.0"}}
    assert "resultType" not in session_result and "ttlMs" not in session_result


async def test_a_call_is_answered_without_a_session_and_a_session_header_is_ignored(client: StatelessClient) -> None:
    message = client.request("tools/call", {"name": "calc__add", "arguments": {"a": 2, "b": 3}})
    status, body, headers = await client.post(message, **{"Mcp-Session-Id": "not-a-session"})
    assert status == 200 and "Mcp-Session-Id" not in headers, body
    result = body["result"]
    assert result["structuredContent"] == {"result": 5.0}
    assert result["resultType"] == "complete" and result["_meta"][SERVER_INFO_KEY]["name"] == "mcp-gateway"


async def test_progress_arrives_on_the_requests_own_stream_then_the_result(client: StatelessClient) -> None:
    message = client.request("tools/call", {"name": "calc__slow", "arguments": {"seconds": 0.2, "steps": 2}},
                             progressToken="p1")
    async with client.session.post(client.url, data=orjson.dumps(message), headers=client.headers(message)) as reply:
        assert reply.status == 200 and reply.content_type == "text/event-stream"
        decoder, messages = SseDecoder(), []
        async for chunk in reply.content.iter_any():
            messages += [orjson.loads(e.data) for e in decoder.feed(chunk) if e.data]
    assert [m.get("method") for m in messages[:-1]] == ["notifications/progress"] * 2
    assert messages[-1]["id"] == message["id"] and messages[-1]["result"]["resultType"] == "complete"


async def test_a_notification_is_acknowledged(client: StatelessClient) -> None:
    notification = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    status, body, _ = await client.post(notification)
    assert (status, body) == (202, b"")


# ---------------------------------------------------------------- the era router


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe",
                                    "resources/unsubscribe", "no/such-method"])
async def test_methods_2026_does_not_have_are_404_method_not_found(client: StatelessClient, method: str) -> None:
    await _refused(client, client.request(method, {"uri": "x", "level": "info"}), 404, -32601)


@pytest.mark.parametrize("verb", ["GET", "DELETE"])
async def test_get_and_delete_at_2026_are_405_allowing_post(client: StatelessClient, verb: str) -> None:
    headers = client.headers(None, **{"MCP-Protocol-Version": MODERN})
    async with client.session.request(verb, client.url, headers=headers) as response:
        assert response.status == 405 and response.headers["Allow"] == "POST"


async def test_a_body_naming_2026_without_the_version_header_is_a_header_mismatch(client: StatelessClient) -> None:
    error = await _refused(client, client.request("tools/list"), 400, -32020, **{"MCP-Protocol-Version": ""})
    assert "MCP-Protocol-Version" in error["message"]


async def test_the_handshake_era_is_untouched_by_the_router(running: RunningGateway, raw_client: Any) -> None:
    legacy: RawClient = raw_client(running.url, make_token("acme"))
    await legacy.initialize("2025-06-18")
    body = await legacy.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 1}})
    assert "resultType" not in body["result"] and "_meta" not in body["result"]
    status, discover, _ = await legacy.post(legacy.request("server/discover"))
    assert status == 200 and discover["error"]["code"] == -32601  # discover is a 2026 method


# ---------------------------------------------------------------- the ladder, in the SDK's order


async def test_a_batch_is_an_invalid_request(client: StatelessClient) -> None:
    batch = [client.request("tools/list")]
    await _refused(client, batch, 400, -32600, **{"Mcp-Method": "tools/list"})


async def test_a_posted_response_is_an_invalid_request(client: StatelessClient) -> None:
    await _refused(client, {"jsonrpc": "2.0", "id": "mcpgw-1", "result": {}}, 400, -32600)


async def test_a_notification_at_an_unserved_version_is_refused(client: StatelessClient) -> None:
    notification = {"jsonrpc": "2.0", "method": "notifications/cancelled"}
    error = await _refused(client, notification, 400, -32022, **{"MCP-Protocol-Version": "2099-01-01"})
    assert error["data"]["requested"] == "2099-01-01"


async def test_a_duplicated_routing_header_is_a_header_mismatch(client: StatelessClient) -> None:
    message = client.request("tools/list")
    headers = client.headers(message)
    headers.add("Mcp-Method", "tools/list")
    status, body, _ = await client.post(message, headers)
    assert status == 400 and _error(body)["code"] == -32020


@pytest.mark.parametrize("missing", ["io.modelcontextprotocol/protocolVersion",
                                     "io.modelcontextprotocol/clientCapabilities"])
async def test_an_envelope_without_a_required_key_is_invalid_params(client: StatelessClient, missing: str) -> None:
    message = client.request("tools/list")
    del message["params"]["_meta"][missing]
    error = await _refused(client, message, 400, -32602, **{"MCP-Protocol-Version": MODERN})
    assert missing in error["message"]
    assert (await client.post(message))[1]["id"] == message["id"]  # a refusal echoes the request's id


async def test_a_request_without_meta_is_invalid_params(client: StatelessClient) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    await _refused(client, message, 400, -32602)


async def test_a_non_string_version_never_equals_its_header(client: StatelessClient) -> None:
    message = client.request("tools/list", **{"io.modelcontextprotocol/protocolVersion": 20260728})
    await _refused(client, message, 400, -32020)


@pytest.mark.parametrize(("header", "value"), [("MCP-Protocol-Version", "2025-11-25-not"),
                                               ("Mcp-Method", "TOOLS/CALL"), ("Mcp-Method", ""),
                                               ("Mcp-Name", "calc__multiply"), ("Mcp-Name", "")])
async def test_a_header_that_differs_from_the_body_is_a_header_mismatch(
        client: StatelessClient, header: str, value: str) -> None:
    message = client.request("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}})
    await _refused(client, message, 400, -32020, **{header: value})


async def test_mcp_name_is_read_through_base64_and_surrounding_whitespace(client: StatelessClient) -> None:
    message = client.request("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}})
    encoded = f"=?base64?{base64.b64encode(b'calc__add').decode()}?="
    for value in (encoded, " calc__add\t"):
        status, body, _ = await client.post(message, **{"Mcp-Name": value})
        assert status == 200, body


async def test_an_unsupported_version_names_the_served_ones(client: StatelessClient) -> None:
    message = client.request("tools/list", **{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})
    error = await _refused(client, message, 400, -32022, **{"MCP-Protocol-Version": "2099-01-01"})
    assert error["data"] == {"supported": [*HANDSHAKE_VERSIONS, MODERN], "requested": "2099-01-01"}


async def test_an_unknown_log_level_is_invalid_params(client: StatelessClient) -> None:
    message = client.request("tools/list", **{"io.modelcontextprotocol/logLevel": "loud"})
    await _refused(client, message, 400, -32602)


async def test_a_method_needing_an_undeclared_client_capability_is_refused_naming_it(
        client: StatelessClient, running: RunningGateway) -> None:
    running.app[keys.EXCHANGE].dispatcher.stateless.required["tools/list"] = {"elicitation": {"form": {}}}
    error = await _refused(client, client.request("tools/list"), 400, -32021)
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}
    declared = envelope({"elicitation": {"form": {}, "url": {}}})
    assert (await client.call("tools/list", {"_meta": declared}))["result"]["tools"]


# ---------------------------------------------------------------- Mcp-Param-* against the tool's schema


def _locate(client: StatelessClient, **arguments: Any) -> dict[str, Any]:
    return client.request("tools/call", {"name": "routed__locate", "arguments": arguments})


async def test_param_headers_that_repeat_the_arguments_pass(client: StatelessClient) -> None:
    status, body, _ = await client.post(_locate(client, region="eu", count=2), **{
        "Mcp-Param-Region": "eu", "Mcp-Param-Count": "2.0"})  # integers compare as numbers
    assert status == 200 and body["result"]["content"][0]["text"] == "eu:2:"
    wrapped = f"=?base64?{base64.b64encode('zürich'.encode()).decode()}?="
    status, body, _ = await client.post(_locate(client, region="zürich"), **{"Mcp-Param-Region": wrapped})
    assert status == 200, body


@pytest.mark.parametrize(("arguments", "headers"), [
    ({"region": "eu"}, {}),  # the header is missing
    ({"region": "eu"}, {"Mcp-Param-Region": "us"}),  # it differs
    ({"region": "eu"}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "1"}),  # a header without its argument
    ({"region": "eu", "count": 3}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "4"}),
    ({"region": "eu"}, {"Mcp-Param-Region": "=?base64?not base64?="}),  # a malformed base64 form
])
async def test_param_headers_that_disagree_are_a_header_mismatch(
        client: StatelessClient, arguments: dict[str, Any], headers: dict[str, str]) -> None:
    await _refused(client, _locate(client, **arguments), 400, -32020, **headers)


async def test_a_duplicated_param_header_is_a_header_mismatch(client: StatelessClient) -> None:
    message = _locate(client, region="eu")
    headers = client.headers(message, **{"Mcp-Param-Region": "eu"})
    headers.add("Mcp-Param-Region", "eu")
    status, body, _ = await client.post(message, headers)
    assert status == 400 and _error(body)["code"] == -32020


async def test_param_headers_of_a_tool_without_annotations_are_not_checked(client: StatelessClient) -> None:
    message = client.request("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}})
    status, _, _ = await client.post(message, **{"Mcp-Param-Region": "anything"})
    assert status == 200


async def test_arguments_that_fail_the_schema_are_a_complete_tool_error(client: StatelessClient) -> None:
    result = (await client.call("tools/call", {"name": "calc__add", "arguments": {"a": "x", "b": 1}}))["result"]
    assert result["isError"] is True and result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO_KEY]["name"] == "mcp-gateway"


async def test_an_unknown_tool_is_invalid_params_with_400(client: StatelessClient) -> None:
    await _refused(client, client.request("tools/call", {"name": "nope__x", "arguments": {}}), 400, -32602)


# ---------------------------------------------------------------- what runs before the ladder, as for sessions


async def test_authentication_comes_before_the_ladder(client: StatelessClient) -> None:
    client.token = None
    status, _, headers = await client.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert status == 401 and "WWW-Authenticate" in headers


async def test_an_api_key_works_as_for_sessions(client: StatelessClient) -> None:
    client.token = API_KEY
    assert (await client.call("tools/list"))["result"]["tools"]


async def test_requests_in_flight_beyond_the_tenants_budget_are_refused(gateway: StartGateway) -> None:
    running = await gateway(make_config([stdio_backend("calc")], tenants={"acme": {
        "backends": ["*"], "limits": {"in_flight": 1}}}))
    async with aiohttp.ClientSession() as session:
        client = StatelessClient(session, running.url, make_token("acme"))
        slow = client.request("tools/call", {"name": "calc__slow", "arguments": {"seconds": 1.0, "steps": 1}})
        busy = asyncio.create_task(client.post(slow))
        await asyncio.sleep(0.3)
        status, _, headers = await client.post(client.request("tools/list"))
        assert (status, headers["Retry-After"]) == (429, "1")
        assert (await busy)[0] == 200
        assert (await client.post(client.request("tools/list")))[0] == 200  # the budget is back


async def test_rate_limits_body_limits_origins_and_hosts_apply(client: StatelessClient) -> None:
    big = client.request("tools/call", {"name": "calc__evaluate", "arguments": {"expression": "1" * 5000}})
    assert (await client.post(big))[0] == 413
    assert (await client.post(client.request("tools/list"), Origin="https://evil.example"))[0] == 403
    assert (await client.post(client.request("tools/list"), Host="evil.example"))[0] == 403  # bound to loopback
    client.token = make_token("slow")
    assert (await client.post(client.request("tools/list")))[0] == 200
    status, _, headers = await client.post(client.request("tools/list"))
    assert status == 429 and "Retry-After" in headers


# ---------------------------------------------------------------- prompts and resources at 2026


async def test_prompts_and_resources_at_2026_are_complete_and_an_unknown_uri_is_invalid_params(
        gateway: StartGateway) -> None:
    running = await gateway(make_config([stdio_backend("notes")], tenants={"acme": {"backends": ["*"]}}))
    async with aiohttp.ClientSession() as session:
        client = StatelessClient(session, running.url, make_token("acme"))
        discovered = (await client.call("server/discover"))["result"]["capabilities"]
        assert discovered["prompts"] == {"listChanged": True} and discovered["resources"]["listChanged"] is True
        prompts = (await client.call("prompts/list"))["result"]
        assert prompts["cacheScope"] == "private" and prompts["resultType"] == "complete"
        read = (await client.call("resources/read", {"uri": "notes+notes://index"}))["result"]
        assert (read["resultType"], read["cacheScope"]) == ("complete", "private") and read["contents"]
        assert read["_meta"][SERVER_INFO_KEY]["name"] == "mcp-gateway"
        await _refused(client, client.request("resources/read", {"uri": "notes+notes://nope/1"}), 400, -32602)
        await _refused(client, client.request("resources/read", {"uri": "elsewhere://x"}), 400, -32602)  # no -32002
