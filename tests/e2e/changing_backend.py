"""A test backend (official SDK, stdio) whose prompts and resources grow while it runs.

`add_prompt(name)` and `add_resource(uri)` register one more and send the matching
`notifications/{prompts,resources}/list_changed`, as a real server with a changing list does.
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.mcpserver.resources import FunctionResource

server = MCPServer("changing", log_level="WARNING")


@server.prompt()
def first() -> str:
    """The prompt it starts with."""
    return "first"


@server.tool()
async def add_prompt(name: str, ctx: Context) -> str:
    """Offer one more prompt, and say so."""
    server.add_prompt(Prompt.from_function(lambda: name, name=name, description=f"added {name}"))
    await ctx.session.send_prompt_list_changed()
    return name


@server.tool()
async def add_resource(uri: str, ctx: Context) -> str:
    """Offer one more resource, and say so."""
    server.add_resource(FunctionResource.from_function(lambda: uri, uri=uri, name=uri))
    await ctx.session.send_resource_list_changed()
    return uri


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
