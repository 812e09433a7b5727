"""The tasks extension (`io.modelcontextprotocol/tasks`) between 2026 clients and a 2026 backend that serves
it (tasks_backend.py, the official SDK's extension API): a task is created, polled to completion, asked
for input and answered, cancelled; its handle opens for its own principal only; clients that do not
declare the extension never get a task, and sessions have no tasks/* at all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx2
import pytest
from backend_fixtures import RunningBackend, start_http_backend
from conftest import RunningGateway, StartGateway, http_backend_config, make_config, make_token, stdio_backend
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from stateless_client import MCP_HEADERS, StatelessClient

pytestmark = pytest.mark.timeout(90)

TASKS = "io.modelcontextprotocol/tasks"
DECLARED = {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
TENANTS = {"acme": {"backends": ["*"]}, "beta": {"backends": ["t"]}, "globex": {"backends": ["calc"]}}
ASKED = {"ok": {"method": "elicitation/create", "params": {
    "mode": "form", "message": "Go ahead?",
    "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}}


@pytest.fixture
async def backend() -> AsyncIterator[RunningBackend]:
    started = await start_http_backend("tasks", script=Path(__file__).with_name("tasks_backend.py"))
    try:
        yield started
    finally:
        await started.stop()


@pytest.fixture
async def running(backend: RunningBackend, gateway: StartGateway) -> RunningGateway:
    return await gateway(make_config([http_backend_config("t", backend.url, protocol="2026"), stdio_backend("calc")],
                                     tenants=TENANTS))


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def raw(running: RunningGateway, http: aiohttp.ClientSession) -> StatelessClient:
    return StatelessClient(http, running.url, make_token("acme"))


def seen(backend: RunningBackend) -> list[str]:
    """The backend's log of the tasks/* requests it got: `method Mcp-Name=… taskId=…`."""
    return [line for line in backend.stderr_text().splitlines() if line.startswith("tasks/")]


async def task(raw: StatelessClient, method: str, handle: Any, **params: Any) -> tuple[int, Any]:
    """A tasks/* request naming `handle`, with the `Mcp-Name` a conforming client sends."""
    message = raw.request(method, {"taskId": handle, **params}, **DECLARED)
    status, body, _ = await raw.post(message, Mcp_Name=handle if isinstance(handle, str) else "")
    return status, body


async def create(raw: StatelessClient, tool: str, arguments: dict[str, Any] | None = None,
                 **meta: Any) -> dict[str, Any]:
    body = await raw.call("tools/call", {"name": tool, "arguments": arguments or {}}, **{**DECLARED, **meta})
    assert body["result"]["resultType"] == "task", body
    return body["result"]


async def until(raw: StatelessClient, handle: str, status: str) -> dict[str, Any]:
    for _ in range(100):
        code, body = await task(raw, "tasks/get", handle)
        assert code == 200, body
        if body["result"]["status"] == status:
            return body["result"]
        await asyncio.sleep(0.05)
    raise AssertionError(f"task never got {status}: {body}")


async def test_discover_advertises_the_extension_only_to_tenants_that_see_a_tasks_backend(
        running: RunningGateway, http: aiohttp.ClientSession) -> None:
    for tenant, offered in (("acme", True), ("beta", True), ("globex", False)):
        client = StatelessClient(http, running.url, make_token(tenant))
        capabilities = (await client.call("server/discover"))["result"]["capabilities"]
        assert (TASKS in capabilities.get("extensions", {})) is offered, (tenant, capabilities)


async def test_a_task_is_created_and_polled_to_completion_with_gateway_names(
        raw: StatelessClient, backend: RunningBackend) -> None:
    created = await create(raw, "t__slow", {"steps": 3})
    handle = created["taskId"]
    assert handle.startswith("t1.") and created["status"] == "working" and created["ttlMs"] == 60_000
    assert created["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-gateway"
    done = await until(raw, handle, "completed")
    assert done["taskId"] == handle and done["resultType"] == "complete"
    assert done["result"]["content"] == [{"type": "text", "text": "report ready"},
                                         {"type": "resource_link", "uri": "t+memo://report", "name": "report"}]
    read = await raw.call("resources/read", {"uri": "t+memo://report"})
    assert read["result"]["contents"][0]["text"] == "the report"
    backend_id = seen(backend)[-1].split("taskId=")[1]
    assert seen(backend)[-1] == f"tasks/get Mcp-Name={backend_id} taskId={backend_id}"  # its own id, as header too
    assert backend_id not in handle


async def test_a_task_asks_for_input_and_gets_it_through_tasks_update(raw: StatelessClient) -> None:
    handle = (await create(raw, "t__confirm", {"question": "ship it"}))["taskId"]
    asking = await until(raw, handle, "input_required")
    assert asking["inputRequests"] == ASKED and asking["taskId"] == handle
    answers = {"ok": {"action": "accept", "content": {"ok": True}}}
    status, body = await task(raw, "tasks/update", handle, inputResponses=answers)
    assert status == 200 and body["result"]["resultType"] == "complete", body
    done = await until(raw, handle, "completed")
    assert done["result"]["content"] == [{"type": "text", "text": "ship it: True"}]


async def test_a_task_is_cancelled(raw: StatelessClient) -> None:
    handle = (await create(raw, "t__hang"))["taskId"]
    status, body = await task(raw, "tasks/cancel", handle)
    assert status == 200 and body["result"]["resultType"] == "complete", body
    assert (await until(raw, handle, "cancelled"))["taskId"] == handle


async def test_a_client_that_may_be_asked_things_gets_its_task_too(raw: StatelessClient) -> None:
    """Declaring elicitation too puts the call in rounds (transport.rounds): the task comes back the same way."""
    both = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "extensions": {TASKS: {}}}}
    handle = (await create(raw, "t__slow", {"steps": 1}, **both))["taskId"]
    assert (await until(raw, handle, "completed"))["result"]["content"][0]["text"] == "report ready"


async def test_forged_or_foreign_handles_are_unknown_tasks_and_reach_no_backend(
        raw: StatelessClient, running: RunningGateway, http: aiohttp.ClientSession, backend: RunningBackend) -> None:
    handle = (await create(raw, "t__hang"))["taskId"]
    head, payload, tag = handle.split(".")
    tampered = f"{head}.{payload[:-2]}{'A' if payload[-2] != 'A' else 'B'}{payload[-1]}.{tag}"
    before = len(seen(backend))
    others = [StatelessClient(http, running.url, make_token("acme", sub="mallory")),  # another principal
              StatelessClient(http, running.url, make_token("beta"))]  # another tenant that uses the same backend
    attempts = [(raw, tampered), (raw, "t1.e30.AAAA"), (raw, "not-a-handle"),
                (raw, f"v1.{payload}.{tag}"), *((other, handle) for other in others)]
    for client, forged in attempts:
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            status, body = await task(client, method, forged)
            assert status == 400 and body["error"]["code"] == -32602, (forged, method, body)
            assert body["error"]["message"] == "Unknown task"
    status, body = await task(raw, "tasks/get", 42)  # no header can repeat a number: the header rung says so
    assert status == 400 and body["error"]["code"] == -32020, body
    assert len(seen(backend)) == before
    assert (await task(raw, "tasks/cancel", handle))[0] == 200  # the genuine handle still works


async def test_a_client_that_does_not_declare_tasks_never_gets_one(
        raw: StatelessClient, backend: RunningBackend) -> None:
    eager = await raw.post(raw.request("tools/call", {"name": "t__eager", "arguments": {}}))
    assert eager[1]["error"]["code"] == -32603 and "task" in eager[1]["error"]["message"]
    status, body, _ = await raw.post(raw.request("tools/call", {"name": "t__confirm", "arguments": {"question": "q"}}))
    assert status == 400 and body["error"]["code"] == -32021  # the backend's own answer, relayed
    assert body["error"]["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
    at_once = await raw.call("tools/call", {"name": "t__slow", "arguments": {}})
    assert at_once["result"]["content"][0]["text"] == "report ready at once"  # not declared: not declared upstream
    handle = (await create(raw, "t__hang"))["taskId"]
    before = len(seen(backend))
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        message = raw.request(method, {"taskId": handle})
        status, body, _ = await raw.post(message, Mcp_Name=handle)
        assert status == 400 and body["error"]["code"] == -32021, body
        assert body["error"]["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
    assert len(seen(backend)) == before


async def test_any_replica_with_the_key_serves_a_handle_and_none_without_it(
        backend: RunningBackend, gateway: StartGateway, http: aiohttp.ClientSession) -> None:
    """Nothing is held for a task: a replica sharing the key (`mrtr.secret`, or Redis's) opens its handles."""
    def replica(secret: str) -> Any:
        return gateway(make_config([http_backend_config("t", backend.url, protocol="2026")], mrtr={"secret": secret}))
    first, second, stranger = [await replica(secret) for secret in ("k" * 32, "k" * 32, "s" * 32)]
    made_here = StatelessClient(http, first.url, make_token("acme"))
    handle = (await create(made_here, "t__slow", {"steps": 1}))["taskId"]
    polled_there = StatelessClient(http, second.url, make_token("acme"))
    assert (await until(polled_there, handle, "completed"))["taskId"] == handle
    status, body = await task(StatelessClient(http, stranger.url, make_token("acme")), "tasks/get", handle)
    assert status == 400 and body["error"]["message"] == "Unknown task"


async def test_the_sdk_client_which_takes_no_tasks_gets_its_results_in_place(running: RunningGateway) -> None:
    """The official SDK 2.3.0 client (`mode="auto"`, at 2026) has no tasks: it never declares them, never gets one."""
    headers = {"Authorization": f"Bearer {make_token('acme')}"}
    async with (httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
                Client(streamable_http_client(running.url, http_client=http), mode="auto") as client):
        assert client.protocol_version == "2026-07-28"
        assert TASKS in (client.server_capabilities.extensions or {})  # offered; the SDK does not take it up
        assert {"t__slow", "t__confirm", "t__add"} <= {tool.name for tool in (await client.list_tools()).tools}
        slow = await client.call_tool("t__slow", {"steps": 1})
        assert slow.content[0].text == "report ready at once"  # type: ignore[union-attr]
        assert (await client.call_tool("t__add", {"a": 2, "b": 3})).structured_content == {"result": 5}


async def test_removed_task_methods_are_unknown(raw: StatelessClient) -> None:
    handle = (await create(raw, "t__slow", {"steps": 1}))["taskId"]
    for method in ("tasks/list", "tasks/result"):
        status, body, _ = await raw.post(raw.request(method, {"taskId": handle}, **DECLARED), Mcp_Name=handle)
        assert status == 404 and body["error"]["code"] == -32601, body


async def test_mcp_name_must_repeat_the_handle(raw: StatelessClient, backend: RunningBackend) -> None:
    handle = (await create(raw, "t__slow", {"steps": 1}))["taskId"]
    before = len(seen(backend))
    message = raw.request("tasks/get", {"taskId": handle}, **DECLARED)
    for header in ("another", ""):
        status, body, _ = await raw.post(message, Mcp_Name=header)
        assert status == 400 and body["error"]["code"] == -32020, body
    assert len(seen(backend)) == before


async def test_a_session_has_no_task_methods(running: RunningGateway, http: aiohttp.ClientSession) -> None:
    """No backend of acme serves 2025-11-25 tasks (test_tasks_session.py): its sessions are offered none."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {make_token('acme')}"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"extensions": {TASKS: {}}},
        "clientInfo": {"name": "s", "version": "1"}}}
    async with http.post(running.url, json=hello, headers=headers) as response:
        session = response.headers["Mcp-Session-Id"]
        assert "extensions" not in (await response.json())["result"]["capabilities"]
    headers["Mcp-Session-Id"] = session
    for method in ("tasks/get", "tasks/cancel", "tasks/list"):
        message = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {"taskId": "x"}}
        async with http.post(running.url, json=message, headers=headers) as response:
            assert (await response.json())["error"]["code"] == -32601
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t__eager", "arguments": {}}}
    async with http.post(running.url, json=call, headers=headers) as response:
        assert (await response.json())["error"]["code"] == -32603  # a task it did not ask for (none can be)
