"""A test backend (official SDK, low-level Server, stdio) whose tools grow and change while it runs.

It starts with `ping`. `add_tool(name, description)` offers one more tool; `describe(name, description)`
gives a tool another description. Each says so (`notifications/tools/list_changed`), as a real server
whose tools change does: what a search over the gateway's catalogue finds changes with them.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server import Server

from gateway.demo import runner

DESCRIPTIONS = {"ping": "Answer pong, to check the server is up."}
TEXT_ARGUMENTS = {"add_tool": ("name", "description"), "describe": ("name", "description")}


def _tool(name: str, description: str) -> types.Tool:
    properties = {p: {"type": "string"} for p in TEXT_ARGUMENTS.get(name, ())}
    return types.Tool(name=name, description=description, input_schema={"type": "object", "properties": properties})


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    fixed = [_tool("add_tool", "Offer one more tool."), _tool("describe", "Give a tool another description.")]
    return types.ListToolsResult(tools=fixed + [_tool(name, text) for name, text in DESCRIPTIONS.items()])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name in TEXT_ARGUMENTS:
        DESCRIPTIONS[arguments["name"]] = arguments["description"]
        await ctx.session.send_tool_list_changed()
        text = "done"
    else:
        text = "pong"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("growing", on_list_tools=list_tools, on_call_tool=call_tool)

if __name__ == "__main__":
    runner.main(server, description="tools that grow and change, told to the client")
