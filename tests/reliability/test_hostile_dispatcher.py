"""Property tests: whatever message reaches Dispatcher.handle, the reply is a clean JSON-RPC answer.

Never an exception, never "Internal error" (which would mean an unexpected exception), always
the request's own id, always encodable, error messages short; notifications get no reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from conftest import http_backend_config, make_config
from hypothesis import HealthCheck, event, given, settings

from gateway.catalogue.refresher import CatalogueService
from gateway.catalogue.store import MemorySnapshotStore
from gateway.dispatch import Dispatcher
from gateway.protocol import jsonrpc
from gateway.protocol.errors import GatewayError
from gateway.tenancy import Principal, RequestContext
from gateway.upstream.base import JsonObject
from reliability.strategies import any_message

pytestmark = pytest.mark.timeout(300)

KNOWN_CODES = {-32700, -32600, -32601, -32602, -32603, -32000, -32002}
LABELLED = {"tools/call", "tools/list", "ping", "initialize", "prompts/get", "resources/read", "completion/complete"}
TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "strict", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}},
                                       "required": ["n"], "additionalProperties": False}},
]

LISTS: dict[str, JsonObject] = {
    "tools/list": {"tools": TOOLS}, "prompts/list": {"prompts": [{"name": "p", "arguments": []}]},
    "resources/list": {"resources": [{"uri": "r://1", "name": "one"}]},
    "resources/templates/list": {"resourceTemplates": [{"uriTemplate": "r://{x}", "name": "x"}]},
}


class EchoUpstream:
    """The one backend: two tools, a prompt, a resource and a template; requests echo their arguments,
    or fail the way backends do."""

    name = "echo"

    async def request(self, method: str, params: JsonObject | None, **_: Any) -> JsonObject:
        if method in LISTS:
            return {"jsonrpc": "2.0", "id": 1, "result": LISTS[method]}
        arguments = (params or {}).get("arguments")
        if isinstance(arguments, dict) and "fail" in arguments:
            return {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "backend says no"}}
        return {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "structuredContent": arguments}}

    server_capabilities: JsonObject = {"tools": {}, "prompts": {}, "resources": {}, "completions": {}}

    def on_list_changed(self, callback: Any) -> None: ...

    def on_resource_updated(self, callback: Any) -> None: ...


class OnePool:
    def __init__(self) -> None:
        self.upstream = EchoUpstream()

    def get(self, name: str) -> EchoUpstream:
        return self.upstream


@pytest.fixture(scope="module")
def dispatcher() -> Iterator[tuple[asyncio.AbstractEventLoop, Dispatcher]]:
    loop = asyncio.new_event_loop()
    config = make_config([http_backend_config("echo", "http://127.0.0.1:9/mcp")])
    pool: Any = OnePool()
    catalogue = CatalogueService(config=config, pool=pool, store=MemorySnapshotStore())
    loop.run_until_complete(catalogue.refresh_all())
    catalogue.ready.set()  # what start() does after its first build: requests wait for it
    yield loop, Dispatcher(config=config, catalogue=catalogue, pool=pool)
    loop.close()


def context(dispatcher: Dispatcher) -> RequestContext:
    tenant = dispatcher.config.tenants["acme"]
    return RequestContext(principal=Principal("acme", "fuzz"), tenant=tenant, request_id="fuzz",
                          protocol_version="2025-11-25")


def answer(loop: asyncio.AbstractEventLoop, dispatcher: Dispatcher, raw: Any) -> tuple[Any, JsonObject | None]:
    """What a transport does: validate the envelope, then dispatch; envelope errors become replies too."""
    try:
        message = jsonrpc.parse_message(raw)
    except GatewayError as exc:
        return None, jsonrpc.error_response(None, exc)
    return message, loop.run_until_complete(dispatcher.handle(message, context(dispatcher)))


def outcome(message: Any, reply: JsonObject | None) -> str:
    """A label for hypothesis' statistics, to see which paths the examples reached."""
    if reply is None:
        return "notification"
    method = message.method if message is not None else "invalid"
    return f"{method if method in LABELLED else 'other'}: " + (
        str(reply["error"]["code"]) if "error" in reply else "result")


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(raw=any_message)
def test_any_message_gets_a_clean_answer(dispatcher: tuple[asyncio.AbstractEventLoop, Dispatcher], raw: Any) -> None:
    loop, handler = dispatcher
    message, reply = answer(loop, handler, raw)
    event(outcome(message, reply))
    if message is not None and not message.is_request:
        assert reply is None
        return
    assert reply is not None
    encoded = jsonrpc.dumps(reply)  # never raises: the transport can always send it
    assert len(encoded) < 2_000_000
    if message is not None:
        assert reply["id"] == message.id and type(reply["id"]) is type(message.id)
    if "error" in reply:
        error = reply["error"]
        assert error["code"] in KNOWN_CODES, reply
        assert error["message"] != "Internal error", f"an unexpected exception for {raw!r:.300}"
        assert len(error["message"]) < 300


class EncodingUpstream(EchoUpstream):
    """Encodes the request as the real upstreams do before sending it."""

    async def request(self, method: str, params: JsonObject | None, **kwargs: Any) -> JsonObject:
        orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        return await super().request(method, params, **kwargs)


def test_arguments_too_deep_to_forward_are_invalid_params(
    dispatcher: tuple[asyncio.AbstractEventLoop, Dispatcher],
) -> None:
    loop, dispatch = dispatcher
    pool: Any = OnePool()
    pool.upstream = EncodingUpstream()
    encoding = Dispatcher(config=dispatch.config, catalogue=dispatch.catalogue, pool=pool)
    deep: Any = 0
    for _ in range(253):  # decodable and, alone, encodable: but not once wrapped in a request
        deep = [deep]
    params = {"name": "echo__echo", "arguments": {"x": deep}}
    raw = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    reply = loop.run_until_complete(encoding.handle(jsonrpc.parse_message(raw), context(encoding)))
    assert reply is not None
    assert reply["error"] == {"code": -32602, "message": "Invalid params: arguments nested too deeply"}
