"""An official-SDK backend that serves one protocol era only (or both), for the upstream era tests.

Not a test module: tests run it as a process. `--era 2026` serves 2026-07-28 only (a request
without a 2026 `MCP-Protocol-Version` header gets 400/-32022 naming 2026-07-28, GET and DELETE
405), `--era handshake` the handshake era only (a 2026 request gets the 400 a pre-2026 server
gives a request without a session), `--era both` whatever the SDK serves. The SDK serves both
eras from one app; the filter in front of it is what a single-era server answers.

Everything a parity test needs: tools (`add`, `slow` with progress and a log line, `ask`, which
elicits and samples through the SDK's era-portable resolvers, `locate` with an `x-mcp-header`
argument, `grow`, which offers one more tool and announces it), a prompt, a resource and a template, and completions.
Two tools work in one era only, as tools written for one era do: `confirm` asks with `ctx.elicit()` (a live
request: handshake era only), `pick` returns an `InputRequiredResult` itself (2026 only).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, Resolve, Sample
from mcp.types import Completion, CreateMessageResult, PromptReference, SamplingMessage, TextContent
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from pydantic import BaseModel, Field

MODERN = "2026-07-28"
HANDSHAKE_VERSIONS = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

SILENT = "--silent" in sys.argv[1:]
"""Built without `subscriptions/listen`: at 2026 it cannot announce a list change (discover promises none)."""
server = MCPServer("era", version="1.0.0", log_level="WARNING", subscriptions=False if SILENT else None)


@server.tool()
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@server.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Report progress `steps` times, log once, then answer."""
    for step in range(1, steps + 1):
        await anyio.sleep(0.05)
        await ctx.report_progress(step, steps)
    await ctx.info(f"slow finished {steps} steps")
    return f"done {steps}"


class Topic(BaseModel):
    """What `ask` asks the user."""

    topic: str


def choose(topic: str) -> Elicit[Topic]:
    return Elicit(f"Which topic instead of {topic}?", Topic)


def draft(chosen: Annotated[ElicitationResult[Topic], Resolve(choose)]) -> Sample:
    wanted = chosen.data.topic if chosen.action == "accept" else "nothing"
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=f"write about {wanted}"))],
                  max_tokens=50)


@server.tool()
def ask(topic: str, chosen: Annotated[ElicitationResult[Topic], Resolve(choose)],
        written: Annotated[CreateMessageResult, Resolve(draft)]) -> str:
    """Ask the user for a topic, then the client's model for a text about it."""
    wanted = chosen.data.topic if chosen.action == "accept" else chosen.action
    content = written.content
    text = content.text if isinstance(content, TextContent) else "?"
    return f"{wanted}: {text}"


@server.tool()
async def confirm(topic: str, ctx: Context) -> str:
    """Ask the user to confirm, the session way (a live elicitation request)."""
    answer = await ctx.elicit(f"Write about {topic}?", Topic)
    return f"{answer.action}: {answer.data.topic if answer.action == 'accept' else topic}"


PICK = ElicitRequest(params=ElicitRequestFormParams(
    message="Which color?", requested_schema={"type": "object", "properties": {"color": {"type": "string"}}}))


@server.tool(structured_output=False)
async def pick(ctx: Context) -> Any:
    """Ask the user for a color, the 2026 way: an InputRequiredResult, answered by the client's retry."""
    answer = (ctx.input_responses or {}).get("color")
    if answer is None:
        return InputRequiredResult(input_requests={"color": PICK}, request_state="asked-color")
    content = answer.get("content") if isinstance(answer, dict) else getattr(answer, "content", None)
    return f"{ctx.request_state}: {(content or {}).get('color')}"


@server.tool()
def locate(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], count: int) -> str:
    """Echo a header-routed argument."""
    return f"{region}:{count}"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Offer one more tool, `name`, and say so on the listen streams (at 2026; none if built `--silent`)."""
    server.add_tool(lambda: name, name=name, description=f"added {name}")
    await ctx.notify_tools_changed()
    return name


@server.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello, {name}!"


@server.resource("memo://note", mime_type="text/plain")
def note() -> str:
    return "a note"


@server.resource("memo://notes/{key}", mime_type="text/plain")
def keyed(key: str) -> str:
    return f"note {key}"


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
    if isinstance(ref, PromptReference) and argument.name == "name":
        names = [n for n in ("ada", "alan", "grace") if n.startswith(argument.value)]
        return Completion(values=names, total=len(names), has_more=False)
    return None


def era_filter(app: Any, era: str) -> Any:
    """The ASGI app behind a filter that lets only `era`'s requests through."""

    async def filtered(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or era == "both":
            return await app(scope, receive, send)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        version = headers.get("mcp-protocol-version")
        modern = version is not None and version not in HANDSHAKE_VERSIONS
        if era == "2026" and scope["method"] != "POST":
            return await _reply(send, 405, None, {"allow": "POST"})
        if era == "2026" and not modern:
            error = {"code": -32022, "message": "Unsupported protocol version",
                     "data": {"supported": [MODERN], "requested": version or ""}}
            return await _reply(send, 400, error)
        if era == "handshake" and modern:
            return await _reply(send, 400, {"code": -32600, "message": "Bad Request: Missing session ID"})
        return await app(scope, receive, send)

    return filtered


async def _reply(send: Any, status: int, error: dict[str, Any] | None, extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode() if error else b""
    headers = [(b"content-type", b"application/json"), *((k.encode(), v.encode()) for k, v in (extra or {}).items())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["2026", "handshake", "both"], default="both")
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--silent", action="store_true", help="serve no subscriptions/listen (see SILENT)")
    args = parser.parse_args()
    if args.transport == "stdio":
        anyio.run(server.run_stdio_async)
        return
    app = era_filter(server.streamable_http_app(host="127.0.0.1"), args.era)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=1, lifespan="on")
    anyio.run(uvicorn.Server(config).serve)


if __name__ == "__main__":
    main()
