"""Assistant backend: tools that ask the client back while they run, and log as they go.

``summarize`` asks the client's model (sampling), ``confirm`` asks the user for a form
(elicitation), ``sign_in`` sends the user to a URL (URL elicitation), ``workspace`` asks for
the client's roots, and ``chatty`` logs at several levels and reports progress. They show what
a gateway must relay to the client of a call. ``workspace_aside`` asks for the roots the way
``ctx.session.list_roots()`` does: outside the call (over HTTP, on the session's own stream).
"""

from __future__ import annotations

import time
import uuid

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import ListRootsRequest, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel

from . import runner

MAX_TEXT_CHARS = 10_000
MAX_STEPS = 20

server = MCPServer("assistant", version="1.0.0", log_level="WARNING")


class Confirmation(BaseModel):
    """What ``confirm`` asks the user."""

    confirm: bool
    note: str = ""


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Ask the client's model for a one-line summary of ``text``."""
    if len(text) > MAX_TEXT_CHARS:
        raise ToolError(f"text is over {MAX_TEXT_CHARS} characters")
    prompt = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarize: {text}"))
    asked = time.perf_counter()
    try:
        result = await ctx.session.create_message([prompt], max_tokens=100, related_request_id=ctx.request_id)
    except MCPError as exc:  # how fast a refusal came back is part of the answer
        raise ToolError(f"sampling refused after {(time.perf_counter() - asked) * 1000:.1f} ms: {exc}") from exc
    return result.content.text if isinstance(result.content, TextContent) else str(result.content)


@server.tool()
async def confirm(action: str, ctx: Context) -> str:
    """Ask the user to confirm ``action`` (a form elicitation)."""
    answer = await ctx.elicit(f"Do you want to {action}?", schema=Confirmation)
    if answer.action == "accept":
        return f"confirmed={answer.data.confirm} note={answer.data.note}"
    return answer.action


@server.tool()
async def sign_in(url: str, ctx: Context) -> str:
    """Send the user to ``url`` to sign in (a URL elicitation)."""
    answer = await ctx.elicit_url("Please sign in", url, elicitation_id=str(uuid.uuid4()))
    return answer.action


@server.tool()
async def workspace(ctx: Context) -> list[str]:
    """The client's roots, asked as part of this call."""
    metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
    roots = await ctx.session.send_request(ListRootsRequest(), ListRootsResult, metadata=metadata)
    return [str(root.uri) for root in roots.roots]


@server.tool()
async def workspace_aside(ctx: Context) -> list[str]:
    """The client's roots, asked outside this call (as ``list_roots()`` does)."""
    try:
        roots = await ctx.session.list_roots()  # pyright: ignore[reportDeprecated]
    except MCPError as exc:
        raise ToolError(f"roots refused: {exc}") from exc
    return [str(root.uri) for root in roots.roots]


@server.tool()
async def chatty(steps: int, ctx: Context) -> str:
    """Log one message per level for each of ``steps`` steps, reporting progress."""
    steps = max(1, min(steps, MAX_STEPS))
    for step in range(1, steps + 1):
        await ctx.debug(f"step {step}: debug")
        await ctx.info(f"step {step}: info")
        await ctx.warning(f"step {step}: warning")
        await ctx.error(f"step {step}: error")
        await ctx.report_progress(step, steps)
    return f"{steps} steps"


def main() -> None:
    """Command-line entry point."""
    runner.main(server, description="Assistant MCP backend")


if __name__ == "__main__":
    main()
