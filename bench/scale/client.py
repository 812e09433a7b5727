"""A small MCP client for probes that the load generator does not make: one request at a time, any
tenant's token per request, stateless (2026-07-28) unless a session is given, every reply checked.

Many tenants share one connection pool here: a tenant's first request needs no handshake, so
building a thousand tenants' views costs a thousand requests, not a thousand sessions.
"""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson

from bench.loadgen import ACCEPT
from bench.replies import CheckFailed, decode, expect_result, request
from bench.stateless import MODERN_VERSIONS, enveloped, routing_headers

SESSION_VERSION = "2025-11-25"
STATELESS_VERSION = MODERN_VERSIONS[-1]
TIMEOUT = 120.0


class Client:
    """`async with Client(url) as c: await c.ask("tools/list", token=...)`."""

    def __init__(self, url: str, connections: int = 8) -> None:
        self.url = url
        self.connections = connections
        self.ids = itertools.count(1)
        self.http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.connections),
                                          timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.http is not None
        await self.http.close()

    async def ask(self, method: str, params: dict[str, Any] | None = None, *, token: str | None = None,
                  session: str | None = None) -> dict[str, Any]:
        """The result of one request (CheckFailed on an error reply or a wrong id)."""
        message = request(next(self.ids), method, params)
        status, body, content_type, _ = await self._post(message, token, session)
        if status != 200:
            raise CheckFailed(f"{method}: HTTP {status}: {body[:200]!r}")
        return expect_result(decode(body, content_type, message["id"]), message["id"])

    async def open_session(self, token: str | None = None) -> str:
        """A handshake-era session: initialize, then notifications/initialized."""
        params = {"protocolVersion": SESSION_VERSION, "capabilities": {},
                  "clientInfo": {"name": "bench-scale", "version": "1.0.0"}}
        message = request(next(self.ids), "initialize", params)
        status, body, content_type, headers = await self._post(message, token, None, handshake=True)
        expect_result(decode(body, content_type, message["id"]), message["id"])
        session = headers.get("Mcp-Session-Id")
        if status != 200 or not session:
            raise CheckFailed(f"initialize: HTTP {status}, session {session!r}")
        status, *_ = await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, token, session)
        if status != 202:
            raise CheckFailed(f"notifications/initialized: HTTP {status}")
        return session

    async def list_all(self, token: str | None = None) -> list[str]:
        """The names of a full tools/list (every page)."""
        names: list[str] = []
        cursor = None
        while True:
            result = await self.ask("tools/list", {"cursor": cursor} if cursor else None, token=token)
            names += [tool["name"] for tool in result["tools"]]
            cursor = result.get("nextCursor")
            if not cursor:
                return names

    async def _post(self, message: dict[str, Any], token: str | None, session: str | None,
                    handshake: bool = False) -> tuple[int, bytes, str, Any]:
        assert self.http is not None
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if session:
            headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": SESSION_VERSION}
        elif not handshake:
            headers |= routing_headers(message, STATELESS_VERSION)
            message = enveloped(message, STATELESS_VERSION)
        async with self.http.post(self.url, data=orjson.dumps(message), headers=headers) as response:
            return response.status, await response.read(), response.content_type, response.headers


async def timed(operation: Callable[[int], Awaitable[Any]], count: int) -> list[float]:
    """Milliseconds of each of `count` operations run one after the other (operation(i))."""
    samples = []
    for i in range(count):
        started = time.perf_counter()
        await operation(i)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else 0.0


def run(coroutine: Awaitable[Any]) -> Any:
    """Run one probe on a fresh event loop (the curves themselves are synchronous)."""

    async def wrapper() -> Any:
        return await coroutine

    return asyncio.run(wrapper())
