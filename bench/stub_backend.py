"""The fastest MCP Streamable HTTP backend we can write on aiohttp, for the benchmark.

Answers with canned JSON (never SSE): `initialize` issues an `Mcp-Session-Id`, and
`server/discover` offers 2026-07-28, whose requests need no session; notifications get 202,
`tools/list` serves pre-encoded pages of `--tools N` echo tools named `<prefix>_<i>`, and
`tools/call` echoes its arguments back as text content and as
`structuredContent`. One prompt, `echo`, answers `prompts/get` with its `value` argument as
the message text, and `resources/read` of `echo://r/<text>` (the template `echo://r/{text}`)
answers with `<text>`. It uses aiohttp's low-level server (no router, no middlewares) on
uvloop, so the backend costs as little as possible and the numbers show the gateway.

`--backends K` serves K independent backends from one process, at `/b0/mcp` ... and
with tool prefixes `<prefix>0` ..., so 100 backends do not need 100 processes.

    python -m bench.stub_backend --port 9001 --tools 100 [--prefix echo] [--backends 10] [--page-size 0]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
from collections.abc import Sequence
from typing import Any

import orjson
from aiohttp import web

SESSION_HEADER = "Mcp-Session-Id"
JSON = "application/json"
PROTOCOL_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
VERSION_HEADER = "MCP-Protocol-Version"
DISCOVER_RESULT = {"supportedVersions": [MODERN_VERSION], "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
                   "ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "value": {"type": "string", "description": "Any text; echoed back unchanged."},
        "n": {"type": "integer", "description": "Any integer; echoed back unchanged."},
    },
    "required": ["value"],
}


def backend_path(index: int, count: int) -> str:
    """The endpoint path of backend `index` in a stub serving `count` backends."""
    return "/mcp" if count == 1 else f"/b{index}/mcp"


def backend_prefix(prefix: str, index: int, count: int) -> str:
    """Tool-name prefix of backend `index`: backends of one process differ by their index."""
    return prefix if count == 1 else f"{prefix}{index}"


def tool_names(prefix: str, tools: int) -> list[str]:
    return [f"{prefix}_{i}" for i in range(tools)]


def tool_definition(name: str, index: int) -> dict[str, Any]:
    """A realistic small tool: a title-less description and a two-property schema."""
    return {"name": name, "description": f"Echo tool number {index}: returns its arguments unchanged.",
            "inputSchema": INPUT_SCHEMA}


class StubBackend:
    """One backend: its tools and its pre-encoded `tools/list` pages."""

    def __init__(self, prefix: str, tools: int, page_size: int = 0) -> None:
        names = tool_names(prefix, tools)
        self.names = frozenset(names)
        definitions = [tool_definition(name, i) for i, name in enumerate(names)]
        size = page_size or max(len(definitions), 1)
        chunks = [definitions[i : i + size] for i in range(0, len(definitions), size)] or [[]]
        self.pages = [self._encode_page(chunk, i, len(chunks)) for i, chunk in enumerate(chunks)]

    @staticmethod
    def _encode_page(chunk: list[dict[str, Any]], index: int, count: int) -> bytes:
        result: dict[str, Any] = {"tools": chunk}
        if index + 1 < count:
            result["nextCursor"] = str(index + 1)
        return orjson.dumps(result)

    def list_result(self, params: dict[str, Any]) -> bytes | None:
        """The encoded result for a cursor, or None for a cursor we never issued."""
        cursor = params.get("cursor")
        if cursor is None:
            return self.pages[0]
        if isinstance(cursor, str) and cursor.isdigit() and 0 < int(cursor) < len(self.pages):
            return self.pages[int(cursor)]
        return None


def _reply(message_id: Any, result: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": message_id, "result": result})


def _encoded_reply(message_id: Any, result: bytes) -> bytes:
    """Splice a pre-encoded result into the envelope without decoding it again."""
    return b'{"jsonrpc":"2.0","id":' + orjson.dumps(message_id) + b',"result":' + result + b"}"


def _error(message_id: Any, code: int, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": text}})


def _json(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON, headers=headers)


RESOURCE_PREFIX = "echo://r/"
PROMPT_NAME = "echo"
LISTS = {
    "prompts/list": orjson.dumps({"prompts": [{"name": PROMPT_NAME, "description": "Echoes its value argument.",
                                               "arguments": [{"name": "value", "required": True}]}]}),
    "resources/list": orjson.dumps({"resources": [{"uri": f"{RESOURCE_PREFIX}hello", "name": "hello",
                                                   "mimeType": "text/plain"}]}),
    "resources/templates/list": orjson.dumps({"resourceTemplates": [
        {"uriTemplate": RESOURCE_PREFIX + "{text}", "name": "echo", "mimeType": "text/plain"}]}),
}


def initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    requested = params.get("protocolVersion")
    return {"protocolVersion": requested if requested in PROTOCOL_VERSIONS else LATEST_VERSION,
            "capabilities": {"tools": {"listChanged": False}, "prompts": {"listChanged": False},
                             "resources": {"listChanged": False}},
            "serverInfo": {"name": "bench-stub", "version": "1.0.0"}}


def read_result(uri: Any) -> dict[str, Any] | None:
    if not isinstance(uri, str) or not uri.startswith(RESOURCE_PREFIX):
        return None
    return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": uri[len(RESOURCE_PREFIX):]}]}


def prompt_result(params: dict[str, Any]) -> dict[str, Any] | None:
    arguments = params.get("arguments")
    if params.get("name") != PROMPT_NAME or not isinstance(arguments, dict):
        return None
    return {"messages": [{"role": "user", "content": {"type": "text", "text": str(arguments.get("value"))}}]}


def echo_result(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": orjson.dumps(arguments).decode()}],
            "structuredContent": arguments, "isError": False}


class StubServer:
    """Routes by path to a backend, and answers each JSON-RPC message."""

    def __init__(self, backends: dict[str, StubBackend]) -> None:
        self.backends = backends
        self._session_ids = (f"stub-{os.getpid()}-{n}" for n in itertools.count(1))

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        backend = self.backends.get(request.path)
        if backend is None:
            return web.Response(status=404)
        if request.method == "DELETE":
            return web.Response(status=200)
        if request.method != "POST":
            return web.Response(status=405)  # no GET stream: the gateway stops asking for one
        try:
            message = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _json(_error(None, -32700, "Parse error"), status=400)
        if not isinstance(message, dict):
            return _json(_error(None, -32600, "Invalid Request: no batches here"), status=400)
        if "id" not in message or "method" not in message:
            return web.Response(status=202)  # a notification or a response
        return self._answer(backend, message, request)

    def _answer(self, backend: StubBackend, message: dict[str, Any], request: web.BaseRequest) -> web.Response:
        message_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        if method == "initialize":
            session = {SESSION_HEADER: next(self._session_ids)}
            return _json(_reply(message_id, initialize_result(params)), headers=session)
        if method == "server/discover":
            return _json(_reply(message_id, DISCOVER_RESULT))
        if SESSION_HEADER not in request.headers and request.headers.get(VERSION_HEADER) != MODERN_VERSION:
            return _json(_error(message_id, -32600, "Bad Request: missing session"), status=400)
        if method == "tools/call":
            return _json(self._call(backend, message_id, params))
        if method == "tools/list":
            page = backend.list_result(params)
            return _json(_encoded_reply(message_id, page) if page else _error(message_id, -32602, "Invalid cursor"))
        if method == "ping":
            return _json(_reply(message_id, {}))
        return _json(self._other(message_id, method, params))

    @staticmethod
    def _other(message_id: Any, method: str, params: dict[str, Any]) -> bytes:
        """Prompts and resources: their lists, one prompt and one resource template."""
        if method in LISTS:
            return _encoded_reply(message_id, LISTS[method])
        if method == "resources/read":
            result = read_result(params.get("uri"))
            return _reply(message_id, result) if result else _error(message_id, -32602, "Unknown resource")
        if method == "prompts/get":
            result = prompt_result(params)
            return _reply(message_id, result) if result else _error(message_id, -32602, "Unknown prompt")
        return _error(message_id, -32601, f"Method not found: {method}")

    @staticmethod
    def _call(backend: StubBackend, message_id: Any, params: dict[str, Any]) -> bytes:
        if params.get("name") not in backend.names:
            return _error(message_id, -32602, f"Unknown tool: {params.get('name')}")
        arguments = params.get("arguments")
        return _reply(message_id, echo_result(arguments if isinstance(arguments, dict) else {}))


def build_backends(prefix: str, tools: int, count: int, page_size: int = 0) -> dict[str, StubBackend]:
    return {backend_path(i, count): StubBackend(backend_prefix(prefix, i, count), tools, page_size)
            for i in range(count)}


async def serve(host: str, port: int, backends: dict[str, StubBackend]) -> None:
    server = web.Server(StubServer(backends).handle, access_log=None)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(server, host, port, backlog=1024)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    listener.close()
    await server.shutdown(1.0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.stub_backend", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tools", type=int, default=10, help="tools per backend")
    parser.add_argument("--prefix", default="echo", help="tool-name prefix")
    parser.add_argument("--backends", type=int, default=1, help="backends served by this process (/b<i>/mcp)")
    parser.add_argument("--page-size", type=int, default=0, help="tools/list page size (0: one page)")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    backends = build_backends(args.prefix, args.tools, args.backends, args.page_size)
    runner = _loop_factory()
    with asyncio.Runner(loop_factory=runner) as loop:
        loop.run(serve(args.host, args.port, backends))


def _loop_factory() -> Any:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a gateway dependency on Linux
        return None
    return uvloop.new_event_loop


if __name__ == "__main__":
    main()
