"""W3C trace context: the client's trace continues to HTTP backends, or the gateway starts one."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp import web
from conftest import RawClient, StartGateway, http_backend_config, make_config, make_token

from gateway.logs import traceparent_for

pytestmark = pytest.mark.timeout(60)

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def recording_backend(seen: list[dict[str, str]]) -> web.Application:
    """A minimal Streamable HTTP MCP server with one tool that records each tools/call's headers."""

    async def mcp(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if "id" not in body:
            return web.Response(status=202)
        result: dict[str, Any] = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                  "serverInfo": {"name": "recorder", "version": "1"}}
        if body["method"] == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif body["method"] == "tools/call":
            seen.append(dict(request.headers))
            result = {"content": [{"type": "text", "text": "ok"}], "isError": False}
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result},
                                 headers={"Mcp-Session-Id": "recorder-session"})

    app = web.Application()
    app.router.add_post("/mcp", mcp)
    app.router.add_delete("/mcp", lambda request: web.Response(status=200))
    return app


@pytest.fixture
async def traced(aiohttp_server: Any, gateway: StartGateway, raw_client: Any) -> tuple[RawClient, list[dict[str, str]]]:
    seen: list[dict[str, str]] = []
    backend = await aiohttp_server(recording_backend(seen))
    running = await gateway(make_config([http_backend_config("rec", str(backend.make_url("/mcp")))]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    return client, seen


async def _call(client: RawClient, **headers: str) -> None:
    status, body, _ = await client.post(client.request("tools/call", {"name": "rec__echo", "arguments": {}}),
                                        **headers)
    assert status == 200 and body["result"]["isError"] is False


async def test_the_clients_trace_continues_with_the_gateways_span(traced: Any) -> None:
    client, seen = traced
    await _call(client, traceparent=CLIENT_PARENT)
    trace_id, span_id, flags = TRACEPARENT.fullmatch(seen[-1]["traceparent"]).groups()  # type: ignore[union-attr]
    assert (trace_id, flags) == (CLIENT_TRACE, "01")
    assert span_id != "00f067aa0ba902b7"


async def test_without_a_traceparent_each_request_starts_its_own_trace(traced: Any) -> None:
    client, seen = traced
    await _call(client)
    await _call(client, traceparent="00-00000000000000000000000000000000-00f067aa0ba902b7-01")  # invalid
    traces = [TRACEPARENT.fullmatch(headers["traceparent"]) for headers in seen]
    assert all(traces) and traces[0][1] != traces[1][1]  # type: ignore[index]
    assert CLIENT_TRACE not in seen[1]["traceparent"]


@pytest.mark.parametrize(("given", "kept"), [
    (CLIENT_PARENT, True),
    (f"01-{CLIENT_TRACE}-00f067aa0ba902b7-01-future-fields", True),  # a later version: keep what we know
    (f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01-extra", False),  # version 00 has exactly four fields
    (f"ff-{CLIENT_TRACE}-00f067aa0ba902b7-01", False),
    (f"00-{CLIENT_TRACE.upper()}-00f067aa0ba902b7-01", False),
    (f"00-{CLIENT_TRACE}-0000000000000000-01", False),
    ("", False),
    (None, False),
])
def test_traceparent_parsing_follows_the_w3c_rules(given: str | None, kept: bool) -> None:
    made = TRACEPARENT.fullmatch(traceparent_for(given))
    assert made is not None
    assert (made[1] == CLIENT_TRACE) is kept


def test_unknown_flags_are_dropped_and_the_sampled_flag_kept() -> None:
    assert traceparent_for(f"00-{CLIENT_TRACE}-00f067aa0ba902b7-ff").endswith("-03")
    assert traceparent_for(f"00-{CLIENT_TRACE}-00f067aa0ba902b7-00").endswith("-00")
