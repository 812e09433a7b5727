"""A stdio MCP server (official SDK) with an MCP Apps tool: its `_meta.ui.resourceUri` names a `ui://` resource."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.types import CallToolResult, TextContent

APP = "ui://clock/app.html"
LEGACY_APP = "ui://clock/legacy.html"
server = MCPServer("apps", version="1.0.0", log_level="WARNING")


@server.tool(meta={"ui": {"resourceUri": APP}, "ui/resourceUri": LEGACY_APP})
def show_clock(zone: str = "UTC") -> CallToolResult:
    """Show a clock for a zone in the clock app."""
    return CallToolResult(content=[TextContent(type="text", text=f"clock for {zone}")],
                          _meta={"ui": {"resourceUri": APP}})


@server.tool()
def plain() -> str:
    """A tool with no app."""
    return "plain"


@server.resource(APP, name="clock app", mime_type="text/html;profile=mcp-app")
def clock_app() -> str:
    return "<html><body>clock</body></html>"


@server.resource(LEGACY_APP, name="legacy clock app", mime_type="text/html;profile=mcp-app")
def legacy_clock_app() -> str:
    return "<html><body>legacy</body></html>"


if __name__ == "__main__":
    server.run("stdio")
