"""How each client reaches a backend: per-backend TLS (CA bundle, mutual TLS), proxies, happy eyeballs.

Real servers on 127.0.0.1: an aiohttp server behind TLS with a CA made in the test, and a
scripted forward proxy that either answers absolute-URL requests or tunnels CONNECT.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from gateway.config.backend_http import tls_context
from gateway.config.model import TlsConfig
from gateway.upstream.http.client import ConnectFailed, TransportFailed
from upstream.http_servers import Echo, MakeClient, Script, body_of, read_head, self_signed

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY",
                   "all_proxy")


@pytest.fixture
def clean_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
async def tls_echo(tmp_path: Path) -> AsyncIterator[tuple[Echo, Path, Path]]:
    """An https echo server whose certificate only the test's own CA file vouches for."""
    cert, key = self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    server = Echo()
    await server.start(ssl_context=server_tls, scheme="https")
    yield server, cert, key
    await server.stop()


# ---------------------------------------------------------------- per-backend TLS


async def test_a_backends_own_ca_bundle_is_trusted_and_only_for_it(
    tls_echo: tuple[Echo, Path, Path], client_for: MakeClient
) -> None:
    server, cert, _ = tls_echo
    with pytest.raises(ConnectFailed):  # the system's trust store does not know the test's CA
        await client_for(server.url).send("POST", {}, b"x", body_of)
    trusting = client_for(server.url, tls=tls_context(TlsConfig(ca_file=str(cert))))
    assert await trusting.send("POST", {}, b"x", body_of) == (200, b"POST /mcp?x=1 - x")


async def test_mutual_tls_sends_the_configured_client_certificate(
    tmp_path: Path, client_for: MakeClient
) -> None:
    (tmp_path / "server").mkdir()
    (tmp_path / "client").mkdir()
    server_cert, server_key = self_signed(tmp_path / "server")
    client_cert, client_key = self_signed(tmp_path / "client")
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(server_cert, server_key)
    server_tls.verify_mode = ssl.CERT_REQUIRED
    server_tls.load_verify_locations(client_cert)
    server = Echo()
    url = await server.start(ssl_context=server_tls, scheme="https")
    try:
        anonymous = client_for(url, tls=tls_context(TlsConfig(ca_file=str(server_cert))))
        with pytest.raises(TransportFailed):  # refused during or right after the handshake
            await anonymous.send("POST", {}, b"x", body_of)
        tls = TlsConfig(ca_file=str(server_cert), cert_file=str(client_cert), key_file=str(client_key))
        assert await client_for(url, tls=tls_context(tls)).send("POST", {}, b"x", body_of) == (
            200, b"POST /mcp?x=1 - x")
    finally:
        await server.stop()


# ---------------------------------------------------------------- proxies


class ForwardProxy:
    """A scripted HTTP proxy: answers absolute-URL requests itself, and tunnels CONNECT for real."""

    def __init__(self) -> None:
        self.request_lines: list[bytes] = []
        self.authorizations: list[bytes] = []
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(asyncio.IncompleteReadError, ConnectionError):
            head = await read_head(reader)
            line = head.split(b"\r\n")[0]
            self.request_lines.append(line)
            self.authorizations += [h for h in head.split(b"\r\n") if h.lower().startswith(b"proxy-authorization")]
            if line.startswith(b"CONNECT "):
                await self.tunnel(line.split(b" ")[1].decode(), reader, writer)
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nfrom-proxy-ok")
                await writer.drain()
                await reader.read()
        writer.close()

    async def tunnel(self, where: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = where.rsplit(":", 1)
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with suppress(ConnectionError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    writer.close()


@pytest.fixture
async def proxy(scripted: Callable[[Script], Awaitable[str]]) -> ForwardProxy:
    forward = ForwardProxy()
    forward.url = (await scripted(forward.handle)).removesuffix("/mcp")
    return forward


async def test_an_http_backend_is_reached_through_http_proxy_with_absolute_urls(
    proxy: ForwardProxy, client_for: MakeClient, clean_proxy_env: pytest.MonkeyPatch
) -> None:
    clean_proxy_env.setenv("HTTP_PROXY", proxy.url.replace("http://", "http://user:p%40ss@"))
    client = client_for("http://backend.invalid:8000/mcp", proxy_from_env=True)
    assert await client.send("POST", {}, b"{}", body_of) == (200, b"from-proxy-ok")
    assert proxy.request_lines == [b"POST http://backend.invalid:8000/mcp HTTP/1.1"]
    assert proxy.authorizations == [b"Proxy-Authorization: Basic dXNlcjpwQHNz"]  # user:p@ss


async def test_an_https_backend_is_reached_through_a_connect_tunnel(
    proxy: ForwardProxy, tls_echo: tuple[Echo, Path, Path], client_for: MakeClient,
    clean_proxy_env: pytest.MonkeyPatch
) -> None:
    server, cert, _ = tls_echo
    clean_proxy_env.setenv("HTTPS_PROXY", proxy.url)
    client = client_for(server.url, proxy_from_env=True, tls=tls_context(TlsConfig(ca_file=str(cert))))
    assert await client.send("POST", {}, b"x", body_of) == (200, b"POST /mcp?x=1 - x")
    assert proxy.request_lines == [f"CONNECT {server.url.split('/')[2]} HTTP/1.1".encode()]


@pytest.mark.parametrize("opted_in", [True, False], ids=["no-proxy-match", "not-opted-in"])
async def test_the_proxy_is_skipped_for_no_proxy_hosts_and_without_the_flag(
    proxy: ForwardProxy, echo: Echo, client_for: MakeClient, clean_proxy_env: pytest.MonkeyPatch, opted_in: bool
) -> None:
    clean_proxy_env.setenv("HTTP_PROXY", proxy.url)
    if opted_in:
        clean_proxy_env.setenv("NO_PROXY", "127.0.0.1")
    assert await client_for(echo.url, proxy_from_env=opted_in).send("POST", {}, b"x", body_of) == (
        200, b"POST /mcp?x=1 - x")
    assert proxy.request_lines == []


# ---------------------------------------------------------------- happy eyeballs


@pytest.fixture
def unanswering_address() -> Any:
    """127.0.0.2:port, where connects hang: a listener whose accept queue is full drops every SYN."""
    listener = socket.socket()
    listener.bind(("127.0.0.2", 0))
    listener.listen(0)
    filler = socket.create_connection(listener.getsockname())
    yield listener.getsockname()
    filler.close()
    listener.close()


async def test_an_unanswering_first_address_does_not_hold_up_the_next(
    echo: Echo, client_for: MakeClient, unanswering_address: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 6: two addresses, the first never answering: the second is tried after a short head start.

    The only mock here is DNS (a name with two addresses cannot be made on this machine
    without editing /etc/hosts); both connection attempts are real.
    """
    good = ("127.0.0.1", int(echo.url.split(":")[2].split("/")[0]))
    loop = asyncio.get_running_loop()
    resolve = loop.getaddrinfo

    async def two_addresses(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "dual.test":
            return await resolve(host, port, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", address) for address in (unanswering_address, good)]

    monkeypatch.setattr(loop, "getaddrinfo", two_addresses)
    started = time.monotonic()
    reply = await asyncio.wait_for(client_for("http://dual.test/mcp").send("GET", {}, None, body_of), 5)
    assert reply[0] == 200
    assert time.monotonic() - started < 2.0
