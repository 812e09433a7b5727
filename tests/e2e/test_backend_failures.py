"""Dead, slow and crashing backends: clean errors, stale tools, recovery without a restart."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest
from backend_fixtures import StartBackend
from conftest import (
    RawClient,
    StartGateway,
    http_backend_config,
    make_config,
    make_token,
    sdk_client,
    stdio_backend,
)

from gateway import keys

pytestmark = pytest.mark.timeout(90)


async def _names(client: RawClient) -> set[str]:
    return {t["name"] for t in (await client.call("tools/list"))["result"]["tools"]}


async def _refresh(running: Any) -> None:
    await running.app[keys.CATALOGUE].refresh_all()


async def test_a_killed_backend_keeps_listing_until_stale_then_recovers(
    http_backend: StartBackend, gateway: StartGateway, raw_client: Any
) -> None:
    notes = await http_backend("notes")
    config = make_config([http_backend_config("notes", notes.url, timeout_seconds=5), stdio_backend("calc")],
                         catalogue={"max_stale_seconds": 6, "refresh_seconds": 3600})
    running = await gateway(config)
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    stopped = time.monotonic()
    await notes.stop()  # its server waits for the gateway's listen stream to close: a second or two
    await _refresh(running)
    assert "notes__list_notes" in await _names(client)  # stale but still listed

    body = await client.call("tools/call", {"name": "notes__list_notes", "arguments": {}})
    assert body["error"]["code"] == -32603
    assert body["error"]["data"] == {"backend": "notes", "reason": "unavailable"}
    assert "notes" in body["error"]["message"]
    calc = await client.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 2}})
    assert calc["result"]["isError"] is False

    await asyncio.sleep(max(0.0, stopped + 6.1 - time.monotonic()))
    await _refresh(running)
    assert not any(n.startswith("notes__") for n in await _names(client))  # dropped once stale

    await notes.start()  # same port
    await _refresh(running)
    assert "notes__list_notes" in await _names(client)
    body = await client.call("tools/call", {"name": "notes__list_notes", "arguments": {}})
    assert body["result"]["isError"] is False


async def test_a_backend_that_is_down_at_start_does_not_stop_the_others(
    gateway: StartGateway, raw_client: Any
) -> None:
    config = make_config([http_backend_config("dead", "http://127.0.0.1:9/mcp", timeout_seconds=2),
                          stdio_backend("calc")])
    running = await gateway(config)
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    names = await _names(client)
    assert "calc__add" in names
    assert not any(n.startswith("dead__") for n in names)


async def test_a_slow_call_times_out_with_reason_timeout(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc", timeout_seconds=0.5)]))
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    body = await client.call("tools/call", {"name": "calc__slow", "arguments": {"seconds": 5, "steps": 1}})
    assert body["error"]["code"] == -32603
    assert body["error"]["data"] == {"backend": "calc", "reason": "timeout"}
    ok = await client.call("tools/call", {"name": "calc__add", "arguments": {"a": 2, "b": 2}})
    assert ok["result"]["structuredContent"] == {"result": 4.0}


async def test_a_crashed_stdio_child_is_restarted(gateway: StartGateway, raw_client: Any) -> None:
    running = await gateway(make_config([stdio_backend("calc", circuit={"cooldown_seconds": 0.3})]))
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    upstream = running.app[keys.POOL].get("calc")
    pid = upstream.pid  # type: ignore[attr-defined]
    os.kill(pid, signal.SIGKILL)
    for _ in range(100):  # the restart backoff starts small; bounded wait
        body = await client.call("tools/call", {"name": "calc__add", "arguments": {"a": 1, "b": 1}})
        if "result" in body:
            break
        assert body["error"]["data"]["reason"] in ("unavailable", "circuit_open")  # the breaker may open
        await asyncio.sleep(0.1)
    assert body["result"]["structuredContent"] == {"result": 2.0}
    assert upstream.pid != pid  # type: ignore[attr-defined]


async def test_concurrent_calls_through_one_stdio_child_each_get_their_own_answer(
    gateway: StartGateway
) -> None:
    running = await gateway(make_config([stdio_backend("calc")]))
    async with sdk_client(running.url, make_token("acme")) as client:
        results = await asyncio.gather(*(client.call_tool("calc__multiply", {"a": i, "b": 3}) for i in range(60)))
    assert [r.structured_content for r in results] == [{"result": float(i * 3)} for i in range(60)]


async def test_pagination_drains_the_backend_and_pages_the_gateway(
    gateway: StartGateway, raw_client: Any
) -> None:
    config = make_config([stdio_backend("catalog", "--tools", "25", "--page-size", "10")],
                         catalogue={"page_size": 7})
    running = await gateway(config)
    client = raw_client(running.url, make_token("acme"))
    await client.initialize()
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        result = (await client.call("tools/list", {"cursor": cursor} if cursor else {}))["result"]
        names += [t["name"] for t in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert pages == 4
    assert names == [f"catalog__tool_{i:03d}" for i in range(25)]


async def test_the_sdk_client_follows_gateway_cursors(gateway: StartGateway) -> None:
    config = make_config([stdio_backend("catalog", "--tools", "25", "--page-size", "10")],
                         catalogue={"page_size": 7})
    running = await gateway(config)
    async with sdk_client(running.url, make_token("acme")) as client:
        first = await client.list_tools()
        second = await client.list_tools(cursor=first.next_cursor)
    assert len(first.tools) == 7 and first.next_cursor
    assert second.tools[0].name == "catalog__tool_007"
