"""W3C trace context with tracing off: backends get the client's context as it came, in the headers and in
`_meta` alike (the `_meta` one first, SEP-414), or a new trace the gateway starts; never a span id of a
span nobody exports. (With tracing on, tests/tracing follows the spans themselves.)"""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp import web
from backend_fixtures import recording_backend
from conftest import RawClient, StartGateway, http_backend_config, make_config, make_token

from gateway.tracing.context import parsed

pytestmark = pytest.mark.timeout(60)

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def recorder(seen: list[dict[str, Any]]) -> web.Application:
    """A backend of one tool that records each tools/call's headers (and params)."""

    def call(request: web.Request, params: dict[str, Any]) -> dict[str, Any]:
        seen.append({**request.headers, "params": params})
        return {"content": [{"type": "text", "text": "ok"}], "isError": False}

    return recording_backend(call, session_id="recorder-session")


@pytest.fixture
async def traced(aiohttp_server: Any, gateway: StartGateway, raw_client: Any) -> tuple[RawClient, list[dict[str, str]]]:
    seen: list[dict[str, str]] = []
    backend = await aiohttp_server(recorder(seen))
    running = await gateway(make_config([http_backend_config("rec", str(backend.make_url("/mcp")))]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    return client, seen


async def _call(client: RawClient, meta: dict[str, Any] | None = None, **headers: str) -> None:
    params: dict[str, Any] = {"name": "rec__echo", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    status, body, _ = await client.post(client.request("tools/call", params), **headers)
    assert status == 200 and body["result"]["isError"] is False


async def test_the_clients_header_trace_reaches_the_backend_as_it_came_in_header_and_meta(traced: Any) -> None:
    client, seen = traced
    await _call(client, traceparent=CLIENT_PARENT, tracestate="vendor=1")
    assert seen[-1]["traceparent"] == CLIENT_PARENT and seen[-1]["tracestate"] == "vendor=1"
    assert seen[-1]["params"]["_meta"] == {"traceparent": CLIENT_PARENT, "tracestate": "vendor=1"}


async def test_a_sessions_meta_trace_wins_and_the_header_carries_it_too(traced: Any) -> None:
    """The inconsistency of issue 31: `_meta`'s reached the backend while the header started another trace."""
    client, seen = traced
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    await _call(client, {"traceparent": CLIENT_PARENT, "tracestate": "vendor=2", "app/key": 1}, traceparent=other)
    assert seen[-1]["traceparent"] == CLIENT_PARENT and seen[-1]["tracestate"] == "vendor=2"
    assert seen[-1]["params"]["_meta"] == {"traceparent": CLIENT_PARENT, "tracestate": "vendor=2", "app/key": 1}


async def test_an_invalid_meta_trace_is_replaced_not_passed_on(traced: Any) -> None:
    client, seen = traced
    await _call(client, {"traceparent": "garbage"}, traceparent=CLIENT_PARENT)
    assert seen[-1]["params"]["_meta"]["traceparent"] == CLIENT_PARENT == seen[-1]["traceparent"]


async def test_without_a_traceparent_each_request_starts_its_own_trace(traced: Any) -> None:
    client, seen = traced
    await _call(client)
    await _call(client, traceparent="00-00000000000000000000000000000000-00f067aa0ba902b7-01")  # invalid
    traces = [TRACEPARENT.fullmatch(headers["traceparent"]) for headers in seen]
    assert all(traces) and traces[0][1] != traces[1][1]  # type: ignore[index]
    assert CLIENT_TRACE not in seen[1]["traceparent"]
    assert [headers["params"]["_meta"]["traceparent"] for headers in seen] == [h["traceparent"] for h in seen]


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
    made = parsed(given)
    assert (made is not None and TRACEPARENT.fullmatch(made) is not None and made[3:35] == CLIENT_TRACE) is kept


def test_unknown_flags_are_dropped_and_the_sampled_flag_kept() -> None:
    assert parsed(f"00-{CLIENT_TRACE}-00f067aa0ba902b7-ff") == f"00-{CLIENT_TRACE}-00f067aa0ba902b7-03"
    assert parsed(f"00-{CLIENT_TRACE}-00f067aa0ba902b7-00") == f"00-{CLIENT_TRACE}-00f067aa0ba902b7-00"
    assert parsed(f"01-{CLIENT_TRACE}-00f067aa0ba902b7-01-x") == f"00-{CLIENT_TRACE}-00f067aa0ba902b7-01"
