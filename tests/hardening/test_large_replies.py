"""Issue 30, item 3: large replies cost what they weigh, and no tenant can pin the gateway's memory.

A gateway process with the blob backend (an SDK server whose tool returns as many bytes as asked
for, twice: content and structuredContent) and clients that ask for 8 MB and never read it.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import aiohttp
import orjson
import pytest
from lifecycle.processes import calc_backend

from hardening.helpers import (
    ATTACKER_KEY,
    LEGIT_KEY,
    headers,
    initialize,
    rss_mib,
    socket_count,
    until,
)
from hardening.test_connections import BLOB_BACKEND, _ask_and_never_read

pytestmark = pytest.mark.timeout(180)

HALF = 4 * 1024 * 1024
"""What the blob tool is asked for: its text comes back twice, an 8 MB reply."""
TENANTS = {"acme": {"backends": ["*"], "limits": {"buffered_bytes": 16_000_000}}, "globex": {"backends": ["*"]}}


async def _post(http: aiohttp.ClientSession, url: str, key: str, session: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, data=orjson.dumps(body), headers=headers(key, **{"Mcp-Session-Id": session})) as reply:
        raw = await reply.read()
        return reply.status, orjson.loads(raw) if reply.content_type == "application/json" else raw


def _blob_call(size: int, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "blob__blob", "arguments": {"size": size}, **params}}


async def test_20_clients_not_reading_8_mb_replies_hold_about_one_copy_each(served: Any) -> None:
    # A fixed mmap threshold returns freed 8 MB buffers to the system, so RSS shows what is held.
    gateway = await served(server={"write_timeout_seconds": 60.0}, backends=[calc_backend(), BLOB_BACKEND],
                           env={"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)})
    async with aiohttp.ClientSession() as http:
        session = await initialize(http, gateway.url(), ATTACKER_KEY)
        status, body = await _post(http, gateway.url(), ATTACKER_KEY, session, _blob_call(HALF))  # warm, read
        assert status == 200 and len(body["result"]["content"][0]["text"]) == HALF
    baseline_sockets, before = socket_count(gateway.pid), rss_mib(gateway.pid)
    sockets = [await _ask_and_never_read(gateway.port, session, HALF) for _ in range(20)]
    try:
        await until(lambda: socket_count(gateway.pid) >= baseline_sockets + 20, 10, every=0.05)
        payload = 20 * 2 * HALF / 2**20
        peak = before
        # every reply written (the one child answers one at a time) and held: at least the payload more
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and peak - before < 0.95 * payload:
            peak = max(peak, rss_mib(gateway.pid))
            await asyncio.sleep(0.1)
        for _ in range(10):  # and a second more, held
            peak = max(peak, rss_mib(gateway.pid))
            await asyncio.sleep(0.1)
        assert 0.95 * payload <= peak - before <= 1.5 * payload, (before, peak, payload)  # the issue saw 2.5 times
    finally:
        for sock in sockets:
            sock.close()


async def test_a_tenant_past_its_buffered_bytes_is_refused_while_another_is_served(served: Any) -> None:
    gateway = await served(server={"write_timeout_seconds": 60.0}, backends=[calc_backend(), BLOB_BACKEND],
                           tenants=TENANTS)
    url = gateway.url()
    async with aiohttp.ClientSession() as http:
        attacker, legit = await initialize(http, url, ATTACKER_KEY), await initialize(http, url, LEGIT_KEY)
        # 5 x 8 MB unread: over its 16 MB even if the kernel's send buffers took 4 MB of each
        sockets: list[socket.socket] = [await _ask_and_never_read(gateway.port, attacker, HALF) for _ in range(5)]
        try:
            refused: tuple[int, Any] = (0, None)

            async def attacker_refused() -> bool:
                nonlocal refused
                refused = await _post(http, url, ATTACKER_KEY, attacker, _blob_call(10))
                return refused[0] == 429

            assert await _eventually(attacker_refused, 30), refused
            assert refused[1]["error"]["data"] == {"reason": "limit", "limit": "buffered_bytes"}
            for _ in range(3):  # the other tenant's calls, large ones too, are served all along
                status, body = await _post(http, url, LEGIT_KEY, legit, _blob_call(HALF))
                assert status == 200 and len(body["result"]["content"][0]["text"]) == HALF
        finally:
            for sock in sockets:
                sock.close()

        async def attacker_served() -> bool:
            return (await _post(http, url, ATTACKER_KEY, attacker, _blob_call(10)))[0] == 200

        assert await _eventually(attacker_served, 10)  # its clients went away: what they held is released


async def test_a_large_reply_arrives_whole_as_json_and_as_an_event_stream(served: Any) -> None:
    gateway = await served(backends=[calc_backend(), BLOB_BACKEND], tenants=TENANTS)
    async with aiohttp.ClientSession() as http:
        session = await initialize(http, gateway.url(), LEGIT_KEY)
        status, body = await _post(http, gateway.url(), LEGIT_KEY, session, _blob_call(HALF))
        assert status == 200 and body["result"]["structuredContent"] == {"result": "x" * HALF}
        # a progress token turns the reply into a stream; the event goes out in slices
        status, raw = await _post(http, gateway.url(), LEGIT_KEY, session,
                                  _blob_call(HALF, _meta={"progressToken": "p"}))
        data = [line for line in raw.split(b"\n") if line.startswith(b"data: ")]
        assert status == 200 and len(data) == 1
        assert orjson.loads(data[0][len(b"data: "):])["result"]["structuredContent"] == {"result": "x" * HALF}


async def _eventually(check: Any, timeout: float) -> bool:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)
    return True
