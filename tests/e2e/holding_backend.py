"""A stdio MCP server (the SDK's MCPServer) whose tool, prompt and resource ask their client while they run.

Not a test module: the gateway runs it as a backend. `hold` asks the client to confirm (a form
elicitation), waits, then works a while if told to, reporting progress; `outcomes` lists what became of every `hold`
so far: "answered", "refused" (its question got an error), "cancelled" (the call was cancelled).
`twice` asks two questions one after the other; `meanwhile` reports progress while its
question waits. The prompt `asked` samples the client's model;
the resource template `hold://answer/{topic}` asks the user.
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel

server = MCPServer("holding", version="1.0.0", log_level="WARNING")
ended: list[str] = []


class Confirmation(BaseModel):
    confirm: bool


@server.tool()
async def hold(ctx: Context, then_sleep: float = 0) -> str:
    """Ask the client to confirm, wait for the answer, then work `then_sleep` seconds."""
    try:
        answer = await ctx.elicit("Hold on?", schema=Confirmation)
        ended.append("answered")
        await ctx.report_progress(1, 2, "answered")
        await anyio.sleep(then_sleep)
        await ctx.report_progress(2, 2, "done")
    except anyio.get_cancelled_exc_class():
        ended.append("cancelled")
        raise
    except MCPError as exc:
        ended.append("refused")
        return f"refused: {exc}"
    return answer.action


@server.tool()
async def meanwhile(ctx: Context, after: float = 0.3) -> str:
    """Ask the client to confirm and, `after` seconds into the wait, report progress (the answer not in yet)."""
    async def report() -> None:
        await anyio.sleep(after)
        await ctx.report_progress(1, 2, "while asking")

    async with anyio.create_task_group() as group:
        group.start_soon(report)
        answer = await ctx.elicit("Hold on?", schema=Confirmation)
    return answer.action


@server.tool()
async def outcomes() -> list[str]:
    """How the waits of `hold` ended, in order."""
    return list(ended)


@server.tool()
async def twice(ctx: Context) -> str:
    """Ask two questions, the second once the first is answered."""
    answers = []
    for number in (1, 2):
        try:
            answers.append((await ctx.elicit(f"Question {number}?", schema=Confirmation)).action)
        except MCPError:
            answers.append("refused")
    return " ".join(answers)


@server.prompt()
async def asked(topic: str, ctx: Context) -> str:
    """A prompt whose text the client's model writes."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Write about {topic}"))
    result = await ctx.session.create_message([message], max_tokens=50, related_request_id=ctx.request_id)
    return result.content.text if isinstance(result.content, TextContent) else "?"


@server.resource("hold://answer/{topic}")
async def answer(topic: str, ctx: Context) -> str:
    """A resource whose text the user chooses."""
    return f"{topic}: {(await ctx.elicit(f'Answer about {topic}?', schema=Confirmation)).action}"


if __name__ == "__main__":
    server.run("stdio")
