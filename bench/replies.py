"""The JSON-RPC requests the load generator sends, and the checks every reply must pass."""

from __future__ import annotations

from typing import Any

import orjson


class CheckFailed(Exception):
    """A reply that is not the right answer to its own request."""


def request(message_id: int, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": message_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def decode(body: bytes, content_type: str, message_id: int) -> dict[str, Any]:
    """The reply to `message_id`, from a JSON body or from the events of an SSE body."""
    if content_type == "application/json":
        return orjson.loads(body)
    if content_type != "text/event-stream":
        raise CheckFailed(f"unexpected Content-Type {content_type}")
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"\n".join(line[5:].lstrip() for line in event.split(b"\n") if line.startswith(b"data:"))
        if data:
            message = orjson.loads(data)
            if isinstance(message, dict) and message.get("id") == message_id:
                return message
    raise CheckFailed("SSE reply carried no response to our id")


def expect_result(reply: Any, message_id: int) -> dict[str, Any]:
    if not isinstance(reply, dict) or reply.get("id") != message_id:
        raise CheckFailed(f"reply id {reply.get('id') if isinstance(reply, dict) else None!r} != {message_id}")
    if "result" not in reply:
        raise CheckFailed(f"error reply: {reply.get('error')}")
    return reply["result"]


def check_call(op: str, result: dict[str, Any], arguments: dict[str, Any]) -> None:
    if result.get("isError"):
        raise CheckFailed(f"tool error: {result.get('content')}")
    if op == "add":
        if result.get("structuredContent") != {"result": arguments["a"] + arguments["b"]}:
            raise CheckFailed(f"add gave {result.get('structuredContent')}")
        return
    if result.get("structuredContent") != arguments:
        raise CheckFailed("echo structuredContent differs from the arguments")
    content = result.get("content") or [{}]
    if orjson.loads(content[0].get("text", "null")) != arguments:
        raise CheckFailed("echo text differs from the arguments")
