"""A client's notifications/cancelled stops its own request, and the backend is told."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import pytest
from backend_fixtures import REPO_ROOT
from conftest import RawClient, StartGateway, make_config, make_token, stdio_backend

pytestmark = pytest.mark.timeout(60)

SCRIPTED = REPO_ROOT / "tests" / "upstream" / "scripted_stdio_server.py"


@pytest.fixture
async def client(gateway: StartGateway, raw_client: Any) -> RawClient:
    running = await gateway(make_config([stdio_backend("calc")]))
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    return client


def _slow_call(client: RawClient, seconds: float, **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "calc__slow", "arguments": {"seconds": seconds, "steps": 1}}
    if meta:
        params["_meta"] = meta
    return client.request("tools/call", params)


async def _cancel_soon(client: RawClient, request_id: int) -> None:
    await asyncio.sleep(0.5)
    status, _, _ = await client.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                      "params": {"requestId": request_id, "reason": "user"}})
    assert status == 202


async def test_a_cancelled_call_ends_at_once_without_a_response(client: RawClient) -> None:
    call = _slow_call(client, 10)
    started = time.monotonic()
    (status, body, _), _ = await asyncio.gather(client.post(call), _cancel_soon(client, call["id"]))
    assert (status, body) == (202, b"")
    assert time.monotonic() - started < 5
    ok = await client.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}})
    assert ok["result"]["structuredContent"] == {"result": 3.0}


async def test_a_cancelled_streamed_call_ends_its_stream_without_a_response(client: RawClient) -> None:
    call = _slow_call(client, 10, progressToken="p1")
    started = time.monotonic()
    (status, body, _), _ = await asyncio.gather(client.post(call), _cancel_soon(client, call["id"]))
    assert status == 200
    assert b'"result"' not in body and b'"error"' not in body
    assert time.monotonic() - started < 5


async def test_a_cancel_for_an_unknown_request_is_ignored(client: RawClient) -> None:
    status, _, _ = await client.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                      "params": {"requestId": 12345}})
    assert status == 202
    assert (await client.call("ping"))["result"] == {}


async def test_another_session_cannot_cancel_my_request(client: RawClient, raw_client: Any) -> None:
    other = raw_client(client.url, make_token("acme"))
    await other.initialize()
    call = _slow_call(client, 1.0)
    (status, body, _), _ = await asyncio.gather(client.post(call), _cancel_soon(other, call["id"]))
    assert status == 200
    assert body["result"]["isError"] is False


async def test_the_backend_is_told_when_the_client_cancels(gateway: StartGateway, raw_client: Any) -> None:
    scripted = {"name": "odd", "transport": "stdio", "command": [sys.executable, str(SCRIPTED)]}
    running = await gateway(make_config([scripted]))
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    call = client.request("tools/call", {"name": "odd__hang", "arguments": {}})
    (status, _, _), _ = await asyncio.gather(client.post(call), _cancel_soon(client, call["id"]))
    assert status == 202
    told = await client.call("tools/call", {"name": "odd__cancelled", "arguments": {}})
    assert len(told["result"]["cancelled"]) == 1  # the backend's own id for the call, not the client's
