"""Deadlines that progress extends (within a hard cap), and clients that hang up cancelling the backend's work."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from conftest import MCP_HEADERS, RawClient, StartGateway, http_backend_config, make_config, make_token
from lifecycle.processes import GatewayProcess, free_port, gateway_config
from lifecycle.processes import initialize as process_initialize

from reliability.conftest import GARBAGE_STDIO, RunningMisbehaving

pytestmark = pytest.mark.timeout(120)


def sse_messages(raw: bytes) -> list[Any]:
    """The JSON messages of an SSE body."""
    blocks = raw.replace(b"\r\n", b"\n").split(b"\n\n")
    data = [b"\n".join(line[5:].lstrip() for line in b.split(b"\n") if line.startswith(b"data:")) for b in blocks]
    return [orjson.loads(d) for d in data if d]


async def progress_call(client: RawClient, steps: int, interval: float, *, progress: bool) -> tuple[Any, float]:
    params: dict[str, Any] = {"name": "bad__progress", "arguments": {"steps": steps, "interval": interval}}
    if progress:
        params["_meta"] = {"progressToken": "p-1"}
    started = time.monotonic()
    status, body, _ = await client.post(client.request("tools/call", params))
    assert status == 200
    messages = sse_messages(body) if isinstance(body, bytes) else [body]
    return messages, time.monotonic() - started


async def until(predicate: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:  # noqa: ASYNC110 - a backend's state: polled
        await asyncio.sleep(0.05)
    return predicate()


async def started_gateway(gateway: StartGateway, raw_client: Any, backend: dict[str, Any]) -> RawClient:
    running = await gateway(make_config([backend]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    return client


async def test_progress_extends_the_deadline_of_a_long_call(
    misbehaving: RunningMisbehaving, gateway: StartGateway, raw_client: Any
) -> None:
    client = await started_gateway(gateway, raw_client, http_backend_config("bad", misbehaving.url, timeout_seconds=1))
    messages, seconds = await progress_call(client, steps=6, interval=0.4, progress=True)  # 2.4 s, news every 0.4 s
    assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2, 3, 4, 5, 6]
    assert messages[-1]["result"]["content"][0]["text"] == "6 steps"
    assert seconds > 2.0


async def test_the_same_call_without_progress_times_out(
    misbehaving: RunningMisbehaving, gateway: StartGateway, raw_client: Any
) -> None:
    client = await started_gateway(gateway, raw_client, http_backend_config("bad", misbehaving.url, timeout_seconds=1))
    messages, seconds = await progress_call(client, steps=6, interval=0.4, progress=False)
    assert messages[-1]["error"]["data"]["reason"] == "timeout"
    assert seconds < 2.0


async def test_the_hard_cap_ends_a_call_that_keeps_reporting_progress(
    misbehaving: RunningMisbehaving, gateway: StartGateway, raw_client: Any
) -> None:
    config = http_backend_config("bad", misbehaving.url, timeout_seconds=1, max_call_seconds=1.5)
    client = await started_gateway(gateway, raw_client, config)
    messages, seconds = await progress_call(client, steps=20, interval=0.2, progress=True)
    assert messages[-1]["error"]["data"]["reason"] == "timeout"
    assert 1.4 < seconds < 4.0
    backend = misbehaving.backend
    assert await until(lambda: backend.cancelled == backend.call_ids["progress"])  # told to stop


async def hang_up_during(url: str, token: str, session_id: str, tool: str,
                         reached: Callable[[], bool] | None = None) -> None:
    """POST a tools/call and go away before the reply: once `reached()` says the backend has the call (a loaded
    machine may take longer than any fixed wait to pass it on), else after half a second."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id}
    body = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": tool, "arguments": {}}}

    async def post() -> None:
        async with session.post(url, data=orjson.dumps(body), headers=headers) as response:
            await response.read()

    async with aiohttp.ClientSession() as session:
        posting = asyncio.create_task(post())
        if reached is None:
            await asyncio.sleep(0.5)
        else:
            assert await until(reached), "the call never reached the backend"
        assert not posting.done(), "the call was answered before the client went away"
        posting.cancel()  # the connection closes with the unread reply
        with contextlib.suppress(asyncio.CancelledError):
            await posting


async def test_a_client_that_hangs_up_cancels_the_http_backend_call(
    misbehaving: RunningMisbehaving, gateway: StartGateway, raw_client: Any
) -> None:
    running = await gateway(make_config([http_backend_config("bad", misbehaving.url, timeout_seconds=30)]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    assert client.session_id is not None
    backend = misbehaving.backend
    await hang_up_during(running.url, make_token("acme"), client.session_id, "bad__hang",
                         reached=lambda: bool(backend.call_ids.get("hang")))
    assert await until(lambda: bool(backend.cancelled)), "the backend was never told"
    assert backend.cancelled == backend.call_ids["hang"]  # the upstream id, not the client's 77


async def test_a_client_that_hangs_up_cancels_the_stdio_backend_call(gateway: StartGateway, raw_client: Any) -> None:
    backend = {"name": "junk", "transport": "stdio", "command": GARBAGE_STDIO, "timeout_seconds": 30}
    running = await gateway(make_config([backend]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    assert client.session_id is not None
    await hang_up_during(running.url, make_token("acme"), client.session_id, "junk__hang")

    async def cancelled() -> list[Any]:
        body = await client.call("tools/call", {"name": "junk__cancelled", "arguments": {}})
        return list(body["result"]["structuredContent"]["cancelled"])

    deadline = time.monotonic() + 10
    seen = await cancelled()
    while not seen and time.monotonic() < deadline:  # the child can only be asked, not awaited
        await asyncio.sleep(0.1)
        seen = await cancelled()
    assert len(seen) == 1


async def test_the_served_gateway_cancels_too(misbehaving: RunningMisbehaving, tmp_path: Path) -> None:
    """`mcp-gateway serve` (not the test server) must cancel handlers of clients that hang up."""
    port = free_port()
    config = gateway_config(tmp_path, port=port,
                            backends=[http_backend_config("bad", misbehaving.url, timeout_seconds=30)])
    process = await GatewayProcess.start(config, port)
    try:
        await process.wait_ready()
        async with aiohttp.ClientSession() as session:
            session_id = await process_initialize(session, process.url())
        api_key = "lifecycle-test-key"  # gateway_config's key (tenant acme)
        await hang_up_during(process.url(), api_key, session_id, "bad__hang",
                             reached=lambda: bool(misbehaving.backend.call_ids.get("hang")))
        assert await until(lambda: bool(misbehaving.backend.cancelled)), process.output()
    finally:
        await process.stop()
