"""Soak: many mixed requests from 64 concurrent clients of several tenants, through a served gateway.

The gateway runs as `python -m gateway serve` and forwards to the benchmark's stub backend
(bench/stub_backend.py, three backends in one process). Every request must be answered
exactly once, with its own id and its own tenant's data, with no unexpected error, and the
gateway's memory must stay flat after warm-up. MCPGW_SOAK_REQUESTS sets the request count
(default 50,000); the test is not skipped, so `make test` runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from lifecycle.processes import REPO_ROOT, GatewayProcess, free_port, gateway_config

from reliability.conftest import rss_bytes

pytestmark = [pytest.mark.soak, pytest.mark.timeout(900)]

REQUESTS = int(os.environ.get("MCPGW_SOAK_REQUESTS", "50000"))
CLIENTS = 64
WARM_UP = 0.2  # share of the requests after which memory must stay flat
MEMORY_GROWTH_LIMIT = 12 * 1024 * 1024  # observed: well under 1 MiB; a 300-byte-per-request leak shows
STUB_TOOLS = 5
MIX = ("call",) * 10 + ("list",) * 4 + ("ping",) * 3 + ("notify",) * 3
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TENANTS: dict[str, dict[str, Any]] = {
    "t0": {"backends": ["s0", "s1"]},
    "t1": {"backends": ["s1", "s2"], "tools": {"deny": ["s1__echo1_4"]}},
    "t2": {"backends": ["*"]},
    "t3": {"backends": ["s2"], "tools": {"allow": ["s2__echo2_0", "s2__echo2_1"]}},
}


def tenant_tools(tenant: str) -> list[str]:
    """What `tenant` may see: its backends' stub tools, after its allow/deny lists."""
    policy = TENANTS[tenant]
    backends = ["s0", "s1", "s2"] if policy["backends"] == ["*"] else policy["backends"]
    names = [f"{b}__echo{b[1]}_{i}" for b in backends for i in range(STUB_TOOLS)]
    allow, deny = policy.get("tools", {}).get("allow"), policy.get("tools", {}).get("deny", [])
    return [n for n in names if (allow is None or n in allow) and n not in deny]


def api_key(tenant: str) -> str:
    return f"soak-key-{tenant}"


@dataclass
class Tally:
    answered: int = 0
    problems: list[str] = field(default_factory=list)
    rss: list[tuple[int, int]] = field(default_factory=list)  # (requests answered, gateway RSS bytes)

    def problem(self, text: str) -> None:
        if len(self.problems) < 20:
            self.problems.append(text[:300])
        else:
            self.problems[-1] = f"... and more (last: {text[:200]})"


class SoakClient:
    """One MCP session of one tenant, sending its share of the mix one request at a time."""

    def __init__(self, http: aiohttp.ClientSession, url: str, index: int, tally: Tally) -> None:
        self.http, self.url, self.index, self.tally = http, url, index, tally
        self.tenant = f"t{index % len(TENANTS)}"
        self.tools = tenant_tools(self.tenant)
        self.headers = {**HEADERS, "Authorization": f"Bearer {api_key(self.tenant)}"}

    async def start(self) -> None:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "soak", "version": "1"}}
        async with self.http.post(self.url, data=orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                                              "params": params}), headers=self.headers) as response:
            assert response.status == 200, await response.text()
            self.headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"}, expect=None)

    async def run(self, count: int) -> None:
        for seq in range(count):
            await getattr(self, MIX[(seq + self.index) % len(MIX)])(seq)
            self.tally.answered += 1

    def request_id(self, seq: int) -> str | int:
        return f"c{self.index}-{seq}" if seq % 2 else self.index * 1_000_000 + seq  # both kinds of id

    async def call(self, seq: int) -> None:
        arguments = {"value": f"{self.tenant}/{self.index}/{seq}", "n": seq}
        tool = self.tools[seq % len(self.tools)]
        reply = await self.rpc(seq, "tools/call", {"name": tool, "arguments": arguments})
        if reply is not None and reply.get("result", {}).get("structuredContent") != arguments:
            self.tally.problem(f"{self.tenant} {tool}: got {reply}")

    async def list(self, seq: int) -> None:
        reply = await self.rpc(seq, "tools/list", {})
        names = [t["name"] for t in (reply or {}).get("result", {}).get("tools", [])]
        if reply is not None and names != self.tools:
            self.tally.problem(f"{self.tenant} tools/list: {names}")

    async def ping(self, seq: int) -> None:
        reply = await self.rpc(seq, "ping", None)
        if reply is not None and reply.get("result") != {}:
            self.tally.problem(f"ping: {reply}")

    async def notify(self, seq: int) -> None:
        method = ("notifications/roots/list_changed", "notifications/cancelled")[seq % 2]
        params = {"requestId": f"gone-{seq}", "reason": "soak"} if seq % 2 else None
        await self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})}, expect=None)

    async def rpc(self, seq: int, method: str, params: dict[str, Any] | None) -> dict[str, Any] | None:
        request_id = self.request_id(seq)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})}
        reply = await self.send(message, expect=request_id)
        if reply is not None and "error" in reply:
            self.tally.problem(f"{method}: unexpected error {reply}")
            return None
        return reply

    async def send(self, message: dict[str, Any], *, expect: str | int | None) -> dict[str, Any] | None:
        async with self.http.post(self.url, data=orjson.dumps(message), headers=self.headers) as response:
            body = await response.read()
            status = response.status
        if expect is None:  # a notification: 202 and no body
            if status != 202 or body:
                self.tally.problem(f"notification got {status} {body[:100]!r}")
            return None
        reply = orjson.loads(body) if status == 200 else None
        if not isinstance(reply, dict) or type(reply.get("id")) is not type(expect) or reply["id"] != expect:
            self.tally.problem(f"{message['method']} id {expect!r}: got {status} {body[:200]!r}")
            return None
        return reply


@contextlib.asynccontextmanager
async def stub_backend() -> AsyncIterator[int]:
    """bench/stub_backend.py serving three backends (/b0/mcp … /b2/mcp) on a free port."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.stub_backend", "--port", str(port), "--tools", str(STUB_TOOLS),
        "--backends", "3", cwd=REPO_ROOT, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            assert time.monotonic() < deadline and process.returncode is None, "stub backend did not start"
            await asyncio.sleep(0.05)
        yield port
    finally:
        process.terminate()
        await process.wait()


def soak_config(directory: Path, port: int, stub_port: int) -> Path:
    keys = [{"sha256": hashlib.sha256(api_key(t).encode()).hexdigest(), "tenant": t, "subject": "soak"}
            for t in TENANTS]
    backends = [{"name": f"s{i}", "transport": "http", "url": f"http://127.0.0.1:{stub_port}/b{i}/mcp",
                 "timeout_seconds": 30} for i in range(3)]
    return gateway_config(directory, port=port, backends=backends, auth={"api_keys": keys}, tenants=TENANTS,
                          logging={"level": "warning", "format": "json"})


async def sample_memory(pid: int, tally: Tally) -> None:
    while True:
        tally.rss.append((tally.answered, rss_bytes(pid)))
        await asyncio.sleep(0.25)


async def test_soak_every_request_answered_once_with_its_own_data_and_memory_stays_flat(tmp_path: Path) -> None:
    tally = Tally()
    async with stub_backend() as stub_port:
        port = free_port()
        gateway = await GatewayProcess.start(soak_config(tmp_path, port, stub_port), port)
        try:
            await gateway.wait_ready()
            seconds = await soak(gateway, tally)
            errors = [e for e in gateway.events() if e.get("level") in ("error", "critical")]
        finally:
            await gateway.stop()
    warm = [rss for answered, rss in tally.rss if answered >= WARM_UP * REQUESTS]
    print(f"\nsoak: {REQUESTS} requests, {CLIENTS} clients, {len(TENANTS)} tenants in {seconds:.1f}s "
          f"({REQUESTS / seconds:.0f}/s); gateway RSS MiB: start {tally.rss[0][1] / 2**20:.1f}, "
          f"after warm-up {warm[0] / 2**20:.1f}, peak {max(warm) / 2**20:.1f}, end {warm[-1] / 2**20:.1f}")
    assert tally.problems == []
    assert tally.answered == REQUESTS
    assert errors == [], "the gateway logged errors"
    assert max(warm) - warm[0] < MEMORY_GROWTH_LIMIT, "gateway memory grew after warm-up"


async def soak(gateway: GatewayProcess, tally: Tally) -> float:
    share = [REQUESTS // CLIENTS + (1 if i < REQUESTS % CLIENTS else 0) for i in range(CLIENTS)]
    connector = aiohttp.TCPConnector(limit=CLIENTS)
    async with aiohttp.ClientSession(connector=connector) as http:
        clients = [SoakClient(http, gateway.url(), i, tally) for i in range(CLIENTS)]
        await asyncio.gather(*(c.start() for c in clients))
        sampler = asyncio.create_task(sample_memory(gateway.pid, tally))
        started = time.monotonic()
        try:
            await asyncio.gather(*(c.run(n) for c, n in zip(clients, share, strict=True)))
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        tally.rss.append((tally.answered, rss_bytes(gateway.pid)))
        return time.monotonic() - started


