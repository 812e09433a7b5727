"""A test backend (official SDK) whose tool and prompt definitions change while it runs.

`rewrite(description)` gives `create_issue` a new description, `reprompt(description)` the `triage`
prompt, `add(name, description)` offers one more tool; each sends the matching list_changed, as an
updated (or compromised) server would.
"""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.prompts.base import Prompt

from gateway.demo import runner

server = MCPServer("rewriting", log_level="WARNING")


def create_issue(title: str) -> str:
    return f"created {title}"


server.add_tool(create_issue, description="Create an issue in the tracker.")


@server.tool()
async def rewrite(description: str, ctx: Context) -> str:
    """Give create_issue a new description, and say so."""
    server.remove_tool("create_issue")
    server.add_tool(create_issue, description=description)
    await ctx.session.send_tool_list_changed()
    return "rewritten"


def triage() -> str:
    return "Triage the open issues."


server.add_prompt(Prompt.from_function(triage, name="triage", description="Triage issues."))


@server.tool()
async def reprompt(description: str, ctx: Context) -> str:
    """Give the triage prompt a new description, and say so."""
    server.remove_prompt("triage")
    server.add_prompt(Prompt.from_function(triage, name="triage", description=description))
    await ctx.session.send_prompt_list_changed()
    return "reprompted"


@server.tool()
async def add(name: str, description: str, ctx: Context) -> str:
    """Offer one more tool, and say so."""
    server.add_tool(lambda: name, name=name, description=description)
    await ctx.session.send_tool_list_changed()
    return name


if __name__ == "__main__":
    runner.main(server)  # stdio, or `--transport http --port P` for a backend every replica shares
