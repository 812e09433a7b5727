"""A stdio MCP server (the official SDK's low-level Server) that counts the `notifications/roots/list_changed`
it hears; its tool `changes` says how many."""

from __future__ import annotations

import warnings

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

heard = 0


async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {}}
    return types.ListToolsResult(tools=[
        types.Tool(name="changes", description="How many roots changes were heard.", input_schema=schema),
    ])


async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(heard))])


async def roots_changed(ctx: object, params: object) -> None:
    global heard
    heard += 1


with warnings.catch_warnings():  # roots are deprecated at 2026-07-28; this backend speaks the handshake era
    warnings.simplefilter("ignore")
    server: Server[object] = Server("roots", on_list_tools=list_tools, on_call_tool=call_tool,
                                    on_roots_list_changed=roots_changed)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
