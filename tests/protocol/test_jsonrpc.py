"""gateway.protocol.jsonrpc and gateway.protocol.spec: envelope rules and version negotiation."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.protocol import spec
from gateway.protocol.errors import InvalidParams, InvalidRequest, ParseError
from gateway.protocol.jsonrpc import Message, dumps, error_response, loads, parse_message, result_response

NOT_JSON_RPC = "Invalid Request: not a JSON-RPC 2.0 message"
BAD_ID = "Invalid Request: id must be a string or an integer"
BAD_METHOD = "Invalid Request: method must be a non-empty string"


def invalid(value: Any) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as info:
        parse_message(value)
    assert (info.value.code, info.value.http_status) == (-32600, 400)
    return info.value


# ---------------------------------------------------------------- loads


@pytest.mark.parametrize("body", [b"", b"{", b"not json", b"\xff\xfe", b'{"a": 1,}'])
def test_a_body_that_is_not_json_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError) as info:
        loads(body)
    assert (info.value.code, info.value.http_status, info.value.message) == (-32700, 400, "Parse error")


def test_a_json_body_is_decoded() -> None:
    assert loads(b'[{"jsonrpc": "2.0", "id": 1}]') == [{"jsonrpc": "2.0", "id": 1}]


# ---------------------------------------------------------------- requests and notifications


def test_a_request_is_parsed_with_its_id_method_and_params() -> None:
    raw = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "x"}}
    message = parse_message(raw)
    assert message == Message(raw, "tools/call", 7, {"name": "x"})
    assert (message.is_request, message.is_notification) == (True, False)


def test_a_string_id_is_kept() -> None:
    assert parse_message({"jsonrpc": "2.0", "id": "abc", "method": "ping"}).id == "abc"


@pytest.mark.parametrize("msg_id", [0, -1, "", 2**62])
def test_falsy_and_large_ids_are_still_ids(msg_id: int | str) -> None:
    message = parse_message({"jsonrpc": "2.0", "id": msg_id, "method": "ping"})
    assert (message.id, message.is_request) == (msg_id, True)


def test_a_request_without_params_has_none() -> None:
    assert parse_message({"jsonrpc": "2.0", "id": 1, "method": "ping"}).params is None


def test_a_notification_has_no_id() -> None:
    message = parse_message({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert (message.id, message.method, message.is_request, message.is_notification) == (
        None, "notifications/initialized", False, True,
    )


# ---------------------------------------------------------------- responses from the client


def test_a_result_response_is_accepted_without_method() -> None:
    raw = {"jsonrpc": "2.0", "id": 3, "result": {}}
    message = parse_message(raw)
    assert message == Message(raw, None, 3, None)
    assert (message.is_request, message.is_notification) == (False, False)


def test_an_error_response_is_accepted_without_method() -> None:
    message = parse_message({"jsonrpc": "2.0", "id": "s-1", "error": {"code": -1, "message": "no"}})
    assert (message.method, message.id) == (None, "s-1")


def test_a_response_without_id_is_refused() -> None:
    assert invalid({"jsonrpc": "2.0", "result": {}}).message == "Invalid Request: missing method"


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("value", [
    [], "ping", 1, None,
    {"id": 1, "method": "ping"},
    {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"jsonrpc": 2.0, "id": 1, "method": "ping"},
    {"jsonrpc": "2.0 ", "id": 1, "method": "ping"},
])
def test_anything_but_a_jsonrpc_2_object_is_refused(value: Any) -> None:
    assert invalid(value).message == NOT_JSON_RPC


@pytest.mark.parametrize("msg_id", [None, True, False, 1.0, 1.5, [1], {"a": 1}])
def test_an_id_that_is_not_a_string_or_integer_is_refused(msg_id: Any) -> None:
    assert invalid({"jsonrpc": "2.0", "id": msg_id, "method": "ping"}).message == BAD_ID


def test_a_bad_id_on_a_response_is_refused() -> None:
    assert invalid({"jsonrpc": "2.0", "id": None, "result": {}}).message == BAD_ID


def test_a_request_without_method_is_refused() -> None:
    assert invalid({"jsonrpc": "2.0", "id": 1}).message == "Invalid Request: missing method"


@pytest.mark.parametrize("method", ["", 5, ["ping"], {"m": 1}, False])
def test_a_method_that_is_not_a_non_empty_string_is_refused(method: Any) -> None:
    assert invalid({"jsonrpc": "2.0", "id": 1, "method": method}).message == BAD_METHOD


@pytest.mark.parametrize("params", [[1, 2], "x", 3, True])
def test_params_that_are_not_an_object_are_refused(params: Any) -> None:
    message = invalid({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": params}).message
    assert message == "Invalid Request: params must be an object"


# ---------------------------------------------------------------- encoding


def test_a_result_response_echoes_the_id() -> None:
    assert result_response("r1", {"ok": True}) == {"jsonrpc": "2.0", "id": "r1", "result": {"ok": True}}


def test_an_error_response_carries_code_message_and_data() -> None:
    reply = error_response(4, InvalidParams("Unknown tool: x", data={"tool": "x"}))
    assert reply == {"jsonrpc": "2.0", "id": 4,
                     "error": {"code": -32602, "message": "Unknown tool: x", "data": {"tool": "x"}}}


def test_an_error_response_without_data_has_no_data_key() -> None:
    assert error_response(0, InvalidRequest("Invalid Request: x")) == {
        "jsonrpc": "2.0", "id": 0, "error": {"code": -32600, "message": "Invalid Request: x"},
    }


def test_an_error_response_for_an_unknown_id_omits_the_id() -> None:
    assert error_response(None, ParseError("Parse error")) == {
        "jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"},
    }


def test_dumps_produces_compact_json_bytes() -> None:
    assert dumps({"jsonrpc": "2.0", "id": 1, "result": {}}) == b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert orjson.loads(dumps(result_response(1, [1]))) == {"jsonrpc": "2.0", "id": 1, "result": [1]}


# ---------------------------------------------------------------- spec


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_a_supported_version_is_answered_with_itself(version: str) -> None:
    assert spec.negotiate_version(version) == version


@pytest.mark.parametrize("requested", ["2024-11-05", "2026-07-28", "", None, 20250618, ["2025-06-18"]])
def test_an_unsupported_version_is_answered_with_the_latest(requested: object) -> None:
    assert spec.negotiate_version(requested) == "2025-11-25"


def test_the_latest_version_is_the_newest_supported_one() -> None:
    assert spec.LATEST_VERSION == max(spec.SUPPORTED_VERSIONS) == "2025-11-25"
    assert spec.DEFAULT_HEADER_VERSION == "2025-03-26"
    assert sorted(spec.BATCH_VERSIONS) == ["2025-03-26"]


@pytest.mark.parametrize(("name", "valid"), [
    ("a", True), ("A.b-c_d", True), ("x" * 64, True), ("x" * 65, False), ("", False), ("a b", False),
    ("a/b", False), ("é", False), ("a\n", False),
])
def test_the_tool_name_pattern_allows_only_short_safe_names(name: str, valid: bool) -> None:
    assert (spec.TOOL_NAME.fullmatch(name) is not None) is valid


def test_a_batch_member_that_is_not_a_message_gets_its_error_reply_with_its_id() -> None:
    from gateway.protocol.jsonrpc import parse_batch_item

    reply = parse_batch_item({"jsonrpc": "2.0", "id": 7}, not_batchable="initialize")
    assert reply == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": "Invalid Request: missing method"}}


def test_a_not_batchable_method_in_a_batch_is_an_invalid_request() -> None:
    from gateway.protocol.jsonrpc import parse_batch_item

    reply = parse_batch_item({"jsonrpc": "2.0", "id": 1, "method": "initialize"}, not_batchable="initialize")
    assert reply == {"jsonrpc": "2.0", "id": 1,
                     "error": {"code": -32600, "message": "Invalid Request: initialize in a batch"}}
