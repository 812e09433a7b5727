"""SIGTERM on `mcp-gateway serve`: not ready at once, calls in flight finish, then a clean exit."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from lifecycle.processes import (
    MCP_HEADERS,
    GatewayProcess,
    free_port,
    gateway_config,
    http_status,
    initialize,
    sse_data,
    wait_gone,
)

pytestmark = [pytest.mark.timeout(90), pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")]


class SlowCall:
    """A `calc__slow` call with a progress token: its SSE stream shows when it is under way."""

    def __init__(self, session: aiohttp.ClientSession, url: str, session_id: str, seconds: float, steps: int) -> None:
        self.session = session
        self.url = url
        self.headers = {**MCP_HEADERS, "Mcp-Session-Id": session_id}
        self.body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                     "params": {"name": "calc__slow", "arguments": {"seconds": seconds, "steps": steps},
                                "_meta": {"progressToken": "slow"}}}
        self.started = asyncio.Event()
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> Any:
        async with self.session.post(self.url, data=orjson.dumps(self.body), headers=self.headers) as response:
            assert response.status == 200
            async for message in _sse_messages(response):
                if message.get("method") == "notifications/progress":
                    self.started.set()
                elif message.get("id") == 7:
                    return message
        raise AssertionError("the stream ended without a response")


async def _sse_messages(response: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    buffer = b""
    async for chunk in response.content.iter_any():
        buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            data = sse_data(block)
            if isinstance(data, dict):
                yield data


async def _read_get_stream(session: aiohttp.ClientSession, url: str, session_id: str) -> int:
    """Open the session's GET stream and read it to its end; returns the bytes read."""
    headers = {"Accept": "text/event-stream", "Authorization": MCP_HEADERS["Authorization"],
               "Mcp-Session-Id": session_id}
    async with session.get(url, headers=headers) as response:
        assert response.status == 200
        return len(await response.read())  # raises on an unclean end (ClientPayloadError)


async def _until_status(url: str, wanted: int | None, timeout: float) -> float:  # noqa: ASYNC109
    """Poll until a GET on `url` gives `wanted` (None: refused); returns when, on the monotonic clock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await http_status(url, timeout=1.0) == wanted:
            return time.monotonic()
        await asyncio.sleep(0.05)
    pytest.fail(f"{url} never answered {wanted} within {timeout:g}s")


async def _serving(start_gateway: Any, tmp_path: Path, grace: float) -> tuple[GatewayProcess, list[int]]:
    port = free_port()
    gateway = await start_gateway(gateway_config(tmp_path, port=port, grace=grace), port)
    children = gateway.tree()
    assert children, "the calc backend should run as a child of the gateway"
    return gateway, children


async def test_sigterm_lets_the_call_in_flight_finish_and_stops_everything(start_gateway: Any, tmp_path: Path) -> None:
    grace = 10.0
    gateway, children = await _serving(start_gateway, tmp_path, grace)
    async with aiohttp.ClientSession() as session:
        session_id = await initialize(session, gateway.url())
        stream = asyncio.create_task(_read_get_stream(session, gateway.url(), session_id))
        call = SlowCall(session, gateway.url(), session_id, seconds=3, steps=3)
        await asyncio.wait_for(call.started.wait(), 10)

        gateway.signal(signal.SIGTERM)
        signalled = time.monotonic()
        await _until_status(gateway.url("/readyz"), 503, timeout=2)  # not ready at once, still listening

        reply = await asyncio.wait_for(call.task, grace)
        assert reply["result"]["isError"] is False
        assert reply["result"]["content"][0]["text"] == "slept 3s in 3 steps"
        refused_at = await _until_status(gateway.url("/healthz"), None, timeout=grace)
        assert refused_at - signalled < grace
        await asyncio.wait_for(stream, 5)  # the GET stream was ended, cleanly

    await gateway.expect_exit(0)
    assert await wait_gone(children) == [], "stdio children must not outlive the gateway"
    stopped = gateway.event("gateway_stopped")
    assert stopped["exit_status"] == 0 and stopped["reason"] == "SIGTERM"
    assert stopped["completed_while_draining"] >= 1 and stopped["requests_cancelled"] == 0


async def test_new_connections_are_refused_once_the_grace_is_over(start_gateway: Any, tmp_path: Path) -> None:
    grace = 2.0
    gateway, children = await _serving(start_gateway, tmp_path, grace)
    async with aiohttp.ClientSession() as session:
        session_id = await initialize(session, gateway.url())
        call = SlowCall(session, gateway.url(), session_id, seconds=20, steps=20)
        await asyncio.wait_for(call.started.wait(), 10)

        gateway.signal(signal.SIGTERM)
        signalled = time.monotonic()
        refused_at = await _until_status(gateway.url("/healthz"), None, timeout=grace + 2)
        assert refused_at - signalled >= grace - 0.5  # the listener stayed open for the call...
        assert refused_at - signalled < grace + 1.0  # ...but not past the grace
        with pytest.raises((aiohttp.ClientError, AssertionError)):
            await asyncio.wait_for(call.task, 5)  # cut off: the gateway does not wait any longer

    await gateway.expect_exit(0)
    assert await wait_gone(children) == []
    assert gateway.event("gateway_stopped")["requests_cancelled"] == 1


async def test_a_second_signal_forces_the_exit(start_gateway: Any, tmp_path: Path) -> None:
    gateway, children = await _serving(start_gateway, tmp_path, grace=30.0)
    async with aiohttp.ClientSession() as session:
        session_id = await initialize(session, gateway.url())
        call = SlowCall(session, gateway.url(), session_id, seconds=20, steps=20)
        await asyncio.wait_for(call.started.wait(), 10)
        gateway.signal(signal.SIGTERM)
        await _until_status(gateway.url("/readyz"), 503, timeout=2)
        gateway.signal(signal.SIGTERM)
        started = time.monotonic()
        await gateway.expect_exit(1, timeout=10)
        assert time.monotonic() - started < 5  # not the 30 s grace
        call.task.cancel()
        await asyncio.gather(call.task, return_exceptions=True)
    assert await wait_gone(children) == []
    assert gateway.event("gateway_stopped")["forced"] is True


async def test_an_idle_gateway_stops_at_once_on_sigint(start_gateway: Any, tmp_path: Path) -> None:
    gateway, children = await _serving(start_gateway, tmp_path, grace=20.0)
    started = time.monotonic()
    gateway.signal(signal.SIGINT)
    await gateway.expect_exit(0)
    assert time.monotonic() - started < 5
    assert await wait_gone(children) == []
    assert gateway.event("gateway_stopped")["reason"] == "SIGINT"
