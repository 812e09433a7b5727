"""A test backend (official SDK, low-level Server) whose resources change, told to their subscribers.

`memo://a` and `memo://b` hold text. `resources/subscribe` remembers the subscribing session;
the tool `touch(uri, text)` changes a resource and sends `notifications/resources/updated` to
every session subscribed to it, as a real server with subscriptions does; `add_tool(name)` offers
one more tool and says so (`notifications/tools/list_changed`); `journal()` returns every
subscribe and unsubscribe it was sent, and how many sessions subscribe to each URI now.
Runs over stdio, or Streamable HTTP with `--transport http --port N`.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from mcp.server import Server

from gateway.demo import runner

TEXT = {"memo://a": "a0", "memo://b": "b0"}
SUBSCRIBED: dict[str, list[Any]] = {}
JOURNAL: list[list[str]] = []
EXTRA_TOOLS: list[str] = []


def _tool(tool: str, *properties: str) -> types.Tool:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in properties}}
    return types.Tool(name=tool, input_schema=schema)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    tools = [_tool("touch", "uri", "text"), _tool("add_tool", "name"), _tool("journal")]
    return types.ListToolsResult(tools=tools + [_tool(name) for name in EXTRA_TOOLS])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "touch":
        uri = arguments["uri"]
        TEXT[uri] = arguments["text"]
        for session in SUBSCRIBED.get(uri, []):
            await session.send_resource_updated(uri)
        text = "touched"
    elif params.name == "add_tool":
        EXTRA_TOOLS.append(arguments["name"])
        await ctx.session.send_tool_list_changed()
        text = "added"
    else:
        text = json.dumps({"journal": JOURNAL, "sessions": {uri: len(s) for uri, s in SUBSCRIBED.items()}})
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=uri, name=uri) for uri in TEXT])


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    uri = str(params.uri)
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=TEXT.get(uri, ""))])


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    uri = str(params.uri)
    JOURNAL.append(["subscribe", uri])
    SUBSCRIBED.setdefault(uri, []).append(ctx.session)
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    uri = str(params.uri)
    JOURNAL.append(["unsubscribe", uri])
    sessions = SUBSCRIBED.get(uri, [])
    if ctx.session in sessions:
        sessions.remove(ctx.session)
    return types.EmptyResult()


server = Server("watched", on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                on_read_resource=read_resource, on_subscribe_resource=subscribe,
                on_unsubscribe_resource=unsubscribe)

if __name__ == "__main__":
    runner.main(server, description="resources that change, told to their subscribers")
