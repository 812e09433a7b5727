"""An official-SDK backend run as a 2026 stdio child, whose tools change with no request at all.

Not a test module: tests run it as a stdio child (`protocol: "2026"`; the SDK's `MCPServer` serves
`subscriptions/listen` over stdio). SIGUSR1 offers one more tool (`late_<pid>_1`, `late_<pid>_2`, ...:
a restarted child's tools are new names) and
publishes the change on the server's bus, so it reaches the open listen requests and nothing
else: no call through the gateway comes before or after it. Its lists are cached for ten minutes
(`ttlMs`), so the gateway cannot learn of the change by refreshing early either. `touch(uri, text)`
changes `memo://a` or `memo://b` and publishes `notifications/resources/updated`; `listening()`
says how many listen requests are open on the child now (each one subscribes to the bus).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable

import anyio
from mcp.server import CacheHint, MCPServer
from mcp.server.mcpserver import Context
from mcp.server.subscriptions import InMemorySubscriptionBus, ServerEvent, ToolsListChanged
from mcp_types.methods import CACHEABLE_METHODS

TTL_MS = 600_000


class CountingBus(InMemorySubscriptionBus):
    """The SDK's in-process bus, counting its listeners: one per open listen request."""

    listeners = 0

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe, done = super().subscribe(listener), False
        self.listeners += 1

        def counted() -> None:
            nonlocal done
            if not done:
                done = True
                self.listeners -= 1
            unsubscribe()

        return counted


BUS = CountingBus()
TEXT = {"memo://a": "a0", "memo://b": "b0"}
server = MCPServer("listened", version="1.0.0", log_level="WARNING", subscriptions=BUS,
                   cache_hints={method: CacheHint(ttl_ms=TTL_MS) for method in CACHEABLE_METHODS})
_grown: list[asyncio.Task[None]] = []


@server.tool()
def echo(text: str) -> str:
    return text


@server.tool()
async def touch(uri: str, text: str, ctx: Context) -> str:
    """Change a resource and tell the listen requests that name it."""
    TEXT[uri] = text
    await ctx.notify_resource_updated(uri)
    return "touched"


@server.tool()
def listening() -> int:
    """How many listen requests are open on this child now."""
    return BUS.listeners


@server.resource("memo://a", mime_type="text/plain")
def memo_a() -> str:
    return TEXT["memo://a"]


@server.resource("memo://b", mime_type="text/plain")
def memo_b() -> str:
    return TEXT["memo://b"]


async def grow() -> None:
    name = f"late_{os.getpid()}_{len(_grown)}"
    server.add_tool(lambda: name, name=name, description=f"added on a signal: {name}")
    await BUS.publish(ToolsListChanged())


async def main() -> None:
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR1, lambda: _grown.append(loop.create_task(grow())))
    await server.run_stdio_async()


if __name__ == "__main__":
    anyio.run(main)
