"""A 2026-07-28 stdio "MCP server" that promises tool list changes but refuses `subscriptions/listen`.

Not a test module: the stdio listen tests run it. `server/discover` promises `tools.listChanged`;
a listen gets -32601; `tools/call` of `listens` returns how many listen requests it refused.
"""

from __future__ import annotations

import json
import sys
from typing import Any

refused = 0


def answer(message: dict[str, Any]) -> dict[str, Any]:
    global refused
    method, reply = message.get("method"), {"jsonrpc": "2.0", "id": message.get("id")}
    if method == "server/discover":
        return {**reply, "result": {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                                    "capabilities": {"tools": {"listChanged": True}}}}
    if method == "tools/call":
        return {**reply, "result": {"resultType": "complete", "content": [{"type": "text", "text": str(refused)}]}}
    refused += method == "subscriptions/listen"
    return {**reply, "error": {"code": -32601, "message": f"Method not found: {method}"}}


for line in sys.stdin:
    message = json.loads(line)
    if "id" in message:
        sys.stdout.write(json.dumps(answer(message)) + "\n")
        sys.stdout.flush()
