"""A stdio MCP server (official SDK) whose tool repeats two arguments as `Mcp-Param-*` headers at 2026-07-28."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from pydantic import Field

server = MCPServer("routed", version="1.0.0", log_level="WARNING")


@server.tool()
def locate(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
           count: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Count"})] = 1,
           note: str = "") -> str:
    """Say where, how many, and the note."""
    return f"{region}:{count}:{note}"


if __name__ == "__main__":
    server.run("stdio")
