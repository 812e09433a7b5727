"""A 2026-07-28 backend that serves `subscriptions/listen`, scripted to the frame (the official SDK's
high-level `MCPServer` serves listen too; its low-level `Server`, the conformance fixture's, does not).

Not a test module: an aiohttp app the upstream tests run on 127.0.0.1, speaking the 2026 wire as
PROTOCOL-2026 describes it: every request a POST with the 2026 `MCP-Protocol-Version` header and
envelope, `server/discover` promising `listChanged` for tools and prompts, lists with `ttlMs` and
`cacheScope`, and `subscriptions/listen` answered by an SSE stream whose first frame is
`notifications/subscriptions/acknowledged`, then only the kinds asked for, each tagged with the
listen request's id as `subscriptionId` (§A.7). Or a backend that cannot announce: `silent=True`,
its discover promises nothing (a backend that never announces); `refuse_listen=True`, a listen gets -32601.

Tools: `echo`, and `add_tool(name)`, which offers one more tool and tells every open listen stream
that asked for tool changes. `change_tools(name)` does the same from outside any request (a change
the gateway must hear with no call through it). It counts the requests it got, by method.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

VERSION = "2026-07-28"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
KINDS = {"toolsListChanged": "notifications/tools/list_changed",
         "promptsListChanged": "notifications/prompts/list_changed"}
TTL_MS = 600_000
"""Long: the gateway must learn of a change from the stream or its re-list, not from the hint."""
JsonObject = dict[str, Any]


class AnnouncingBackend:
    """The backend's state: its tools, the open listen streams, the requests counted."""

    def __init__(self, *, silent: bool = False, refuse_listen: bool = False) -> None:
        self.silent, self.refuse_listen = silent, refuse_listen
        self.tools = ["echo", "add_tool"]
        self.requests: Counter[str] = Counter()
        self.listen_headers: list[dict[str, str]] = []
        self._streams: list[tuple[Any, set[str], asyncio.Queue[JsonObject | None]]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/mcp", self._post)
        return app

    @property
    def listening(self) -> int:
        return len(self._streams)

    def change_tools(self, name: str) -> None:
        """Offer one more tool and tell the listen streams that asked."""
        self.tools.append(name)
        for request_id, methods, queue in self._streams:
            if KINDS["toolsListChanged"] in methods:
                queue.put_nowait(_tagged(KINDS["toolsListChanged"], {}, request_id))

    def end_streams(self) -> None:
        """End every listen stream gracefully (the result frame), as at the backend's shutdown."""
        for _, _, queue in self._streams:
            queue.put_nowait(None)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("MCP-Protocol-Version") != VERSION:
            error = {"code": -32022, "message": "Unsupported protocol version",
                     "data": {"supported": [VERSION], "requested": request.headers.get("MCP-Protocol-Version", "")}}
            return web.json_response({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
        message = await request.json()
        method, request_id = message.get("method"), message.get("id")
        self.requests[method] += 1
        if method == "subscriptions/listen" and not self.refuse_listen:
            return await self._listen(request, message)
        reply = self._answer(method, message.get("params") or {})
        if "code" in reply:
            return web.json_response({"jsonrpc": "2.0", "id": request_id, "error": reply})
        return web.json_response({"jsonrpc": "2.0", "id": request_id, "result": {"resultType": "complete", **reply}})

    def _answer(self, method: str, params: JsonObject) -> JsonObject:
        cached = {"ttlMs": TTL_MS, "cacheScope": "public"}
        if method == "server/discover":
            promise = {} if self.silent else {"listChanged": True}
            return {"supportedVersions": [VERSION], "capabilities": {"tools": promise, "prompts": promise},
                    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "announcing", "version": "1"}},
                    **cached}
        if method == "tools/list":
            schema = {"type": "object", "properties": {"name": {"type": "string"}}}
            return {"tools": [{"name": name, "inputSchema": schema} for name in self.tools], **cached}
        if method == "prompts/list":
            return {"prompts": [{"name": "hello"}], **cached}
        if method == "tools/call":
            name = params.get("name")
            if name == "add_tool":
                self.change_tools(str(params.get("arguments", {}).get("name")))
            return {"content": [{"type": "text", "text": f"{name} done"}], "isError": False}
        return {"code": -32601, "message": f"Method not found: {method}"}

    async def _listen(self, request: web.Request, message: JsonObject) -> web.StreamResponse:
        wanted = (message.get("params") or {}).get("notifications") or {}
        honoured = {flag: True for flag in KINDS if wanted.get(flag) is True}
        self.listen_headers.append(dict(request.headers))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        queue: asyncio.Queue[JsonObject | None] = asyncio.Queue()
        entry = (message["id"], {KINDS[flag] for flag in honoured}, queue)
        queue.put_nowait(_tagged(ACKNOWLEDGED, {"notifications": honoured}, message["id"]))
        self._streams.append(entry)
        try:
            while (frame := await queue.get()) is not None:
                await response.write(_event(frame))
            done = {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: message["id"]}}
            await response.write(_event({"jsonrpc": "2.0", "id": message["id"], "result": done}))
        finally:
            self._streams.remove(entry)
        return response


def _event(message: JsonObject) -> bytes:
    return f"event: message\ndata: {json.dumps(message)}\n\n".encode()


def _tagged(method: str, params: JsonObject, request_id: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": {SUBSCRIPTION_ID: request_id}}}


@asynccontextmanager
async def serving(backend: AnnouncingBackend) -> AsyncIterator[str]:
    """The backend on 127.0.0.1; yields its URL."""
    server = TestServer(backend.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/mcp"))
    finally:
        backend.end_streams()
        await server.close()
