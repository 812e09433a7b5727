"""The upstream HTTP client contract, run against every implementation (the builtin and aiohttp's).

Real servers on 127.0.0.1: aiohttp, TLS, and raw scripted sockets. The hostile cases of issue
16 are in test_client_hostile.py.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from backend_fixtures import free_port

from gateway.upstream.http import connection
from gateway.upstream.http.client import ClientOptions, ConnectFailed, Response, TransportFailed
from gateway.upstream.http.clients import open_client
from upstream.http_servers import Echo, MakeClient, Script, body_of, read_head, self_signed, status_only

# ---------------------------------------------------------------- the basics


async def test_requests_carry_method_path_headers_and_body_and_reuse_one_connection(
    echo: Echo, client_for: MakeClient
) -> None:
    client = client_for(echo.url)
    for n in range(3):
        status, body = await client.send("POST", {"X-Test": f"t{n}"}, b'{"n":1}', body_of)
        assert (status, body) == (200, f'POST /mcp?x=1 t{n} {{"n":1}}'.encode())
    assert await client.send("DELETE", {}, None, body_of) == (200, b"DELETE /mcp?x=1 - ")
    assert len(echo.connections) == 1  # keep-alive: one TCP connection for all four


async def test_reply_headers_are_lower_cased_and_the_host_header_is_the_urls(
    echo: Echo, client_for: MakeClient
) -> None:
    async def headers(resp: Response) -> dict[str, str]:
        await resp.read()
        return resp.headers

    seen = await client_for(echo.url).send("GET", {}, None, headers)
    assert seen["x-seen-host"] == echo.url.split("/")[2]
    assert seen["content-type"].startswith("application/octet-stream")


async def test_concurrent_requests_stay_within_max_connections(
    echo: Echo, client_for: MakeClient
) -> None:
    client = client_for(echo.url, max_connections=2)
    replies = await asyncio.gather(*(client.send("POST", {}, str(n).encode(), body_of) for n in range(20)))
    assert sorted(body for _, body in replies) == sorted(f"POST /mcp?x=1 - {n}".encode() for n in range(20))
    assert len(echo.connections) <= 2


async def test_a_large_chunked_body_streams_through_intact(echo: Echo, client_for: MakeClient) -> None:
    """4 MiB: well past the high-water mark, so reading pauses and resumes on the way."""
    client = client_for(echo.url.replace("/mcp?x=1", "/big?size=4194304"))
    sizes: list[int] = []

    async def count(resp: Response) -> None:
        assert resp.content_length is None  # chunked
        async for chunk in resp.chunks():
            sizes.append(len(chunk))
            await asyncio.sleep(0)

    await client.send("GET", {}, None, count)
    assert sum(sizes) == 4 * 1024 * 1024
    await client.send("GET", {}, None, count)  # and the connection was fit for reuse
    assert len(echo.connections) == 1


async def test_a_connection_paused_by_a_large_reply_read_whole_is_fit_for_reuse(
    scripted: Callable[[Script], Awaitable[str]], client_for: MakeClient
) -> None:
    """A reply past the high-water mark that is complete before it is read: reading resumes for the next."""
    size = connection.HIGH_WATER + 1000

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(2):
            await read_head(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size)
            await writer.drain()
        await reader.read()
        writer.close()

    async def late_read(resp: Response) -> int:
        await asyncio.sleep(0.2)  # the whole body arrives (and pauses reading) before we look
        return len(await resp.read())

    client = client_for(await scripted(script), max_connections=1)
    assert await client.send("GET", {}, None, late_read) == size
    assert await asyncio.wait_for(client.send("GET", {}, None, late_read), 5) == size


async def test_tls_backends_are_verified_and_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  client_for: MakeClient) -> None:
    cert, key = self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    server = Echo()
    url = await server.start(ssl_context=server_tls, scheme="https")
    try:
        with pytest.raises(ConnectFailed):  # not trusted yet: verification is on
            await client_for(url).send("POST", {}, b"x", body_of)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert await client_for(url).send("POST", {}, b"x", body_of) == (200, b"POST /mcp?x=1 - x")
    finally:
        await server.stop()


# ---------------------------------------------------------------- replies aiohttp would not send


async def test_a_body_that_ends_with_the_connection_is_read_to_the_end(
    scripted: Callable[[Script], Awaitable[str]], client_for: MakeClient
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"1}")
        writer.close()

    client = client_for(await scripted(script))
    assert await client.send("POST", {}, b"{}", body_of) == (200, b'{"a":1}')
    assert await client.send("POST", {}, b"{}", body_of) == (200, b'{"a":1}')  # on a new connection


async def test_a_close_before_the_reply_is_a_transport_failure_not_a_connect_failure(
    scripted: Callable[[Script], Awaitable[str]], client_for: MakeClient
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.close()

    with pytest.raises(TransportFailed) as failed:
        await client_for(await scripted(script)).send("POST", {}, b"{}", body_of)
    assert not isinstance(failed.value, ConnectFailed)  # the request did go out


async def test_a_close_mid_body_is_a_transport_failure(
    scripted: Callable[[Script], Awaitable[str]], client_for: MakeClient
) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly a part")
        await writer.drain()
        writer.close()

    with pytest.raises(TransportFailed):
        await client_for(await scripted(script)).send("POST", {}, b"{}", body_of)


async def test_a_malformed_reply_fails_and_the_next_request_gets_a_fresh_connection(
    scripted: Callable[[Script], Awaitable[str]], client_for: MakeClient
) -> None:
    replies = iter([b"NOT HTTP AT ALL\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"])
    connections = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await read_head(reader)
        writer.write(next(replies))
        await writer.drain()
        await reader.read()  # until the client closes
        writer.close()

    client = client_for(await scripted(script))
    with pytest.raises(TransportFailed, match="malformed"):
        await client.send("POST", {}, b"{}", body_of)
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"ok")
    assert connections == 2


async def test_a_refused_port_is_a_connect_failure(client_for: MakeClient) -> None:
    with pytest.raises(ConnectFailed):
        await client_for(f"http://127.0.0.1:{free_port()}/mcp").send("POST", {}, b"{}", body_of)


async def test_an_idle_connection_the_server_closed_is_replaced_without_an_error(
    scripted: Callable[[Script], Awaitable[str]], client_for: MakeClient
) -> None:
    """Servers drop idle keep-alive connections (uvicorn after 5 s): that must not fail the next call."""
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # keep-alive was implied, but the server closes anyway

    client = client_for(await scripted(script))
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"ok")
    await asyncio.sleep(0.05)  # the close reaches the pooled connection
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"ok")


async def test_connections_idle_too_long_are_not_reused(echo: Echo, client_for: MakeClient) -> None:
    client = client_for(echo.url, idle_seconds=0.05)
    await client.send("GET", {}, None, body_of)
    await asyncio.sleep(0.3)
    await client.send("GET", {}, None, body_of)
    assert len(echo.connections) == 2


# ---------------------------------------------------------------- leaving early


async def test_a_reply_left_half_read_closes_its_connection(
    echo: Echo, client_for: MakeClient
) -> None:
    client = client_for(echo.url.replace("/mcp?x=1", "/big?size=1048576"))

    async def first_chunk(resp: Response) -> bytes:
        async for chunk in resp.chunks():
            return chunk
        return b""

    assert await client.send("GET", {}, None, first_chunk)
    assert await client.send("GET", {}, None, status_only) == 200
    assert len(echo.connections) == 2  # the half-read one was not reused


async def test_a_cancelled_request_closes_its_connection_and_the_next_one_works(
    scripted: Callable[[Script], Awaitable[str]], client_for: MakeClient
) -> None:
    first = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        if not first.is_set():
            first.set()
            await reader.read()  # never answers; returns when the client closes
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        writer.close()

    client = client_for(await scripted(script), max_connections=1)
    pending = asyncio.create_task(client.send("POST", {}, b"{}", body_of))
    await first.wait()
    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"ok")  # its slot was given back


@pytest.mark.parametrize(("name", "value"), [
    ("X-Subject", "alice\r\nAuthorization: Bearer stolen"),
    ("X-Subject", "alice\nX-Evil: 1"),
    ("X-Subject", "alice\rX-Evil: 1"),
    ("X-Subject", "nul\0byte"),
    ("X-Evil\r\nAuthorization", "x"),
])
async def test_a_line_break_in_a_header_is_refused_before_anything_is_sent(
    echo: Echo, client_for: MakeClient, name: str, value: str
) -> None:
    with pytest.raises(ValueError):
        await client_for(echo.url).send("POST", {name: value}, b"{}", body_of)
    assert not echo.connections


async def test_a_closed_client_refuses_new_requests(echo: Echo, kind: str) -> None:
    client = open_client(kind, echo.url, ClientOptions(max_connections=2))
    await client.close()
    with pytest.raises(ConnectFailed):
        await client.send("GET", {}, None, body_of)


def test_only_http_and_https_urls_are_accepted(kind: str) -> None:
    with pytest.raises(ValueError, match="not an http"):
        open_client(kind, "ftp://127.0.0.1/mcp", ClientOptions(max_connections=1))
