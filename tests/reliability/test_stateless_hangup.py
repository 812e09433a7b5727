"""A 2026-07-28 client that closes its stream cancels the call: the backend is told, over HTTP and over stdio."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest
from conftest import StartGateway, http_backend_config, make_config, make_token
from stateless_client import StatelessClient

from reliability.conftest import GARBAGE_STDIO, RunningMisbehaving
from reliability.test_deadlines_and_cancellation import until

pytestmark = pytest.mark.timeout(120)


async def hang_up_during(url: str, tool: str, seconds: float = 0.5) -> None:
    """POST a 2026 tools/call (id 1) and go away before the reply (the client's own timeout closes the socket)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds)) as session:
        client = StatelessClient(session, url, make_token("acme"))
        message = client.request("tools/call", {"name": tool, "arguments": {}})
        with pytest.raises(TimeoutError):
            await client.post(message)


async def test_closing_the_stream_cancels_the_http_backend_call(
        misbehaving: RunningMisbehaving, gateway: StartGateway) -> None:
    running = await gateway(make_config([http_backend_config("bad", misbehaving.url, timeout_seconds=30)]))
    await hang_up_during(running.url, "bad__hang")
    backend = misbehaving.backend
    assert await until(lambda: bool(backend.cancelled)), "the backend was never told"
    assert backend.cancelled == backend.call_ids["hang"]


async def test_closing_the_stream_cancels_the_stdio_backend_call(gateway: StartGateway) -> None:
    backend = {"name": "junk", "transport": "stdio", "command": GARBAGE_STDIO, "timeout_seconds": 30}
    running = await gateway(make_config([backend]))
    await hang_up_during(running.url, "junk__hang")
    async with aiohttp.ClientSession() as session:
        client = StatelessClient(session, running.url, make_token("acme"))

        async def cancelled() -> list[Any]:
            body = await client.call("tools/call", {"name": "junk__cancelled", "arguments": {}})
            return list(body["result"]["structuredContent"]["cancelled"])

        deadline = time.monotonic() + 10
        seen = await cancelled()
        while not seen and time.monotonic() < deadline:  # the child can only be asked, not awaited
            await asyncio.sleep(0.1)
            seen = await cancelled()
    assert len(seen) == 1


async def test_a_posted_cancel_notification_cancels_nothing(
        misbehaving: RunningMisbehaving, gateway: StartGateway) -> None:
    """2026 cancels by closing the stream; a posted notifications/cancelled is acknowledged and dropped."""
    running = await gateway(make_config([http_backend_config("bad", misbehaving.url, timeout_seconds=30)]))
    backend = misbehaving.backend
    hanging = asyncio.create_task(hang_up_during(running.url, "bad__hang", seconds=2.0))
    assert await until(lambda: backend.calls["hang"] == 1)
    async with aiohttp.ClientSession() as session:
        client = StatelessClient(session, running.url, make_token("acme"))
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        assert (await client.post(cancel))[0] == 202
    await asyncio.sleep(0.3)
    assert backend.cancelled == []  # still running: the notification named nothing it may cancel
    await hanging
    assert await until(lambda: bool(backend.cancelled))
