"""An official-SDK backend over stdio that counts the calls it serves, for the policy tests.

Not a test module: tests run it as a process. Tools `read_order`, `refund` (an amount and a
reason), `push` and `counted` (how many calls of the others this process has served, by name);
a prompt `summary` and a resource `orders://all`.
"""

from __future__ import annotations

import json
from collections import Counter

import anyio
from mcp.server import MCPServer

server = MCPServer("counting", version="1.0.0", log_level="WARNING")
served: Counter[str] = Counter()


@server.tool()
def read_order(order: str) -> str:
    """Read one order."""
    served["read_order"] += 1
    return f"order {order}"


@server.tool()
def refund(amount: float, reason: str = "") -> str:
    """Refund an amount."""
    served["refund"] += 1
    return f"refunded {amount:g}"


@server.tool()
def push(branch: str) -> str:
    """Push a branch."""
    served["push"] += 1
    return f"pushed {branch}"


@server.tool()
def counted() -> str:
    """The calls served so far, by tool."""
    return json.dumps(served)


@server.prompt()
def summary(topic: str) -> str:
    """Summarize a topic."""
    served["summary"] += 1
    return f"Summarize {topic}."


@server.resource("orders://all")
def orders() -> str:
    """Every order."""
    served["orders"] += 1
    return "A-1, A-2"


if __name__ == "__main__":
    anyio.run(server.run_stdio_async)
