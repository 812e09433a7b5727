"""The Streamable HTTP upstream against backends that misbehave as issue 16's items describe.

Where test_client_hostile.py checks the HTTP clients alone, these check what a call sees:
the failure reason, the handshake, the GET stream, the SSE resume. Each runs with every
client implementation; each docstring names its item.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from typing import Any

import orjson
import pytest
from aiohttp import web

from gateway.upstream import HttpUpstream, UpstreamError
from gateway.upstream.base import JsonObject
from upstream.http_servers import Script, read_head
from upstream.test_http import CLIENT_INFO, FakeBackend, event, result_for, sse

MakeUpstream = Callable[..., Awaitable[HttpUpstream]]


@pytest.fixture
async def make_upstream(kind: str) -> AsyncIterator[MakeUpstream]:
    made: list[HttpUpstream] = []

    async def make(url: str, max_connections: int = 10, **options: Any) -> HttpUpstream:
        upstream = HttpUpstream("hostile", url=url, headers={}, max_connections=max_connections,
                                client_info=CLIENT_INFO, http_client=kind, **options)
        made.append(upstream)
        await upstream.start()
        return upstream

    yield make
    for upstream in made:
        await upstream.close()


@pytest.fixture
async def fake(aiohttp_server: Any) -> FakeBackend:
    backend = FakeBackend()
    server = await aiohttp_server(backend.app)
    backend.url = str(server.make_url("/mcp"))
    return backend


async def tools_call(upstream: HttpUpstream, budget: float = 5) -> JsonObject:
    return await upstream.request("tools/call", {"name": "echo", "arguments": {}}, timeout=budget)


# ---------------------------------------------------------------- a raw MCP backend


def raw_backend(reply: Callable[[JsonObject], bytes], *, interim: bytes = b"") -> Script:
    """A scripted MCP backend: a proper handshake, then `reply(request)` written raw for each call.

    Every reply is preceded by `interim` (1xx replies); GET (the listener's stream) gets 405.
    """
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                request = await read_head(reader, keep_body=True)
                if request.startswith(b"GET "):
                    writer.write(interim + b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    continue
                message = orjson.loads(request.partition(b"\r\n\r\n")[2])
                writer.write(interim + (handshake_reply(message) or reply(message)))
                await writer.drain()
        writer.close()

    return script


def handshake_reply(message: JsonObject) -> bytes | None:
    if message.get("method") == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "raw", "version": "1"}}
        return json_reply({"jsonrpc": "2.0", "id": message["id"], "result": result})
    if message.get("method") == "server/discover":  # a handshake-era backend
        error = {"code": -32600, "message": "Bad Request: Missing session ID"}
        body = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
        return b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body), body)
    if "id" not in message:
        return b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    return None


def json_reply(message: JsonObject, extra: bytes = b"") -> bytes:
    body = orjson.dumps(message)
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s" % (
        extra, len(body), body)


def ok_result(message: JsonObject) -> JsonObject:
    return {"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}}


# ---------------------------------------------------------------- the items


async def test_a_flood_of_headers_fails_the_call_as_bad_response(
    scripted: Callable[[Script], Awaitable[str]], make_upstream: MakeUpstream
) -> None:
    """Item 1: 20,000 repeated header lines end the call at once with reason bad_response."""
    flood = b"X-Repeat: " + b"r" * 1024 + b"\r\n"
    upstream = await make_upstream(await scripted(raw_backend(
        lambda m: b"HTTP/1.1 200 OK\r\n" + flood * 20000 + b"\r\n")))
    with pytest.raises(UpstreamError) as failed:
        await tools_call(upstream)
    assert failed.value.reason == "bad_response"


async def test_interim_replies_do_not_break_the_handshake_or_the_calls(
    scripted: Callable[[Script], Awaitable[str]], make_upstream: MakeUpstream
) -> None:
    """Item 3: a backend answering 100 Continue / 103 Early Hints before every reply works normally."""
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"

    def reply(message: JsonObject) -> bytes:
        return json_reply(ok_result(message))

    upstream = await make_upstream(await scripted(raw_backend(reply, interim=interim)), max_connections=1)
    for _ in range(3):
        assert (await tools_call(upstream))["result"] == {"content": []}


async def test_a_gzip_bomb_is_cut_at_max_response_bytes(
    scripted: Callable[[Script], Awaitable[str]], make_upstream: MakeUpstream
) -> None:
    """Item 7: decoding is bounded by the reply size limit, however far a small body expands."""
    bomb = gzip.compress(b"[" + b" " * (64 * 1024 * 1024) + b"]")
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n" \
            b"Content-Length: %d\r\n\r\n%s" % (len(bomb), bomb)
    upstream = await make_upstream(await scripted(raw_backend(lambda m: reply)), max_response_bytes=1024 * 1024)
    with pytest.raises(UpstreamError) as failed:
        await tools_call(upstream)
    assert failed.value.reason == "bad_response"


async def test_the_get_stream_never_starves_calls_under_one_connection(
    fake: FakeBackend, make_upstream: MakeUpstream
) -> None:
    """Item 8: with max_connections 1, the gateway's GET listener holds its stream and calls still flow."""
    listening = asyncio.Event()

    async def hold(request: web.Request) -> web.StreamResponse:
        listening.set()
        return await sse(request, b": open\n\n", hold=True)

    fake.get_answer = hold
    upstream = await make_upstream(fake.url, max_connections=1)
    await upstream.request("tools/list", None, timeout=5)  # the gateway's own session: the listener starts
    await asyncio.wait_for(listening.wait(), 5)
    replies = await asyncio.gather(*(tools_call(upstream) for _ in range(5)))
    assert all("result" in reply for reply in replies)


async def test_a_stream_cut_inside_the_response_event_resumes_with_it(
    fake: FakeBackend, make_upstream: MakeUpstream
) -> None:
    """Item 9: the resume GET asks from the last complete event, so the half-sent response comes again."""
    resumed_from: list[str | None] = []
    pending: list[JsonObject] = []

    async def cut(request: web.Request, body: JsonObject) -> web.StreamResponse:
        pending.append(body)
        half = event(result_for(body, {"content": []}))[:-10]
        return await sse(request, b"id: e1\nretry: 10\ndata: \n\n", b"id: e2\n" + half)

    async def replay(request: web.Request) -> web.StreamResponse:
        resumed_from.append(request.headers.get("Last-Event-ID"))
        return await sse(request, b"id: e2\n" + event(result_for(pending[-1], {"content": ["again"]})))

    fake.answer, fake.get_answer = cut, replay
    upstream = await make_upstream(fake.url)
    reply = await upstream.request("tools/call", {"name": "x"}, timeout=5, session_key="tenant")
    assert reply["result"] == {"content": ["again"]}
    assert resumed_from == ["e1"]
