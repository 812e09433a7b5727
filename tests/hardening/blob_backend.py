"""An MCP backend (official SDK, stdio) whose one tool returns as many bytes as asked for.

Run as `python tests/hardening/blob_backend.py`; not a test module.
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer

MAX_SIZE = 12 * 1024 * 1024

server = MCPServer("blob", version="1.0.0", log_level="WARNING")


@server.tool()
def blob(size: int) -> str:
    """A string of `size` characters (at most 12 MiB)."""
    return "x" * max(0, min(size, MAX_SIZE))


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
