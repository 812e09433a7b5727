"""An MCP server (the official SDK's low-level Server) that counts the `notifications/roots/list_changed`
each of its sessions hears; its tool `changes` says how many its own session heard.

stdio by default; `--transport http --port N` serves Streamable HTTP on 127.0.0.1 (one session per
gateway upstream session, so what each session heard shows where a notification went)."""

from __future__ import annotations

import argparse
import warnings
from collections import Counter
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

heard: Counter[str] = Counter()  # by session


def session_of(ctx: Any) -> str:
    """The connection a message came on: its Mcp-Session-Id over HTTP; stdio has just the one."""
    headers = getattr(ctx.request, "headers", None)
    return headers.get("mcp-session-id", "") if headers is not None else "stdio"


async def list_tools(ctx: Any, params: object) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {}}
    return types.ListToolsResult(tools=[
        types.Tool(name="changes", description="How many roots changes this session heard.", input_schema=schema),
    ])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(heard[session_of(ctx)]))])


async def roots_changed(ctx: Any, params: object) -> None:
    heard[session_of(ctx)] += 1


with warnings.catch_warnings():  # roots are deprecated at 2026-07-28; this backend speaks the handshake era
    warnings.simplefilter("ignore")
    server: Server[Any] = Server("roots", on_list_tools=list_tools, on_call_tool=call_tool,
                                 on_roots_list_changed=roots_changed)


async def serve_stdio() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.transport == "stdio":
        anyio.run(serve_stdio)
        return
    import uvicorn
    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
