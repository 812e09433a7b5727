"""gateway.dispatch.stateless: the dispatcher's 2026-07-28 method table, capability checks and result forms."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from gateway.dispatch.stateless import CACHE_SCOPE, CACHE_TTL_MS, StatelessRules
from gateway.protocol.eras import Envelope
from gateway.protocol.errors import MissingClientCapability

SERVER_INFO = {"name": "gw", "version": "1"}


async def handler(message: Any, ctx: Any) -> Any:
    return {}


def test_2026_serves_the_session_methods_it_kept_and_discover() -> None:
    handshake = {m: handler for m in ("initialize", "ping", "tools/list", "tools/call", "logging/setLevel",
                                      "resources/subscribe", "resources/unsubscribe", "prompts/get")}
    table = StatelessRules(server_info=SERVER_INFO).methods(handshake, handler, lambda: "v1")
    assert set(table) == {"tools/list", "tools/call", "prompts/get", "server/discover"}
    assert table["tools/call"] is handler  # completes its own results: no coroutine layer on the hot path


async def test_the_2026_handlers_complete_results_and_check_required_capabilities() -> None:
    rules = StatelessRules(server_info=SERVER_INFO, required={"prompts/get": {"sampling": {}}})
    table = rules.methods({"prompts/get": handler, "ping": handler}, handler, lambda: "v1")
    ctx = SimpleNamespace(envelope=Envelope("2026-07-28", {}))
    message = SimpleNamespace(params={})
    assert orjson.loads(orjson.dumps(await table["server/discover"](message, ctx))) == {
        "ttlMs": CACHE_TTL_MS, "cacheScope": CACHE_SCOPE, "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    with pytest.raises(MissingClientCapability):
        await table["prompts/get"](message, ctx)
    ctx.envelope = Envelope("2026-07-28", {"sampling": {}})
    assert (await table["prompts/get"](message, ctx))["resultType"] == "complete"


def test_a_required_capability_the_request_lacks_is_refused_naming_what_is_missing() -> None:
    rules = StatelessRules(server_info=SERVER_INFO, required={"tools/call": {"sampling": {"tools": {}}}})
    with pytest.raises(MissingClientCapability) as raised:
        rules.require("tools/call", Envelope("2026-07-28", {"sampling": {}}))
    assert raised.value.data == {"requiredCapabilities": {"sampling": {"tools": {}}}}
    rules.require("tools/call", Envelope("2026-07-28", {"sampling": {"tools": {}}}))
    rules.require("tools/list", Envelope("2026-07-28", {}))


def test_a_list_page_gets_its_2026_form_once_per_catalogue_version() -> None:
    rules = StatelessRules(server_info=SERVER_INFO)
    page = orjson.Fragment(b'{"tools":[]}')
    first = rules.complete("tools/list", page, "v1")
    assert rules.complete("tools/list", page, "v1") is first
    assert orjson.loads(orjson.dumps(first)) == {
        "tools": [], "ttlMs": CACHE_TTL_MS, "cacheScope": CACHE_SCOPE, "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    assert rules.complete("tools/list", page, "v2") is not first


def test_a_backends_own_error_is_decoded_and_resource_not_found_is_invalid_params_at_2026() -> None:
    rules = StatelessRules(server_info=SERVER_INFO)
    assert rules.passed_error(orjson.Fragment(b'{"code":-32002,"message":"gone","data":{"uri":"x"}}')) == {
        "code": -32602, "message": "gone", "data": {"uri": "x"}}
    assert rules.passed_error(orjson.Fragment(b'{"code":-1,"message":"own"}')) == {"code": -1, "message": "own"}


def test_an_encoded_backend_reply_and_an_object_are_completed() -> None:
    rules = StatelessRules(server_info=SERVER_INFO)
    invalid_arguments = rules.complete("tools/call", {"content": [], "isError": True}, "v1")
    assert invalid_arguments["resultType"] == "complete"
    reply = orjson.Fragment(b'{"messages":[],"_meta":{"own":1}}')
    assert orjson.loads(orjson.dumps(rules.complete("prompts/get", reply, "v1"))) == {
        "messages": [], "resultType": "complete",
        "_meta": {"own": 1, "io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    discover = rules.complete("server/discover", rules.discover({"tools": {"listChanged": True}}, "hi"), "v1")
    assert discover["capabilities"] == {"tools": {"listChanged": False}}
    assert (discover["ttlMs"], discover["cacheScope"], discover["resultType"]) == (CACHE_TTL_MS, "private", "complete")
    assert orjson.loads(orjson.dumps(rules.completed("tools/call", {"content": []}))) == {
        "content": [], "resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}


def test_the_ttl_is_the_shortest_a_backend_allows_and_never_longer_than_the_gateways() -> None:
    hints: list[int | None] = [None, 60_000]
    rules = StatelessRules(server_info=SERVER_INFO, backend_hints=lambda: hints)
    page = orjson.Fragment(b'{"tools":[]}')
    assert orjson.loads(orjson.dumps(rules.complete("tools/list", page, "v1")))["ttlMs"] == CACHE_TTL_MS
    hints.append(1_500)  # a 2026 backend's lists stay fresh for 1.5 s: the merged page no longer
    assert orjson.loads(orjson.dumps(rules.complete("tools/list", page, "v1")))["ttlMs"] == 1_500
    assert rules.complete("resources/read", {"contents": []}, "v1")["ttlMs"] == 1_500
    hints.clear()
    assert rules.complete("server/discover", {}, "v1")["ttlMs"] == CACHE_TTL_MS


def test_a_multi_round_retrys_result_is_never_to_be_cached() -> None:
    rules = StatelessRules(server_info=SERVER_INFO)
    assert rules.complete("resources/read", {"contents": []}, "v1", cacheable=False)["ttlMs"] == 0
    reply = orjson.Fragment(b'{"contents":[]}')
    assert rules.complete("resources/read", reply, "v1", cacheable=False)["ttlMs"] == 0
