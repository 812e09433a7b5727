"""A 2026-07-28 request's trace context rides in `_meta`: with tracing off the backend gets it as it came
(header and `_meta`), and a backend hears the gateway's connection, not the client's envelope."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from backend_fixtures import recording_backend
from conftest import StartGateway, http_backend_config, make_config, make_token
from stateless_client import StatelessClient

pytestmark = pytest.mark.timeout(60)

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"
HEADER_TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
Seen = list[tuple[dict[str, str], dict[str, Any]]]


def recorder(seen: Seen) -> web.Application:
    """A backend of one tool that records each call's headers and params."""

    def call(request: web.Request, params: dict[str, Any]) -> dict[str, Any]:
        seen.append((dict(request.headers), params))
        return {"content": [{"type": "text", "text": "ok"}], "_meta": {"backend/own": 1}}

    return recording_backend(call, session_id="recorder-session")


@pytest.fixture
async def traced(aiohttp_server: Any, gateway: StartGateway) -> AsyncIterator[tuple[StatelessClient, Seen]]:
    seen: Seen = []
    backend = await aiohttp_server(recorder(seen))
    running = await gateway(make_config([http_backend_config("rec", str(backend.make_url("/mcp")))]))
    async with aiohttp.ClientSession() as session:
        yield StatelessClient(session, running.url, make_token("acme")), seen


async def _call(client: StatelessClient, meta: dict[str, Any], **headers: str) -> dict[str, Any]:
    message = client.request("tools/call", {"name": "rec__echo", "arguments": {}}, **meta)
    status, body, _ = await client.post(message, **headers)
    assert status == 200, body
    return dict(body["result"])


async def test_the_meta_trace_reaches_the_backend_as_it_came_in_header_and_meta(traced: Any) -> None:
    client, seen = traced
    await _call(client, {"traceparent": CLIENT_PARENT, "tracestate": "vendor=1"},
                traceparent=f"00-{HEADER_TRACE}-00f067aa0ba902b7-01")
    headers, params = seen[-1]
    assert headers["traceparent"] == CLIENT_PARENT == params["_meta"]["traceparent"]  # _meta's wins over the header's
    assert headers["tracestate"] == "vendor=1" == params["_meta"]["tracestate"]


async def test_without_a_meta_trace_the_header_trace_continues_in_both(traced: Any) -> None:
    client, seen = traced
    header = f"00-{HEADER_TRACE}-00f067aa0ba902b7-01"
    await _call(client, {}, traceparent=header)
    assert seen[-1][0]["traceparent"] == header == seen[-1][1]["_meta"]["traceparent"]


async def test_the_backend_gets_no_client_envelope_and_the_client_gets_the_backends_meta_merged(traced: Any) -> None:
    client, seen = traced
    result = await _call(client, {"app/key": "v", "io.modelcontextprotocol/logLevel": "info"})
    meta = seen[-1][1]["_meta"]
    assert not any(key.startswith("io.modelcontextprotocol/") for key in meta)
    assert meta["app/key"] == "v"
    assert result["_meta"]["backend/own"] == 1
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-gateway"
    assert result["resultType"] == "complete"
