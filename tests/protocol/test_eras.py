"""gateway.protocol.eras: which era a request belongs to, the 2026 envelope ladder, and 2026 result forms."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from multidict import CIMultiDict

from gateway.protocol import eras
from gateway.protocol.errors import GatewayError, HeaderMismatch

MODERN = "2026-07-28"
VERSION, CAPABILITIES = "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO = {"name": "gw", "version": "1"}


@pytest.mark.parametrize(("header", "modern"), [
    (None, False), ("2025-03-26", False), ("2025-06-18", False), ("2025-11-25", False),
    (MODERN, True), ("2099-01-01", True), ("2024-11-05", True),  # not served in a session: told which are
])
def test_the_era_is_decided_by_the_version_header(header: str | None, modern: bool) -> None:
    assert eras.is_modern(header) is modern


@pytest.mark.parametrize(("body", "claims"), [
    ({"params": {"_meta": {VERSION: MODERN}}}, True),
    ({"params": {"_meta": {VERSION: "2025-11-25"}}}, False),
    ({"params": {"_meta": {VERSION: 2026}}}, False),
    ({"params": {"_meta": {"progressToken": 1}}}, False),
    ({"params": []}, False), ([{"params": {"_meta": {VERSION: MODERN}}}], False), (None, False),
])
def test_a_body_claims_2026_by_its_envelope(body: Any, claims: bool) -> None:
    assert eras.claims_modern(body) is claims


def meta(**changes: Any) -> dict[str, Any]:
    out = {VERSION: MODERN, CAPABILITIES: {}}
    out.update(changes)
    return {key: value for key, value in out.items() if value is not None}


def headers(**changes: str) -> CIMultiDict[str]:
    return CIMultiDict({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "t", **changes})


def refusal(params: Any, sent: CIMultiDict[str] | None, method: str = "tools/call") -> int:
    with pytest.raises(GatewayError) as raised:
        eras.take_envelope(method, params, sent)
    return raised.value.code


def test_an_envelope_that_passes_carries_the_requests_own_client() -> None:
    envelope = eras.take_envelope("tools/call", {"name": "t", "_meta": meta(**{
        "io.modelcontextprotocol/logLevel": "warning", "io.modelcontextprotocol/clientInfo": {"name": "c"}})},
        headers())
    assert (envelope.protocol_version, envelope.client_capabilities, envelope.log_level) == (MODERN, {}, "warning")
    assert envelope.client_info == {"name": "c"}
    assert envelope.logs("error") and envelope.logs("warning") and not envelope.logs("info")


@pytest.mark.parametrize(("params", "sent", "code"), [
    (None, headers(), -32602),
    ({"name": "t", "_meta": meta(**{VERSION: None})}, headers(), -32602),
    ({"name": "t", "_meta": meta(**{CAPABILITIES: None})}, headers(), -32602),
    ({"name": "t", "_meta": meta(**{VERSION: "2099-01-01"})}, headers(), -32020),  # the header rung comes first
    ({"name": "t", "_meta": meta(**{VERSION: "2099-01-01"})}, headers(**{"MCP-Protocol-Version": "2099-01-01"}),
     -32022),
    ({"name": "t", "_meta": meta(**{VERSION: 20260728})}, None, -32602),  # no headers to compare: a shape defect
    ({"name": "t", "_meta": meta()}, headers(**{"Mcp-Method": "tools/list"}), -32020),
    ({"name": "t", "_meta": meta()}, headers(**{"Mcp-Name": "u"}), -32020),
    ({"name": "t", "_meta": meta(**{CAPABILITIES: []})}, headers(), -32602),
    ({"name": "t", "_meta": meta(**{"io.modelcontextprotocol/logLevel": "verbose"})}, headers(), -32602),
])
def test_the_ladder_refuses_in_the_sdks_order(params: Any, sent: CIMultiDict[str] | None, code: int) -> None:
    assert refusal(params, sent) == code


def test_the_routing_headers_are_read_whatever_their_case() -> None:
    sent = CIMultiDict({"mcp-protocol-version": MODERN, "MCP-METHOD": "tools/call", "mcp-name": "t"})
    assert eras.take_envelope("tools/call", {"name": "t", "_meta": meta()}, sent).protocol_version == MODERN


@pytest.mark.parametrize("name", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"])
def test_a_routing_header_may_come_once_only(name: str) -> None:
    sent = headers()
    sent.add(name.lower(), sent[name])  # the same value twice: a last-copy reader could still be told another
    with pytest.raises(HeaderMismatch, match="more than once"):
        eras.take_envelope("tools/call", {"name": "t", "_meta": meta()}, sent)


def test_an_unsupported_version_names_every_served_one() -> None:
    with pytest.raises(GatewayError) as raised:
        eras.take_envelope("tools/list", {"_meta": meta(**{VERSION: "2099"})}, None)
    assert raised.value.data == {"supported": list(eras.SERVED_VERSIONS), "requested": "2099"}


def test_statuses_follow_the_codes() -> None:
    assert [eras.http_status(code) for code in (-32700, -32600, -32601, -32602, -32603, -32020, -32021, -32022)] == [
        400, 400, 404, 400, 200, 400, 400, 400]


def test_missing_capabilities_are_named_down_to_their_parts() -> None:
    required = {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}
    declared = {"elicitation": {"form": {}}, "roots": {"listChanged": True}}
    assert eras.missing_capabilities(required, declared) == {"sampling": {}, "elicitation": {"url": {}}}
    complete = {**declared, "sampling": {}, "elicitation": {"form": {}, "url": {}}}
    assert eras.missing_capabilities(required, complete) == {}


def test_2026_capabilities_promise_no_change_notifications_and_no_tasks() -> None:
    handshake = {"tools": {"listChanged": True}, "prompts": {"listChanged": True},
                 "resources": {"subscribe": True, "listChanged": True}, "completions": {}, "logging": {},
                 "tasks": {"list": {}}}
    assert eras.stateless_capabilities(handshake) == {
        "tools": {"listChanged": False}, "prompts": {"listChanged": False},
        "resources": {"subscribe": False, "listChanged": False}, "completions": {}, "logging": {}}
    with_listen = eras.stateless_capabilities(handshake, listen=True)  # subscriptions/listen delivers them
    assert with_listen == {name: value for name, value in handshake.items() if name != "tasks"}


def test_a_completed_result_keeps_its_own_meta_and_gains_server_info_once() -> None:
    result = {"content": [], "_meta": {"own": 1, "io.modelcontextprotocol/serverInfo": {"name": "backend"}}}
    done = eras.completed(result, SERVER_INFO)
    assert done == {"content": [], "resultType": "complete",
                    "_meta": {"own": 1, "io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "backend"}  # a copy
    assert eras.completed(result, SERVER_INFO, in_place=True) is result and result == done


def test_a_page_tail_makes_a_list_page_its_2026_form() -> None:
    page = b'{"tools":[{"name":"a"}],"nextCursor":"c"}'
    done = orjson.loads(page[:-1] + eras.page_tail(SERVER_INFO, 5000, "private"))
    assert done == {"tools": [{"name": "a"}], "nextCursor": "c", "ttlMs": 5000, "cacheScope": "private",
                    "resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}


def test_the_envelope_leaves_meta_with_what_a_backend_may_hear() -> None:
    given = {"name": "t", "_meta": {VERSION: MODERN, CAPABILITIES: {}, "io.modelcontextprotocol/clientInfo": {},
                                    "io.modelcontextprotocol/logLevel": "info", "progressToken": 1,
                                    "traceparent": "old", "tracestate": "s"}}
    eras.take_envelope("tools/call", given, headers())
    assert given == {"name": "t", "_meta": {"progressToken": 1, "traceparent": "old", "tracestate": "s"}}
    enveloped = {"name": "t", "_meta": meta()}
    eras.take_envelope("tools/call", enveloped, headers())
    assert enveloped == {"name": "t"}  # an envelope-only `_meta` goes altogether
