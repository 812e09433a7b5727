"""A stdio MCP server whose tool's title and description are HTML and script.

Not a test module: the gateway runs it as a backend, and the status page must show what it
says as text (tests/browser/test_status_page.py), never run it.
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer

TITLE = '<img src=x onerror="window.pwned = 1">'
DESCRIPTION = '<script>window.pwned = 2</script><b>not bold</b>'

server = MCPServer("hostile", version="1.0.0", log_level="WARNING")


@server.tool(title=TITLE, description=DESCRIPTION)
def echo(text: str) -> str:
    return text


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
