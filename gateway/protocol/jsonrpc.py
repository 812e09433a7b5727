"""The JSON-RPC 2.0 envelope: parse bytes into messages, encode replies. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.protocol.errors import GatewayError, InvalidRequest, ParseError

RequestId = str | int
ID_TYPES = (str, int)
"""RequestId's types, for isinstance (a tuple: `str | int` would build a union on every call)."""
JsonObject = dict[str, Any]


@dataclass(slots=True)
class Message:
    """One validated client message: a request (has `id`), a notification, or a response.

    Not frozen (nothing changes one): one is made on every call, and a frozen dataclass's init costs
    several times more.
    """

    raw: JsonObject
    method: str | None
    id: RequestId | None
    params: JsonObject | None

    @property
    def is_request(self) -> bool:
        return self.method is not None and "id" in self.raw

    @property
    def is_notification(self) -> bool:
        return self.method is not None and "id" not in self.raw


MAX_ENCODABLE_DEPTH = 254
"""orjson reads 1024 levels of nesting but writes only this many (and repr() gives up near 1000)."""


def loads(body: bytes) -> Any:
    """Decode a body; anything that is not JSON (or not UTF-8) is a ParseError.

    A body nested deeper than the gateway could ever encode again (to forward it, or to
    quote it in an error) is an InvalidRequest here, so nothing downstream meets it.
    """
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ParseError("Parse error") from exc
    # C-speed filters for the rare deep candidates: that many openers and their closers need the length first
    if len(body) > 2 * MAX_ENCODABLE_DEPTH and body.count(b"[") + body.count(b"{") > MAX_ENCODABLE_DEPTH:
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError as exc:
            raise InvalidRequest("Invalid Request: nested too deeply") from exc
    return value


def parse_message(value: Any) -> Message:
    """Validate one decoded JSON-RPC message; raise InvalidRequest when it is not one."""
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        raise InvalidRequest("Invalid Request: not a JSON-RPC 2.0 message")
    has_id = "id" in value
    msg_id = value.get("id")
    if has_id and (isinstance(msg_id, bool) or not isinstance(msg_id, ID_TYPES)):
        raise InvalidRequest("Invalid Request: id must be a string or an integer")
    method = value.get("method")
    if method is None:
        if has_id and ("result" in value or "error" in value):
            return Message(value, None, msg_id, None)  # a response to a server request
        raise InvalidRequest("Invalid Request: missing method")
    if not isinstance(method, str) or not method:
        raise InvalidRequest("Invalid Request: method must be a non-empty string")
    params = value.get("params")
    if params is not None and not isinstance(params, dict):
        raise InvalidRequest("Invalid Request: params must be an object")
    return Message(value, method, msg_id if has_id else None, params)


def id_of(value: Any) -> RequestId | None:
    """The id of a decoded value that may not be a valid message (for its error reply), or None."""
    found = value.get("id") if isinstance(value, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def parse_batch_item(item: Any, *, not_batchable: str) -> Message | JsonObject:
    """A batch member as a Message, or the error reply it gets instead (also for `not_batchable`)."""
    try:
        message = parse_message(item)
    except GatewayError as exc:
        return error_response(id_of(item), exc)
    if message.method == not_batchable:
        return error_response(message.id, InvalidRequest(f"Invalid Request: {not_batchable} in a batch"))
    return message


def result_response(msg_id: RequestId, result: Any) -> JsonObject:
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def error_response(msg_id: RequestId | None, error: GatewayError) -> JsonObject:
    """The JSON-RPC error object for a GatewayError (id omitted when unknown)."""
    body: JsonObject = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    reply: JsonObject = {"jsonrpc": "2.0", "error": body}
    if msg_id is not None:
        reply["id"] = msg_id
    return reply


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)
