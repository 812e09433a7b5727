"""Backends that misbehave as issue 16's numbered items describe, against every client implementation.

Each test's docstring names the item it covers. Servers are raw scripted sockets on 127.0.0.1,
so they can send what no HTTP server library would.
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import struct
import time
import zlib
from collections.abc import Awaitable, Callable
from contextlib import suppress

import pytest

from gateway.upstream.http.client import MAX_HEAD_BYTES, BadReply, TransportFailed
from upstream.http_servers import MakeClient, Script, body_of, read_head

Scripted = Callable[[Script], Awaitable[str]]
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


async def answer(writer: asyncio.StreamWriter, data: bytes) -> None:
    """Write `data`; a client that hung up meanwhile is not the script's failure."""
    with suppress(ConnectionError):
        writer.write(data)
        await writer.drain()


async def hold_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Keep the connection until the client closes it."""
    with suppress(ConnectionError):
        await reader.read()
    writer.close()


# ---------------------------------------------------------------- 1. the reply head is bounded


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 200 OK\r\n" + (b"X-Repeat: " + b"r" * 1024 + b"\r\n") * 20000 + b"Content-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX-Huge: " + b"h" * (16 * 1024 * 1024) + b"\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % n for n in range(129)) + b"Content-Length: 0\r\n\r\n",
], ids=["20000-repeated-headers", "16MiB-header-line", "129-headers"])
async def test_an_oversized_reply_head_is_a_bad_reply_quickly_without_stalling_the_loop(
    scripted: Scripted, client_for: MakeClient, data: bytes
) -> None:
    """Item 1: head size and header count are bounded; past them the reply is BadReply (bad_response)."""
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        await answer(writer, data)
        await hold_then_close(reader, writer)

    longest_stall = 0.0
    stop = asyncio.Event()

    async def watch_the_loop() -> None:
        nonlocal longest_stall
        while not stop.is_set():
            before = time.monotonic()
            await asyncio.sleep(0.01)
            longest_stall = max(longest_stall, time.monotonic() - before - 0.01)

    watcher = asyncio.create_task(watch_the_loop())
    started = time.monotonic()
    with pytest.raises(BadReply):
        await asyncio.wait_for(client_for(await scripted(script)).send("POST", {}, b"{}", body_of), 10)
    stop.set()
    await watcher
    assert time.monotonic() - started < 3.0
    assert longest_stall < 0.5


async def test_a_head_at_the_limits_is_still_accepted(scripted: Scripted, client_for: MakeClient) -> None:
    """Item 1: the limits refuse only what exceeds them (100 fields, 50 KiB: a large but lawful head)."""
    fields = b"".join(b"X-H%d: %s\r\n" % (n, b"v" * 500) for n in range(100))
    assert len(fields) < MAX_HEAD_BYTES

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        await answer(writer, b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 2\r\n\r\nok")
        await hold_then_close(reader, writer)

    assert await client_for(await scripted(script)).send("POST", {}, b"{}", body_of) == (200, b"ok")


# ---------------------------------------------------------------- 2. a stale keep-alive connection


def closing_second_request(how: str, connections: list[int]) -> Script:
    """Answer one request per connection; on the first connection, end it at the second request:
    `reset` (RST: the server never read it) or `close` (FIN after reading it)."""
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections) + 1)
        first_connection = len(connections) == 1
        await read_head(reader)
        await answer(writer, OK)
        if first_connection:
            await read_head(reader)
            if how == "reset":
                writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                           struct.pack("ii", 1, 0))
            writer.close()
            return
        await hold_then_close(reader, writer)

    return script


async def test_a_pooled_connection_the_server_closed_while_the_loop_was_busy_is_not_used(
    scripted: Scripted, client_for: MakeClient, kind: str
) -> None:
    """Item 2: the server drops its idle connection while the gateway is busy: the next POST still works."""
    if kind == "aiohttp":
        pytest.skip("aiohttp has no public way to look at a pooled socket before reuse (see aiohttp_client.py)")
    closed = asyncio.Event()
    connections = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_head(reader)
        await answer(writer, OK)
        if connections == 1:
            writer.close()  # the server's keep-alive ran out
            closed.set()
            return
        await hold_then_close(reader, writer)

    client = client_for(await scripted(script), max_connections=1)
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"ok")
    await closed.wait()
    time.sleep(0.2)  # noqa: ASYNC251 - a busy loop: the close is in the socket, no callback has seen it yet
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"ok")
    assert connections == 2


async def test_a_reused_connection_reset_before_any_reply_byte_is_retried_once_on_a_fresh_one(
    scripted: Scripted, client_for: MakeClient
) -> None:
    """Item 2: a reset means the server never read the request: sending it again is safe, for a POST too."""
    connections: list[int] = []
    client = client_for(await scripted(closing_second_request("reset", connections)), max_connections=1)
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"ok")
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"ok")
    assert len(connections) == 2


async def test_a_get_on_a_reused_connection_closed_before_any_reply_byte_is_retried(
    scripted: Scripted, client_for: MakeClient
) -> None:
    """Item 2: the SSE resume GET (idempotent) is sent again on a fresh connection after a clean close."""
    connections: list[int] = []
    client = client_for(await scripted(closing_second_request("close", connections)), max_connections=1)
    assert await client.send("GET", {}, None, body_of) == (200, b"ok")
    assert await client.send("GET", {}, None, body_of) == (200, b"ok")
    assert len(connections) == 2


async def test_a_post_the_server_read_and_then_closed_on_is_not_sent_twice(
    scripted: Scripted, client_for: MakeClient
) -> None:
    """Item 2's limit: after a clean close the backend may have acted on the POST (a tools/call is never resent)."""
    connections: list[int] = []
    client = client_for(await scripted(closing_second_request("close", connections)), max_connections=1)
    await client.send("POST", {}, b"{}", body_of)
    with pytest.raises(TransportFailed):
        await client.send("POST", {}, b"{}", body_of)
    assert len(connections) == 1


async def test_a_reused_connection_that_broke_mid_reply_is_not_retried(
    scripted: Scripted, client_for: MakeClient
) -> None:
    """Item 2: once a byte of the reply came, the server did read the request: no second copy of it."""
    requests = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        await read_head(reader)
        requests += 1
        await answer(writer, OK)
        await read_head(reader)
        requests += 1
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
        writer.close()

    client = client_for(await scripted(script), max_connections=1)
    await client.send("POST", {}, b"{}", body_of)
    with pytest.raises(TransportFailed):
        await client.send("POST", {}, b"{}", body_of)
    assert requests == 2


# ---------------------------------------------------------------- 3. 1xx interim replies


@pytest.mark.parametrize("interim", [
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n",
], ids=["100", "103", "100-then-103"])
async def test_interim_replies_are_skipped_and_the_connection_stays_in_step(
    scripted: Scripted, client_for: MakeClient, interim: bytes
) -> None:
    """Item 3: the final reply is the one handed over, and the next request reads its own reply."""
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        await answer(writer, interim + b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        await read_head(reader)
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
        await hold_then_close(reader, writer)

    client = client_for(await scripted(script), max_connections=1)
    assert await client.send("POST", {}, b"{}", body_of) == (202, b"")
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"second")


# ---------------------------------------------------------------- 4. redirects


def redirecting(status: int, location: bytes, seen: list[bytes]) -> Script:
    """A server that redirects requests for /mcp and echoes the body of any other path."""
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await read_head(reader)
            seen.append(head.split(b" ")[1])
            if head.split(b" ")[1] == b"/mcp":
                await answer(writer, b"HTTP/1.1 %d Moved\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n"
                             % (status, location))
            else:
                await answer(writer, OK)

    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(asyncio.IncompleteReadError, ConnectionError):
            await script(reader, writer)
        writer.close()

    return guarded


@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("location", [b"/mcp/", b"http://127.0.0.1:{port}/mcp/"])
async def test_a_same_origin_307_or_308_is_followed_once(
    scripted: Scripted, client_for: MakeClient, status: int, location: bytes
) -> None:
    """Item 4: the common case, an app mounted at /mcp that redirects to /mcp/."""
    seen: list[bytes] = []
    holder: list[str] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        port = holder[0].split(":")[2].split("/")[0].encode()
        await redirecting(status, location.replace(b"{port}", port), seen)(reader, writer)

    holder.append(await scripted(script))
    assert await client_for(holder[0]).send("POST", {}, b"{}", body_of) == (200, b"ok")
    assert seen == [b"/mcp", b"/mcp/"]


@pytest.mark.parametrize(("status", "location"), [
    (302, b"/mcp/"),
    (301, b"/mcp/"),
    (307, b"http://127.0.0.2:1/elsewhere"),
    (308, b"https://127.0.0.1/mcp/"),
    (307, b"/mcp"),  # a loop: followed once, then refused
])
async def test_other_redirects_are_an_error_naming_the_location(
    scripted: Scripted, client_for: MakeClient, status: int, location: bytes
) -> None:
    """Item 4: a redirect the gateway will not follow says where it pointed."""
    seen: list[bytes] = []
    with pytest.raises(BadReply, match=location.decode()):
        await client_for(await scripted(redirecting(status, location, seen))).send("POST", {}, b"{}", body_of)


# ---------------------------------------------------------------- 7. compressed replies


@pytest.mark.parametrize(("coding", "compress"), [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send it
], ids=["gzip", "deflate", "raw-deflate"])
async def test_compressed_replies_are_decoded_and_accept_encoding_is_sent(
    scripted: Scripted, client_for: MakeClient, coding: str, compress: Callable[[bytes], bytes]
) -> None:
    """Item 7: a backend that compresses its JSON reaches the JSON parser as JSON."""
    document = b'{"jsonrpc":"2.0","id":1,"result":{"text":"' + b"x" * 5000 + b'"}}'
    heads: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await read_head(reader))
        body = compress(document)
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: %s\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (coding.encode(), len(body), body))
        await hold_then_close(reader, writer)

    assert await client_for(await scripted(script)).send("POST", {}, b"{}", body_of) == (200, document)
    assert b"accept-encoding: gzip, deflate" in heads[0].lower()


# ---------------------------------------------------------------- 6. idle connections


async def test_idle_connections_are_closed_in_the_background(scripted: Scripted, client_for: MakeClient) -> None:
    """Item 6: after a burst, pooled connections idle past the limit are closed without a new request."""
    open_connections = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_connections
        open_connections += 1
        with suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                await read_head(reader)
                await asyncio.sleep(0.05)  # slow enough that the burst needs many connections
                await answer(writer, OK)
        open_connections -= 1
        writer.close()

    client = client_for(await scripted(script), max_connections=10, idle_seconds=0.3)
    await asyncio.gather(*(client.send("POST", {}, b"{}", body_of) for _ in range(10)))
    assert open_connections > 1
    for _ in range(40):
        await asyncio.sleep(0.1)
        if open_connections == 0:
            break
    assert open_connections == 0
