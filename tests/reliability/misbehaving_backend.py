"""A controllable Streamable HTTP "MCP backend" on aiohttp that misbehaves on request (not a test module).

It answers `initialize` (issuing a session id), `tools/list` and `tools/call`. The tool name
picks the behaviour of a call (see `TOOLS`); `mode` overrides every call at once, for fault
injection ("ok", "hang", "garbage"). It records the tools/call requests it received and the
request ids of every `notifications/cancelled`, so tests can check what reached it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from typing import Any

import orjson
from aiohttp import web

from gateway.protocol.sse import encode_event

SESSION = "Mcp-Session-Id"
JsonObject = dict[str, Any]
MiB = 1024 * 1024

TOOLS = (
    "echo",          # returns its arguments as structuredContent
    "hang",          # never answers (until the client goes away)
    "progress",      # SSE: `steps` progress notifications `interval` apart, then the result
    "silent_sse",    # SSE: keep-alive comments forever, never the response
    "not_json",      # 200 application/json with a body that is not JSON
    "html",          # 200 text/html error page
    "html_502",      # 502 text/html error page (a proxy in front of a dead backend)
    "wrong_id",      # a JSON response for another id
    "no_result",     # a JSON-RPC envelope with neither result nor error
    "bad_error",     # an `error` that is no JSON-RPC error object (no code, no message)
    "scalar_result",  # result is a number, not a CallToolResult object
    "deep",          # a result nested 300 levels deep (more than the gateway can re-encode)
    "sse_wrong_id",  # SSE: a response for another id
    "huge",          # 4 MiB body with a Content-Length (tests set a 1 MiB limit)
    "huge_chunked",  # an endless chunked JSON body (no Content-Length)
    "endless_sse",   # an SSE event whose data line never ends
    "disconnect",    # the connection is dropped after the request was read
    "tool_error",    # isError: true (a tool error, not a backend failure)
    "rpc_error",     # the backend's own JSON-RPC error
)


class MisbehavingBackend:
    def __init__(self) -> None:
        self.mode = "ok"
        self.calls: Counter[str] = Counter()
        self.call_ids: dict[str, list[Any]] = {}
        self.cancelled: list[Any] = []
        self.app = web.Application()
        self.app.router.add_route("*", "/mcp", self.handle)
        self._sessions = (f"bad-{n}" for n in itertools.count(1))
        self._garbage = itertools.cycle(("not_json", "wrong_id", "no_result", "html"))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            return web.Response(status=405 if request.method == "GET" else 200)
        body = orjson.loads(await request.read())
        method, params = body.get("method"), body.get("params") or {}
        if method == "notifications/cancelled":
            self.cancelled.append(params.get("requestId"))
        if "id" not in body or method is None:
            return web.Response(status=202)
        if method == "initialize":
            result = {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "misbehaving", "version": "1"}}
            return web.json_response(_result(body, result), headers={SESSION: next(self._sessions)})
        if method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
            return web.json_response(_result(body, {"tools": tools}))
        return await self._call(request, body, params)

    async def _call(self, request: web.Request, body: JsonObject, params: JsonObject) -> web.StreamResponse:
        tool = params.get("name", "")
        self.calls[tool] += 1
        self.call_ids.setdefault(tool, []).append(body["id"])
        behaviour = {"ok": tool, "hang": "hang", "garbage": next(self._garbage)}[self.mode]
        return await BEHAVIOURS[behaviour](request, body, params.get("arguments") or {})


def _result(body: JsonObject, result: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "id": body["id"], "result": result}


def _json(message: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(message), status=status, content_type="application/json")


async def _sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    return response


async def echo(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return _json(_result(body, {"content": [{"type": "text", "text": "ok"}], "structuredContent": args}))


async def hang(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


async def progress(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    response = await _sse(request)
    token = ((body.get("params") or {}).get("_meta") or {}).get("progressToken")
    steps, interval = int(args.get("steps", 3)), float(args.get("interval", 0.1))
    for step in range(1, steps + 1):
        await asyncio.sleep(interval)
        if token is not None:
            note = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": step, "total": steps}}
            await response.write(encode_event(orjson.dumps(note)))
    done = _result(body, {"content": [{"type": "text", "text": f"{steps} steps"}]})
    await response.write(encode_event(orjson.dumps(done)))
    return response


async def silent_sse(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    response = await _sse(request)
    while True:
        await asyncio.sleep(0.05)
        await response.write(b": still here\n\n")


async def not_json(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return web.Response(body=b"{this is not json", content_type="application/json")


async def html(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return web.Response(text="<html><body>Internal Server Error</body></html>", content_type="text/html")


async def html_502(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return web.Response(status=502, text="<html><body>502 Bad Gateway</body></html>", content_type="text/html")


async def wrong_id(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return _json({"jsonrpc": "2.0", "id": 987654321, "result": {"content": []}})


async def no_result(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return _json({"jsonrpc": "2.0", "id": body["id"]})


async def bad_error(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return _json({"jsonrpc": "2.0", "id": body["id"], "error": {"reason": "it broke"}})


async def scalar_result(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return _json(_result(body, 42))


async def deep(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    nested = b"[" * 300 + b"]" * 300
    head = b'{"jsonrpc":"2.0","id":' + orjson.dumps(body["id"]) + b',"result":{"content":[],"structuredContent":{"x":'
    return web.Response(body=head + nested + b"}}}", content_type="application/json")


async def sse_wrong_id(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    response = await _sse(request)
    await response.write(encode_event(orjson.dumps({"jsonrpc": "2.0", "id": 424242, "result": {"content": []}})))
    return response


async def huge(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return web.Response(body=b" " * (4 * MiB), content_type="application/json")


async def huge_chunked(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    await response.write(b'{"jsonrpc":"2.0","id":' + orjson.dumps(body["id"]) + b',"result":{"text":"')
    chunk = b"x" * (256 * 1024)
    while True:  # ends when the gateway hangs up
        await response.write(chunk)


async def endless_sse(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    response = await _sse(request)
    await response.write(b"data: ")
    chunk = b"y" * (256 * 1024)
    while True:
        await response.write(chunk)


async def disconnect(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    assert request.transport is not None
    request.transport.close()
    await asyncio.sleep(0.1)
    return web.Response(status=200)


async def tool_error(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return _json(_result(body, {"content": [{"type": "text", "text": "the tool failed"}], "isError": True}))


async def rpc_error(request: web.Request, body: JsonObject, args: JsonObject) -> web.StreamResponse:
    return _json({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32000, "message": "backend says no"}})


BEHAVIOURS = {name: globals()[name] for name in TOOLS}
