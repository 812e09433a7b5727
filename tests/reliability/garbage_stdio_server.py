"""A stdio "MCP server" that answers badly on request, for the reliability tests (not a test module).

Tool names pick the misbehaviour: `echo` answers properly, `junk` prints garbage lines and
then answers, `huge` answers with one line over the gateway's limit (id first, so it can be
attributed), `huge_id_last` does the same with the id at the end, `no_result` answers
without result or error, `bad_error` with an error that is a string, `wrong_id` answers
another id, `duplicate` answers twice, `scalar_result` answers a number, `hang` never answers,
`cancelled` returns the request ids of every notifications/cancelled seen so far, `pid` returns
the process id.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TOOLS = ("echo", "junk", "huge", "huge_id_last", "no_result", "bad_error", "wrong_id", "duplicate", "scalar_result",
         "hang", "cancelled", "pid")
HUGE = 2 * 1024 * 1024
cancelled: list[Any] = []


def send(message: dict[str, Any]) -> None:
    write(json.dumps(message))


def write(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def result(request_id: Any, value: Any) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def call(rid: Any, name: str, args: dict[str, Any]) -> None:
    content = {"content": [{"type": "text", "text": name}], "structuredContent": args}
    if name == "junk":
        write("this is not JSON")
        write('{"half": ')
        write("\x00\x01\x02 binary-ish")
        result(rid, content)
    elif name in ("huge", "huge_id_last"):  # one line over the limit, the id first or last
        body = json.dumps({"content": [{"type": "text", "text": "x" * HUGE}]})
        envelope = f'"id": {rid}, "result": {body}' if name == "huge" else f'"result": {body}, "id": {rid}'
        write('{"jsonrpc": "2.0", ' + envelope + "}")
    elif name == "no_result":
        send({"jsonrpc": "2.0", "id": rid})
    elif name == "bad_error":
        send({"jsonrpc": "2.0", "id": rid, "error": "it broke"})
    elif name == "wrong_id":
        result(rid + 100000, content)
    elif name == "duplicate":
        result(rid, content)
        result(rid, {"content": [{"type": "text", "text": "second answer"}]})
    elif name == "scalar_result":
        result(rid, 42)
    elif name == "cancelled":
        result(rid, {"content": [], "structuredContent": {"cancelled": cancelled}})
    elif name == "pid":
        result(rid, {"content": [], "structuredContent": {"pid": os.getpid()}})
    elif name != "hang":
        result(rid, content)


def handle(message: dict[str, Any]) -> None:
    method, rid, params = message.get("method"), message.get("id"), message.get("params") or {}
    if method == "initialize":
        result(rid, {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                     "serverInfo": {"name": "garbage", "version": "1"}})
    elif method == "tools/list":
        result(rid, {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]})
    elif method == "tools/call":
        call(rid, params["name"], params.get("arguments") or {})
    elif method == "notifications/cancelled":
        cancelled.append(params.get("requestId"))
    elif rid is not None and method is not None:
        result(rid, {})


def main() -> None:
    for line in sys.stdin:
        handle(json.loads(line))


if __name__ == "__main__":
    main()
