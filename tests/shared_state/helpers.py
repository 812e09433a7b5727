"""Helpers for shared-state tests: private Redis servers, GET streams, a counting MCP backend."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import shutil
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import aiohttp
import orjson
import redis.asyncio as aioredis
from aiohttp import web
from backend_fixtures import HOST, free_port
from conftest import MCP_HEADERS

from gateway.protocol.sse import SseDecoder, SseEvent

SHARED_REDIS_URL = "redis://127.0.0.1:6379/0"
REDIS_SERVER = shutil.which("redis-server")
START_SECONDS = 10.0


async def wait_until(check: Callable[[], Awaitable[bool]], within: float, interval: float = 0.05) -> bool:
    """Poll `check()` until it is true or `within` seconds pass; whether it became true."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(interval)
    return await check()


class RedisServer:
    """A private `redis-server` on a free port that a test may stop and start (never the shared one)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    async def start(self) -> None:
        assert REDIS_SERVER, "redis-server is not installed"
        self.process = await asyncio.create_subprocess_exec(
            REDIS_SERVER, "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly", "no",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        assert await wait_until(self.answers, START_SECONDS), f"redis-server did not start on {self.port}"

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.returncode is None:
            process.terminate()
            await process.wait()

    async def answers(self) -> bool:
        client = aioredis.Redis.from_url(self.url, socket_connect_timeout=0.2, socket_timeout=0.2)
        try:
            return bool(await client.ping())
        except (OSError, aioredis.RedisError):
            return False
        finally:
            await client.aclose()


class GetStream:
    """A client's GET (SSE) stream on one replica, read in the background."""

    def __init__(self, http: aiohttp.ClientSession, url: str, token: str, session_id: str,
                 last_event_id: str | None = None) -> None:
        self.http, self.url = http, url
        self.headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id}
        if last_event_id is not None:
            self.headers["Last-Event-ID"] = last_event_id
        self.events: asyncio.Queue[SseEvent] = asyncio.Queue()
        self.ended = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._response: aiohttp.ClientResponse | None = None

    async def open(self) -> GetStream:
        self._response = await self.http.get(self.url, headers=self.headers, timeout=aiohttp.ClientTimeout(total=None))
        assert self._response.status == 200, self._response.status
        self._task = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        decoder = SseDecoder()
        assert self._response is not None
        with contextlib.suppress(aiohttp.ClientError, asyncio.CancelledError):
            async for chunk in self._response.content.iter_any():
                for event in decoder.feed(chunk):
                    self.events.put_nowait(event)
        self.ended.set()

    async def next(self, within: float) -> SseEvent:
        return await asyncio.wait_for(self.events.get(), within)

    async def methods_within(self, seconds: float) -> list[str]:
        """The JSON-RPC methods of the events that arrive within `seconds`."""
        methods = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = await asyncio.wait_for(self.events.get(), left)
            except TimeoutError:
                break
            methods.append(orjson.loads(event.data)["method"])
        return methods

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._response is not None:
            self._response.close()


async def listening_sessions(http: aiohttp.ClientSession, url: str, open_client: Callable[[str], Any],
                             tenants: Iterable[str]) -> tuple[dict[str, Any], dict[str, GetStream]]:
    """One initialized session per tenant (`open_client(tenant)` makes its client), each with its GET
    stream open: what a test of which tenants hear a change starts from."""
    clients, streams = {}, {}
    for tenant in tenants:
        client = open_client(tenant)
        await client.initialize()
        clients[tenant] = client
        streams[tenant] = await GetStream(http, url, client.token or "", client.session_id or "").open()
    return clients, streams


class CountingBackend:
    """A minimal Streamable HTTP MCP backend that counts the tools/list requests it answers.

    `lists` counts those of sessions that declared no client capabilities: one per catalogue refresh. The
    catalogue also lists each backend in a session declaring every capability it relays (to find tools
    listed to capable clients only, catalogue.variants); those are counted in `probes`."""

    def __init__(self, tools: int = 3) -> None:
        self.tools = tools
        self.lists = 0
        self.probes = 0
        self._declaring: set[str] = set()  # the sessions whose initialize declared capabilities
        self._sessions = itertools.count(1)
        self.app = web.Application()
        self.app.router.add_route("*", "/mcp", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405 if request.method == "GET" else 200)
        body = orjson.loads(await request.read())
        if "id" not in body:
            return web.Response(status=202)
        session = request.headers.get("Mcp-Session-Id")
        if body["method"] == "initialize":
            session = f"counting-{next(self._sessions)}"
            if body["params"].get("capabilities"):
                self._declaring.add(session)
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": self.result(body, session)},
                                 headers={"Mcp-Session-Id": session or "counting"})

    def result(self, body: dict[str, Any], session: str | None = None) -> dict[str, Any]:
        method = body["method"]
        if method == "initialize":
            return {"protocolVersion": body["params"]["protocolVersion"], "capabilities": {"tools": {}},
                    "serverInfo": {"name": "counting", "version": "1"}}
        if method == "tools/list":
            if session in self._declaring:
                self.probes += 1
            else:
                self.lists += 1
            return {"tools": [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(self.tools)]}
        if method == "tools/call":
            return {"content": [{"type": "text", "text": body["params"]["name"]}], "isError": False}
        return {}
