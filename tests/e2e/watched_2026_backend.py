"""An official-SDK backend serving 2026-07-28 only, whose resources change, told on listen streams.

Not a test module: tests run it as a process (`--port N`). `memo://a` and `memo://b` hold text;
the tool `touch(uri, text)` changes one and publishes `notifications/resources/updated` to the
listen streams that name it in `resourceSubscriptions` (the SDK's `ListenHandler`, which also makes
discover advertise `resources.subscribe`). `journal()` returns the `resourceSubscriptions` of each
listen stream open now (recorded in front of the SDK app), so a test sees what the gateway asks for.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio
import uvicorn
from era_backend import era_filter
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

TEXT = {"memo://a": "a0", "memo://b": "b0"}
OPEN: dict[int, list[str]] = {}
"""Open listen streams that name resources: a serial number -> their resourceSubscriptions."""

server = MCPServer("watched2026", version="1.0.0", log_level="WARNING")


@server.tool()
async def touch(uri: str, text: str, ctx: Context) -> str:
    """Change a resource and tell the listen streams subscribed to it."""
    TEXT[uri] = text
    await ctx.notify_resource_updated(uri)
    return "touched"


@server.tool()
def journal() -> str:
    """The resourceSubscriptions of the listen streams open now."""
    return json.dumps({"open": sorted(OPEN.values())})


@server.resource("memo://a", mime_type="text/plain")
def memo_a() -> str:
    return TEXT["memo://a"]


@server.resource("memo://b", mime_type="text/plain")
def memo_b() -> str:
    return TEXT["memo://b"]


def recording(app: Any) -> Any:
    """The ASGI app behind a recorder of the listen streams' resourceSubscriptions while they are open."""

    async def recorded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        uris = None
        if isinstance(request, dict) and request.get("method") == "subscriptions/listen":
            uris = ((request.get("params") or {}).get("notifications") or {}).get("resourceSubscriptions")
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        serial = id(replay)
        if uris:
            OPEN[serial] = sorted(uris)
        try:
            await app(scope, replay, send)
        finally:
            OPEN.pop(serial, None)

    return recorded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    app = recording(era_filter(server.streamable_http_app(host="127.0.0.1"), "2026"))
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=1, lifespan="on")
    anyio.run(uvicorn.Server(config).serve)


if __name__ == "__main__":
    main()
