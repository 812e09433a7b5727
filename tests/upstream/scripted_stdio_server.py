"""A deliberately odd stdio "MCP server" for the stdio upstream's tests (not a test module).

It answers `initialize`, lists a few of its scripts as tools, and treats `tools/call` names
as scripts: `echo` returns its arguments, `noise` prints garbage lines first, `hang` never
answers, `ask` sends the client a request (`method`, sampling by default) and returns the
client's reply, `list_changed` emits the notification, `stray` answers an unknown id before
the real answer, `cancelled` returns the request ids of every notifications/cancelled seen
so far, `env` returns the environment, `stderr` writes to stderr, `exit` exits with status
3. `--stubborn` ignores stdin EOF and SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any

cancelled: list[Any] = []


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id: Any, value: Any) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def initialize(message: dict[str, Any]) -> None:
    version = message["params"]["protocolVersion"]
    info = {"name": "scripted", "version": "1"}
    result(message["id"], {"protocolVersion": version, "capabilities": {}, "serverInfo": info})


def call(message: dict[str, Any]) -> None:
    name, args, rid = message["params"]["name"], message["params"].get("arguments", {}), message["id"]
    if name == "noise":
        print("this is not JSON", flush=True)
        print("[1, 2", flush=True)
        result(rid, {"echo": args})
    elif name == "ask":
        send({"jsonrpc": "2.0", "id": "srv-1", "method": args.get("method", "sampling/createMessage"), "params": {}})
        reply = json.loads(sys.stdin.readline())
        result(rid, {"reply": reply})
    elif name == "list_changed":
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        result(rid, {})
    elif name == "stray":
        result(987654, {"stray": True})
        result(rid, {"echo": args})
    elif name == "cancelled":
        result(rid, {"cancelled": cancelled})
    elif name == "env":
        result(rid, {"env": dict(os.environ)})
    elif name == "stderr":
        print("hello from stderr", file=sys.stderr, flush=True)
        result(rid, {})
    elif name == "exit":
        sys.exit(3)
    elif name != "hang":
        result(rid, {"echo": args})


def handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    if method == "initialize":
        initialize(message)
    elif method == "tools/list":
        tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("echo", "hang", "ask", "cancelled")]
        result(message["id"], {"tools": tools})
    elif method == "tools/call":
        call(message)
    elif method == "notifications/cancelled":
        cancelled.append(message["params"]["requestId"])
    elif "id" in message and method is not None:
        result(message["id"], {})


def main() -> None:
    stubborn = "--stubborn" in sys.argv
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin:
        handle(json.loads(line))
    while stubborn:  # stdin closed, keep running until SIGKILL
        time.sleep(0.1)


if __name__ == "__main__":
    main()
