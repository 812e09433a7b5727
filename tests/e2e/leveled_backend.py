"""A stdio MCP server (low-level SDK `Server`) that declares `logging` and reports its level.

Not a test module: the gateway runs it as a backend. Its one tool, `level`, answers the level
the last `logging/setLevel` it received set ("unset" before any).
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

current = {"level": "unset"}


async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
    current["level"] = params.level
    return types.EmptyResult()


async def list_tools(ctx: ServerRequestContext[Any],
                     params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    tool = types.Tool(name="level", description="The log level last set.", input_schema={"type": "object"})
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=current["level"])])


async def main() -> None:
    server = Server("leveled", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool,
                    on_set_logging_level=set_level)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
