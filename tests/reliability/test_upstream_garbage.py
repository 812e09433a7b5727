"""Upstream garbage, through the gateway: a clear -32603 for the affected call only, then business as usual."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest
from conftest import RawClient, StartGateway, http_backend_config, make_config, make_token

from gateway import keys
from gateway.upstream import HttpUpstream, UpstreamError
from reliability.conftest import GARBAGE_STDIO, RunningMisbehaving

pytestmark = pytest.mark.timeout(120)

NO_BREAKER = {"failures": 0, "failure_ratio": 0}  # judge each fault on its own here
LIMITS = {"timeout_seconds": 2, "max_response_bytes": 1024 * 1024, "circuit": NO_BREAKER}
LEAKY_WORDS = ("Traceback", "orjson", "Error(", "987654321", "424242", "<html", "File \"")


async def call(client: RawClient, tool: str, arguments: dict[str, Any] | None = None) -> tuple[Any, float]:
    started = time.monotonic()
    body = await client.call("tools/call", {"name": tool, "arguments": arguments or {}})
    return body, time.monotonic() - started


def assert_backend_error(body: Any, backend: str, reason: str) -> None:
    error = body["error"]
    assert error["code"] == -32603, body
    assert error["data"] == {"backend": backend, "reason": reason}, body
    assert backend in error["message"]
    assert not any(word in str(body) for word in LEAKY_WORDS), body


@pytest.fixture
async def bad_client(misbehaving: RunningMisbehaving, gateway: StartGateway, raw_client: Any) -> RawClient:
    running = await gateway(make_config([http_backend_config("bad", misbehaving.url, **LIMITS)]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    return client


@pytest.mark.parametrize(("tool", "reason"), [
    ("not_json", "bad_response"),
    ("html", "bad_response"),
    ("html_502", "unavailable"),
    ("wrong_id", "bad_response"),
    ("no_result", "bad_response"),
    ("bad_error", "bad_response"),     # passed on, it would be no JSON-RPC error for the client either
    ("scalar_result", "bad_response"),
    ("deep", "bad_response"),          # parseable, but deeper than the gateway re-encodes
    ("sse_wrong_id", "bad_response"),
    ("huge", "bad_response"),          # cut by Content-Length, before reading
    ("huge_chunked", "bad_response"),  # an endless body: cut at max_response_bytes, not buffered
    ("endless_sse", "bad_response"),   # an SSE event that never ends: same
    ("disconnect", "unavailable"),
    ("silent_sse", "timeout"),         # a stream that never sends the response
    ("hang", "timeout"),
])
async def test_each_kind_of_http_garbage_fails_only_its_own_call(
    bad_client: RawClient, misbehaving: RunningMisbehaving, tool: str, reason: str
) -> None:
    body, seconds = await call(bad_client, f"bad__{tool}")
    assert_backend_error(body, "bad", reason)
    if reason != "timeout":
        assert seconds < LIMITS["timeout_seconds"], f"{tool} took {seconds:.2f}s: it waited for the timeout"
    assert misbehaving.backend.calls[tool] == 1  # a tools/call is never sent twice
    ok, _ = await call(bad_client, "bad__echo", {"after": tool})
    assert ok["result"]["structuredContent"] == {"after": tool}  # the connection was repaired or replaced


async def test_tool_errors_and_backend_errors_pass_through_unchanged(bad_client: RawClient) -> None:
    tool_error, _ = await call(bad_client, "bad__tool_error")
    assert tool_error["result"]["isError"] is True
    rpc_error, _ = await call(bad_client, "bad__rpc_error")
    assert rpc_error["error"] == {"code": -32000, "message": "backend says no"}


@pytest.fixture
async def stdio_client(gateway: StartGateway, raw_client: Any) -> tuple[RawClient, Any]:
    backend = {"name": "junk", "transport": "stdio", "command": GARBAGE_STDIO, **LIMITS}
    running = await gateway(make_config([backend]))
    client: RawClient = raw_client(running.url, make_token("acme"))
    await client.initialize()
    return client, running.app[keys.POOL].get("junk")


@pytest.mark.parametrize(("tool", "reason"), [
    ("huge", "bad_response"),          # over the line limit; its id is readable, so only it fails, at once
    ("no_result", "bad_response"),
    ("bad_error", "bad_response"),
    ("scalar_result", "bad_response"),
    ("huge_id_last", "timeout"),       # over the limit, id unreadable: it cannot be attributed, so it times out
    ("wrong_id", "timeout"),           # an answer for nobody is dropped; the caller's deadline ends it
    ("hang", "timeout"),
])
async def test_each_kind_of_stdio_garbage_fails_only_its_own_call(
    stdio_client: tuple[RawClient, Any], tool: str, reason: str
) -> None:
    client, upstream = stdio_client
    pid = upstream.pid
    body, seconds = await call(client, f"junk__{tool}")
    assert_backend_error(body, "junk", reason)
    if reason != "timeout":
        assert seconds < LIMITS["timeout_seconds"]
    ok, _ = await call(client, "junk__echo", {"after": tool})
    assert ok["result"]["structuredContent"] == {"after": tool}
    assert upstream.pid == pid  # garbage is skipped; the child is not restarted for it


async def test_junk_lines_on_stdout_do_not_disturb_the_call_they_precede(stdio_client: tuple[RawClient, Any]) -> None:
    client, _ = stdio_client
    body, _ = await call(client, "junk__junk", {"x": 1})
    assert body["result"]["structuredContent"] == {"x": 1}


async def test_a_duplicate_answer_goes_to_no_one_else(stdio_client: tuple[RawClient, Any]) -> None:
    client, _ = stdio_client
    first, _ = await call(client, "junk__duplicate", {"n": 1})
    second, _ = await call(client, "junk__echo", {"n": 2})
    assert first["result"]["structuredContent"] == {"n": 1}
    assert second["result"]["structuredContent"] == {"n": 2}


class _EarlyClosingBackend:
    """Raw HTTP: handshakes, then answers the tools/call with an SSE stream that ends before the response
    (priming event with an id, so the client must resume by GET) and stops listening, so the GET is refused."""

    def __init__(self) -> None:
        self.calls = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/mcp"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        body = orjson.loads(await reader.readexactly(length)) if length else {}
        writer.write(self._reply(body))
        await writer.drain()
        writer.close()
        if body.get("method") == "tools/call" and self.server is not None:
            self.server.close()

    def _reply(self, body: dict[str, Any]) -> bytes:
        if body.get("method") == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}
            data = orjson.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result})
            return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\nConnection: close\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(data) + data)
        if body.get("method") == "tools/call":
            self.calls += 1
            return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                    b"id: e1\nretry: 50\ndata: \n\n")
        return b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


async def test_a_tools_call_whose_stream_resume_is_refused_counts_as_sent() -> None:
    """Only a refused POST means "never sent" (retryable); a refused resume GET comes after the POST went out."""
    backend = _EarlyClosingBackend()
    upstream = HttpUpstream("early", url=await backend.start(), headers={}, max_connections=4, client_info={})
    await upstream.start()
    try:
        with pytest.raises(UpstreamError) as failed:
            await upstream.request("tools/call", {"name": "x"}, timeout=5)
        assert failed.value.reason == "unavailable"
        assert failed.value.sent is True  # so the routing layer never sends this tools/call again
        assert backend.calls == 1
    finally:
        await upstream.close()


async def test_a_refused_connection_counts_as_unsent_so_it_may_be_retried() -> None:
    backend = _EarlyClosingBackend()
    url = await backend.start()
    assert backend.server is not None
    backend.server.close()
    await backend.server.wait_closed()
    upstream = HttpUpstream("down", url=url, headers={}, max_connections=4, client_info={})
    await upstream.start()
    try:
        with pytest.raises(UpstreamError) as failed:
            await upstream.request("tools/call", {"name": "x"}, timeout=5)
        assert (failed.value.reason, failed.value.sent) == ("unavailable", False)
    finally:
        await upstream.close()
