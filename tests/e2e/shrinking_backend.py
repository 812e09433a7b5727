"""A test backend (official SDK, stdio) whose `lookup` tool loses an argument, or goes, while it runs.

`lookup(repo, query)` answers `repo: query`. `drop_repo()` redefines it without `repo`, `remove()` takes
it away, `restore()` brings the first one back; each sends `notifications/tools/list_changed`.
"""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from gateway.demo import runner

server = MCPServer("shrinking", log_level="WARNING")


def lookup(repo: str, query: str) -> str:
    return f"{repo}: {query}"


def lookup_anywhere(query: str) -> str:
    return f"anywhere: {query}"


server.add_tool(lookup, name="lookup", description="Look something up in a repository.")


async def _replace(ctx: Context, function: object | None) -> str:
    if "lookup" in {tool.name for tool in await server.list_tools()}:
        server.remove_tool("lookup")
    if function is not None:
        server.add_tool(function, name="lookup", description="Look something up.")  # type: ignore[arg-type]
    await ctx.session.send_tool_list_changed()
    return "done"


@server.tool()
async def drop_repo(ctx: Context) -> str:
    """Redefine lookup without its `repo` argument."""
    return await _replace(ctx, lookup_anywhere)


@server.tool()
async def remove(ctx: Context) -> str:
    """Take lookup away."""
    return await _replace(ctx, None)


@server.tool()
async def restore(ctx: Context) -> str:
    """Bring the first lookup back."""
    return await _replace(ctx, lookup)


if __name__ == "__main__":
    runner.main(server)
