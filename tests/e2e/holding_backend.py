"""A stdio MCP server (the SDK's MCPServer) whose tool waits for its client's answer and records how the wait ended.

Not a test module: the gateway runs it as a backend. `hold` asks the client to confirm (a form
elicitation) and waits; `outcomes` lists how every wait of `hold` ended so far: "answered",
"refused" (the client's side answered with an error) or "cancelled" (the call was cancelled).
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

server = MCPServer("holding", version="1.0.0", log_level="WARNING")
ended: list[str] = []


class Confirmation(BaseModel):
    confirm: bool


@server.tool()
async def hold(ctx: Context) -> str:
    """Ask the client to confirm, and wait for the answer."""
    try:
        answer = await ctx.elicit("Hold on?", schema=Confirmation)
    except anyio.get_cancelled_exc_class():
        ended.append("cancelled")
        raise
    except MCPError as exc:
        ended.append("refused")
        return f"refused: {exc}"
    ended.append("answered")
    return answer.action


@server.tool()
async def outcomes() -> list[str]:
    """How the waits of `hold` ended, in order."""
    return list(ended)


if __name__ == "__main__":
    server.run("stdio")
